"""The HA benchmark: its summary over rounds (no broker), and a tiny run on a FerryMQ pair."""

import shutil

import pytest

from benchmarks.ha_bench import (
    FailoverRound,
    Round,
    failover_table,
    failover_verdict,
    lag_figures,
    main,
    summarize,
    summarize_failover,
    table,
    verdict,
)


def _round(i: int, role: str, apache_tps: float, ferry_tps: float, apache_p99: float, ferry_p99: float) -> Round:
    return Round(i, role, ["apache", "ferrymq"], figures={
        "apache": {"tps": apache_tps, "p99_ms": apache_p99, **lag_figures([0, 2048, 4096])},
        "ferrymq": {"tps": ferry_tps, "p99_ms": ferry_p99, **lag_figures([1024])},
    })


def test_ratios_are_taken_within_each_round_then_the_median_per_role():
    rounds = [_round(0, "SYNC_MASTER", 1000, 1200, 10.0, 9.0), _round(1, "SYNC_MASTER", 500, 450, 20.0, 22.0),
              _round(2, "SYNC_MASTER", 800, 880, 12.0, 12.5), _round(3, "ASYNC_MASTER", 2000, 1000, 5.0, 8.0)]
    s = summarize(rounds)
    assert s["SYNC_MASTER"]["tps_ratio"]["median"] == pytest.approx(1.1)  # per round 1.2, 0.9, 1.1
    assert s["SYNC_MASTER"]["p99_added_ms"]["median"] == pytest.approx(0.5)  # -1, 2, 0.5
    assert s["SYNC_MASTER"]["apache_lag_median_kib"]["median"] == 2.0
    assert s["SYNC_MASTER"]["apache_lag_max_kib"]["median"] == 4.0
    assert s["ASYNC_MASTER"]["tps_ratio"]["rounds"] == 1
    assert verdict(s) == {"sync_master_throughput": True}
    assert "SYNC_MASTER throughput target >= 1.0x Apache: met" in table(s)


def test_a_round_one_pair_missed_counts_for_the_other_only():
    half = Round(1, "SYNC_MASTER", ["ferrymq", "apache"], figures={"ferrymq": {"tps": 900.0, "p99_ms": 9.0}},
                 errors={"apache": "ValueError: no RESULT line"})
    s = summarize([_round(0, "SYNC_MASTER", 1000, 900, 10.0, 9.0), half])
    assert s["SYNC_MASTER"]["ferrymq_tps"]["rounds"] == 2
    assert s["SYNC_MASTER"]["tps_ratio"]["rounds"] == 1
    assert verdict(s) == {"sync_master_throughput": False}
    assert lag_figures([]) == {"lag_samples": 0}


def _failover(i: int, apache_s: float, ferry_s: float, ferry_lost: int = 0) -> FailoverRound:
    return FailoverRound(i, ["apache", "ferrymq"], figures={
        "apache": {"failover_s": apache_s, "acked": 100, "lost": 0, "duplicated": 0},
        "ferrymq": {"failover_s": ferry_s, "acked": 90, "lost": ferry_lost, "duplicated": 0}})


def test_failover_rounds_give_median_p90_and_the_lost_messages():
    rounds = [_failover(i, 4.0 + i, 3.0 + i / 2) for i in range(10)]
    s = summarize_failover(rounds)
    assert s["apache"]["failover_median_s"] == pytest.approx(8.5)  # 4..13
    assert s["apache"]["failover_p90_s"] == 13.0
    assert s["ferrymq"]["failover_median_s"] == pytest.approx(5.25)  # 3..7.5
    assert s["ratio"]["failover_median"] == pytest.approx(5.25 / 8.5)
    assert s["ferrymq"]["acked"] == 900
    assert failover_verdict(s) == {"failover_time": True, "no_acked_message_lost": True}
    assert "failover <= Apache's: met" in failover_table(s)
    lossy = summarize_failover([*rounds, _failover(10, 4.0, 20.0, ferry_lost=1)])
    assert failover_verdict(lossy) == {"failover_time": True, "no_acked_message_lost": False}


@pytest.mark.skipif(not (shutil.which("java") and shutil.which("mvn")), reason="needs java and mvn")
def test_a_tiny_run_on_a_ferrymq_sync_master_pair_reports_positive_figures(capsys):
    results = main(["--brokers", "ferrymq", "--roles", "SYNC_MASTER", "--rounds", "1", "--seconds", "2",
                    "--warmup", "2", "--threads", "4"])
    assert set(results["summary"]) == {"SYNC_MASTER"}
    for role, entry in results["summary"].items():
        assert entry["ferrymq_tps"]["median"] > 0 and entry["ferrymq_p99_ms"]["median"] > 0, role
        assert entry["ferrymq_lag_max_kib"]["median"] >= 0, role
        assert entry["apache_tps"] is None and entry["tps_ratio"] is None, role
    for done in results["rounds"]:
        assert done["errors"] == {} and done["figures"]["ferrymq"]["lag_samples"] > 0
        assert done["figures"]["ferrymq"]["failed"] == 0
    assert "| SYNC_MASTER | sync sends/s |" in capsys.readouterr().out
