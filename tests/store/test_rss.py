"""Memory: RSS must not grow with the amount of data stored. Flushed commit-log, consume-queue and
index pages are released from the process (they stay in the page cache), so 4x the data costs no
more resident memory. (The 1 GiB / 4 GiB figures are in benchmarks/store_bench.py --rss-gib 4; this
test uses 128 MiB vs 512 MiB to stay quick.)"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.timeout(240)
def test_rss_flat_as_commitlog_grows(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "tests.store.rss_writer", str(tmp_path / "s"), "128", "512"],
        cwd=ROOT_DIR, capture_output=True, text=True, check=True, timeout=230,
    ).stdout.split("\n")
    rss = {int(mark): (int(anon), int(file)) for mark, anon, file in (ln.split() for ln in out if ln.strip())}
    # 384 MiB more data (plus its queues and index) may cost at most a few MiB of heap...
    anon_growth_mib = (rss[512][0] - rss[128][0]) / 1024
    assert anon_growth_mib < 16, f"heap (RssAnon) grew by {anon_growth_mib:.1f} MiB: {rss}"
    # ...and flushed store pages leave the process: what stays mapped in is bounded by a segment or so
    # (64 MiB commit-log segments), not by the 512 MiB written. Measured on each part apart, because the
    # kernel may reclaim the interpreter's own file pages at any time and VmRSS then moves either way.
    for mark, (_, file_kib) in rss.items():
        assert file_kib / 1024 < 128, f"{file_kib / 1024:.0f} MiB of mapped files resident at {mark} MiB: {rss}"
