"""The group commit benchmark waits for every put's fsync and counts what it measured."""

from benchmarks import group_commit_bench

MiB = 1 << 20


def test_group_commit_bench_counts_puts_and_fsyncs():
    r = group_commit_bench.run(0.3, 4, zeros=True, segment_size=8 * MiB)
    assert r["puts"] % 4 == 0 and r["puts"] >= 4
    # each group of 4 waited for an fsync (the store's periodic flushes may add some; the fill's own
    # fdatasync ran before timing started)
    assert r["fsyncs"] >= r["puts"] // 4
    assert 0 < r["fdatasync_p50_us"] <= r["fdatasync_p90_us"]
    assert r["record_bytes_per_fsync"] > 0
