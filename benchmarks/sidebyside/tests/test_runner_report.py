"""Run order, medians and ratios, the table and the plot, without starting any broker."""

import os
from pathlib import Path

import pytest

from benchmarks.sidebyside import cli
from benchmarks.sidebyside.plan import METRICS, Outcome, Plan
from benchmarks.sidebyside.procstat import PeakRss, allocated_mib, descendants, rss_mib, tree_cpu_s, tree_rss_mib
from benchmarks.sidebyside.report import plot, table
from benchmarks.sidebyside.runner import session_order, summarize


def test_order_alternates_which_broker_goes_first():
    order = session_order(Plan.quick(rounds=2))
    assert order == [
        (0, "ASYNC_FLUSH", "apache"), (0, "ASYNC_FLUSH", "ferrymq"),
        (0, "SYNC_FLUSH", "ferrymq"), (0, "SYNC_FLUSH", "apache"),
        (1, "ASYNC_FLUSH", "apache"), (1, "ASYNC_FLUSH", "ferrymq"),
        (1, "SYNC_FLUSH", "ferrymq"), (1, "SYNC_FLUSH", "apache"),
    ]


def _outcomes():
    out = []
    for r, (a, f) in enumerate([(100.0, 50.0), (300.0, 90.0), (200.0, 70.0)]):
        out.append(Outcome(r, "apache", "ASYNC_FLUSH", metrics={"sync_send_32_tps": a, "e2e_p99_ms": 4.0}))
        out.append(Outcome(r, "ferrymq", "ASYNC_FLUSH", metrics={"sync_send_32_tps": f}, errors={"e2e_p99_ms": "boom"}))
    return out


def test_summary_is_median_over_rounds_and_ferry_over_apache():
    s = summarize(_outcomes(), Plan.quick(rounds=3, flush_types=("ASYNC_FLUSH",)))["ASYNC_FLUSH"]
    assert s["sync_send_32_tps"]["apache"] == 200.0
    assert s["sync_send_32_tps"]["ferrymq"] == 70.0
    assert s["sync_send_32_tps"]["ratio"] == pytest.approx(0.35)
    assert s["e2e_p99_ms"] == {"apache": 4.0, "apache_rounds": 3, "ferrymq": None, "ferrymq_rounds": 0, "ratio": None}


def _results(outcomes):
    plan = Plan.quick(rounds=3, flush_types=("ASYNC_FLUSH",))
    return {"meta": {"plan": plan.as_dict(), "rocketmq_version": "5.5.0"}, "summary": summarize(outcomes, plan),
            "sessions": [o.as_dict() for o in outcomes]}


def test_table_has_every_figure_ratio_and_reason_for_gaps():
    outcomes = _outcomes()
    outcomes.append(Outcome(3, "ferrymq", "ASYNC_FLUSH", unavailable="not available: broker not built"))
    outcomes[0].extra.update(commitlog_messages_at_kill=1_000_000, commitlog_mib_at_kill=1148.2, rss_anon_load_mib=2100.4)
    text = table(_results(outcomes))
    assert "| sync send, 32 threads (msg/s) | ASYNC_FLUSH | 200 | 70 | 0.35x | higher |" in text
    assert "| end-to-end latency p99 (ms) | ASYNC_FLUSH | 4.00 | n/a | n/a | lower |" in text
    assert len([line for line in text.splitlines() if line.startswith("| ") and "ASYNC_FLUSH" in line]) == len(METRICS)
    assert "- ferrymq ASYNC_FLUSH round 1: end-to-end latency p99 failed: boom" in text
    assert "- ferrymq ASYNC_FLUSH round 4: not available: broker not built" in text
    assert "(heap and stacks; the rest of RSS is mapped store pages): apache ASYNC_FLUSH round 1: 2,100." in text
    assert "Recovery: the broker is SIGKILLed holding 1,000,000 messages (~1,148 MiB) of commitlog, then relaunched." in text


def test_fresh_phase_rows_and_a_fresh_only_table():
    both = _outcomes()
    both[0].metrics["fresh_sync_send_32_tps"] = 8000.0
    both[1].metrics["fresh_sync_send_32_tps"] = 8800.0
    text = table(_results(both))
    assert "| sync send, 32 threads, fresh store (from the first send) (msg/s) | ASYNC_FLUSH | 8,000 | 8,800 | 1.10x | higher |" in text
    assert "| sync send, 32 threads (msg/s) | ASYNC_FLUSH | 200 | 70 | 0.35x | higher |" in text
    plan = Plan.quick(flush_types=("SYNC_FLUSH",), phases=("fresh",))
    fresh = [Outcome(0, "apache", "SYNC_FLUSH", metrics={"startup_s": 4.0, "fresh_sync_send_32_tps": 5000.0}),
             Outcome(0, "ferrymq", "SYNC_FLUSH", metrics={"startup_s": 1.0, "fresh_sync_send_32_tps": 4000.0},
                     extra={"fresh_sync32": {"broker_cpu_us_per_msg_last_window": 45.25}})]
    results = {"meta": {"plan": plan.as_dict(), "rocketmq_version": "5.5.0"}, "summary": summarize(fresh, plan),
               "sessions": [o.as_dict() for o in fresh]}
    rows = [line for line in table(results).splitlines() if line.startswith("| ") and "SYNC_FLUSH" in line]
    assert rows == ["| sync send, 32 threads, fresh store (from the first send) (msg/s) | SYNC_FLUSH | 5,000 | 4,000 | 0.80x | higher |",
                    "| start-up (launch to first send) (s) | SYNC_FLUSH | 4.00 | 1.00 | 0.25x | lower |"]
    assert "last report's window (less disturbed by other work on the machine than the rates): ferrymq SYNC_FLUSH round 1: 45.2." in table(results)


def test_plot_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="matplotlib is not installed (it comes with the test extra: pip install -e '.[test]')")
    path = plot(_results(_outcomes()), tmp_path / "bench.png")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_cli_sizes_and_validation():
    args = cli.parser().parse_args(["--full", "--brokers", "apache", "--rounds", "5"])
    plan = cli.plan_from(args)
    assert (plan.rounds, plan.backlog, plan.recovery_mib, plan.brokers) == (5, 1_000_000, 1024, ("apache",))
    assert cli.plan_from(cli.parser().parse_args([])) == Plan.quick()
    with pytest.raises(SystemExit, match="at least 12 s"):
        cli.plan_from(cli.parser().parse_args(["--duration", "5"]))
    assert cli.plan_from(cli.parser().parse_args(["--full"])).fresh_s == 60.0
    fresh = cli.plan_from(cli.parser().parse_args(["--phases", "fresh", "--flush", "SYNC_FLUSH", "--fresh-duration", "45"]))
    assert (fresh.phases, fresh.flush_types, fresh.fresh_s) == (("fresh",), ("SYNC_FLUSH",), 45.0)
    assert Plan.quick().phases == ("standard", "fresh")
    with pytest.raises(SystemExit, match="--fresh-duration must be at least 20 s"):
        cli.plan_from(cli.parser().parse_args(["--fresh-duration", "15"]))
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--phases", "cold"])
    with pytest.raises(SystemExit):
        cli.parser().parse_args(["--brokers", "kafka"])


def test_full_run_takes_longer_than_quick():
    assert Plan.full().estimate_s() > 4 * Plan.quick().estimate_s()
    fresh_only = Plan.quick(phases=("fresh",))
    assert fresh_only.estimate_s() < Plan.quick(phases=("standard",)).estimate_s() < Plan.quick().estimate_s()
    assert fresh_only.estimate_s() > 4 * fresh_only.fresh_s  # 2 brokers x 2 flush modes


def test_cpu_seconds_grow_with_work():
    import time

    before = tree_cpu_s(os.getpid())
    deadline = time.process_time() + 0.3
    while time.process_time() < deadline:
        pass
    assert 0.2 <= tree_cpu_s(os.getpid()) - before < 5


def test_own_rss_and_peak_sampler():
    own = rss_mib(os.getpid())
    assert own > 1
    with PeakRss(os.getpid(), interval_s=0.01) as peak:
        blob = bytearray(64 * 1024 * 1024)
        blob[::4096] = b"x" * len(blob[::4096])  # touch every page
        import time
        time.sleep(0.2)
    assert peak.peak >= own + 32
    del blob


def test_allocated_counts_blocks_not_length(tmp_path: Path):
    sparse = tmp_path / "commitlog" / "00000000000000000000"
    sparse.parent.mkdir()
    with open(sparse, "wb") as f:
        f.truncate(1 << 30)  # a 1 GiB mapped file that holds nothing yet
        f.write(b"y" * (2 << 20))
    assert 1.9 < allocated_mib(tmp_path) < 10


def test_tree_rss_counts_children():
    import subprocess
    import sys
    child = subprocess.Popen([sys.executable, "-c", "import time; b = bytearray(48 << 20); time.sleep(30)"])
    try:
        import time
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and (child.pid not in descendants(os.getpid()) or rss_mib(child.pid) < 40):
            time.sleep(0.05)
        assert child.pid in descendants(os.getpid())
        assert tree_rss_mib(os.getpid()) >= rss_mib(os.getpid()) + 40
    finally:
        child.kill()
        child.wait()
