"""The MQTT benchmark's summary over rounds and its verdict (no broker, no load tool)."""

import pytest

from benchmarks.mqtt_bench import Plan, Round, summarize, table, verdict


def _round(i: int, ferry_rate: float, ferry_p99: float, mosq_rate: float, mosq_p99: float, rss: float = 120.0) -> Round:
    return Round(i, ["ferrymq", "mosquitto"] if i % 2 == 0 else ["mosquitto", "ferrymq"],
                 ferrymq={"qos1": {"rate": ferry_rate, "p50_ms": 5.0, "p99_ms": ferry_p99, "tool_cores": 0.1},
                          "idle": {"rss_mib": rss, "cpu_pct": 2.0}},
                 mosquitto={"qos1": {"rate": mosq_rate, "p50_ms": 1.0, "p99_ms": mosq_p99, "tool_cores": 0.8},
                            "idle": {"rss_mib": 16.0, "cpu_pct": 0.1}})


def test_ratios_are_taken_within_each_round_then_the_median():
    rounds = [_round(0, 4000, 20.0, 40000, 4.0), _round(1, 6000, 9.0, 10000, 6.0), _round(2, 3000, 30.0, 5000, 10.0)]
    s = summarize(rounds)
    assert s["qos1_rate"]["ferrymq"] == {"median": 4000, "min": 3000, "max": 6000, "rounds": 3}
    assert s["qos1_rate"]["ratio"]["median"] == pytest.approx(0.6)  # per round 0.1, 0.6, 0.6
    assert s["qos1_p99_ms"]["ratio"]["median"] == pytest.approx(3.0)  # per round 5, 1.5, 3
    assert s["qos0_rate"] == {"ferrymq": None, "mosquitto": None, "ratio": None}  # no round measured QoS 0
    assert verdict(s) == {"qos1_throughput": True, "qos1_p99": False, "idle_rss": True}


def test_the_rss_target_holds_for_every_round():
    s = summarize([_round(0, 1, 1, 1, 1, rss=300.0), _round(1, 1, 1, 1, 1, rss=520.0)])
    assert verdict(s)["idle_rss"] is False


def test_a_phase_one_broker_missed_counts_for_the_other_only():
    half = Round(3, ["ferrymq", "mosquitto"], mosquitto={"qos1": {"rate": 30000.0, "p99_ms": 3.0}},
                 errors={"ferrymq/qos1": "ValueError: no RESULT line"})
    s = summarize([_round(0, 3000, 30.0, 30000, 3.0), half])
    assert s["qos1_rate"]["mosquitto"]["rounds"] == 2
    assert s["qos1_rate"]["ferrymq"]["rounds"] == 1
    assert s["qos1_rate"]["ratio"]["rounds"] == 1


def test_table_shows_both_brokers_the_ratio_and_the_targets():
    text = table(summarize([_round(0, 4000, 20.0, 40000, 4.0)]))
    assert "| QoS 1 publish->subscribe (msg/s) | 4,000 (4,000–4,000) | 40,000 (40,000–40,000) | 0.10 (0.10–0.10) |" in text
    assert "QoS 1 rate ≥ 0.5x mosquitto's: **missed**" in text
    assert "RSS with the idle clients < 500 MiB: **met**" in text
    assert "QoS 0" not in text  # not measured: no row


def test_full_runs_longer_than_quick_and_overrides_win():
    assert Plan.full().rounds > Plan.quick().rounds and Plan.full().idle_measure_s == 30.0
    assert Plan.quick(rounds=1, phases=("idle",)).phases == ("idle",)
