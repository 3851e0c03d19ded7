"""The MQTT benchmark's summary over rounds and its verdict, and its load tool against mosquitto."""

import os
import shutil
import subprocess

import pytest

from benchmarks.mqtt_bench import Mosquitto, Plan, Round, load_tool, summarize, table, verdict
from benchmarks.sidebyside import parse


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


def test_the_p99_target_is_judged_on_the_paced_phase_when_it_ran():
    """Saturated, a broker at half the rate has twice the latency by construction (the same messages on the
    way); paced, both carry the same load and the p99 is what each adds."""
    rounds = [_round(0, 4000, 30.0, 8000, 10.0), _round(1, 4000, 30.0, 8000, 10.0)]
    for r, ferry, mosq in zip(rounds, (3.0, 5.0), (2.0, 2.0)):
        r.ferrymq["qos1paced"] = {"rate": 3900.0, "p50_ms": 0.5, "p99_ms": ferry}
        r.mosquitto["qos1paced"] = {"rate": 3950.0, "p50_ms": 0.2, "p99_ms": mosq}
    s = summarize(rounds)
    assert s["qos1_p99_ms"]["ratio"]["median"] == pytest.approx(3.0)
    assert s["qos1paced_p99_ms"]["ratio"]["median"] == pytest.approx(2.0)  # per round 1.5, 2.5
    assert verdict(s)["qos1_p99"] is True
    assert "QoS 1 p99, paced ≤ 2x mosquitto's: **met**" in table(s)
    for r in rounds:
        r.ferrymq["qos1paced"]["p99_ms"] = 9.0
    assert verdict(summarize(rounds))["qos1_p99"] is False


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


def test_the_load_tool_measures_a_real_broker(tmp_path):
    """Built from benchmarks/mqttload, one short run against mosquitto: every message sent is received
    and timed, and idle clients connect, subscribe and hold."""
    if shutil.which("go") is None and not os.path.exists("/usr/local/go/bin/go"):
        pytest.skip("Go is not installed")
    if shutil.which("mosquitto") is None and not os.path.exists("/usr/sbin/mosquitto"):
        pytest.skip("mosquitto is not installed")

    broker = Mosquitto(tmp_path)
    broker.start()
    try:
        url = f"tcp://127.0.0.1:{broker.port}"
        out = subprocess.run([str(load_tool()), "pubsub", "-broker", url, "-topic", "t/x", "-qos", "1",
                              "-warmup", "200ms", "-duration", "1s"],
                             capture_output=True, text=True, timeout=60, check=False)
        res = parse.result(out.stdout, "pubsub")
        assert res["received"] > 100 and res["received"] >= res["sent"] - 4 * 16  # at most the windows in flight
        assert 0 < res["p50_ms"] <= res["p99_ms"] <= res["max_ms"]
        assert res["failed"] == 0  # every QoS 1 PUBLISH acknowledged ("lost" counts 5 s waits: a loaded machine)
        # paced: 4 publishers pausing 5 ms on average after each PUBLISH send about 800 in a second
        timeline = tmp_path / "timeline.txt"
        out = subprocess.run([str(load_tool()), "pubsub", "-broker", url, "-topic", "t/paced", "-qos", "1",
                              "-pause", "5ms", "-warmup", "200ms", "-duration", "1s", "-timeline", str(timeline)],
                             capture_output=True, text=True, timeout=60, check=False)
        res = parse.result(out.stdout, "pubsub")
        assert 100 < res["sent"] <= 1000 and res["pause_ms"] == 5.0
        assert res["received"] >= res["sent"] - 4 * 16 and res["failed"] == 0
        # the timeline: one (send time, latency) line per measured message, the latencies those of the RESULT
        rows = [tuple(map(int, line.split())) for line in timeline.read_text().splitlines()]
        latencies = sorted(latency for _, latency in rows)
        assert len(rows) == res["received"] and all(sent > 0 and latency > 0 for sent, latency in rows)
        assert latencies[int(0.5 * (len(latencies) - 1))] / 1e6 == pytest.approx(res["p50_ms"])
        out = subprocess.run([str(load_tool()), "idle", "-broker", url, "-clients", "50", "-subscribe", "idle",
                              "-hold", "200ms"], capture_output=True, text=True, timeout=60, check=False)
        assert "READY " in out.stdout
        res = parse.result(out.stdout, "idle")
        assert (res["clients"], res["failed"], res["lost"], res["subscribed"]) == (50, 0, 0, True)
    finally:
        broker.stop()
