"""One small session against Apache RocketMQ: every figure is measured and the broker is gone afterwards.

Slow (about a minute and a half; downloads Apache's jars on first use), so marked ``compat``. It proves
the harness on the original before any FerryMQ figure is compared with it.
"""

import os

import pytest

from compat_tests import toolchain

from benchmarks.sidebyside.plan import METRICS, Plan
from benchmarks.sidebyside.procstat import descendants
from benchmarks.sidebyside.runner import Run

pytestmark = pytest.mark.compat

MISSING = toolchain.missing_tools("java", "javac", "mvn")


@pytest.mark.skipif(bool(MISSING), reason=f"needs {', '.join(MISSING)} on PATH")
def test_small_apache_session_measures_every_figure():
    plan = Plan.quick(
        duration_s=12, warmup_s=0, backlog=3000, recovery_mib=1, latency_rate=200, latency_warmup_s=1,
        sync_threads=(32,), batch_threads=4, async_inflight=64, brokers=("apache",), flush_types=("ASYNC_FLUSH",), fresh_s=20,
    )
    results = Run(plan, progress=lambda _line: None).execute()
    (session,) = results["sessions"]
    assert session["unavailable"] is None
    assert session["errors"] == {}
    expected = {m.key for m in METRICS} - {"sync_send_128_tps"}
    assert set(session["metrics"]) == expected
    assert all(v > 0 for v in session["metrics"].values()), session["metrics"]
    assert session["extra"]["drain"]["consumed"] >= 3000
    assert session["metrics"]["rss_load_mib"] >= session["metrics"]["rss_rest_mib"] * 0.5
    assert results["summary"]["ASYNC_FLUSH"]["drain_tps"]["apache"] == session["metrics"]["drain_tps"]
    assert descendants(os.getpid()) == []  # no broker, name server or tool left running
