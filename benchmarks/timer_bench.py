"""Timer throughput: timers scheduled (parked and taken into the wheel) and fired per second, one core.

Run: ``.venv/bin/python -m benchmarks.timer_bench [N]`` (default 100,000 timers, 1 KiB bodies,
spread over 100 one-second slots, ASYNC_FLUSH store in a temporary directory). It also prints the
bytes the wheel holds and the peak RSS: bodies stay in the commit log, so memory tracks N × 8 bytes,
and how long a restart takes with all N pending: after a clean stop (the wheel snapshot is loaded) and
after a crash with N/100 timers parked since that snapshot (only those are read again).
"""

from __future__ import annotations

import resource
import sys
import tempfile
import time

from twisted.internet.task import Clock

from ferrymq.server.broker.store_adapter import StoreAdapter
from ferrymq.server.schedule.timer import TimerConfig, TimerMessageService, park_timer
from ferrymq.server.store import MessageStore, MessageStoreConfig
from ferrymq.wire.message import MessageConst


def _rss_anon_kib() -> int:
    """Anonymous resident memory: the process's own heap, without file-backed (mapped store) pages."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def main(n: int = 100_000) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as root:
        store = MessageStore(MessageStoreConfig(storePathRootDir=root, mappedFileSizeCommitLog=256 * 1024 * 1024))
        store.start()
        wall = [time.time()]
        wheel = TimerMessageService(StoreAdapter(store, Clock()), Clock(), clock=lambda: wall[0])
        wheel.start()
        body = b"x" * 1024
        cfg = TimerConfig()
        now_ms = int(wall[0] * 1000)
        start = time.perf_counter()
        for i in range(n):
            props = {MessageConst.TIMER_DELAY_MS: str(2_000 + (i % 100) * 1000), MessageConst.TAGS: "T"}
            topic, queue = park_timer("Real", i % 4, props, now_ms, cfg)
            store.put_message(topic, queue, body, props)
        wheel.run_once()
        scheduled = n / (time.perf_counter() - start)
        assert wheel.pending == n, wheel.pending
        wheel_bytes = sum(len(offsets) * offsets.itemsize for offsets in wheel.slots.values())
        peak_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        anon_mib = _rss_anon_kib() / 1024
        wheel.stop()  # a clean stop writes the wheel snapshot
        start = time.perf_counter()
        TimerMessageService(StoreAdapter(store, Clock()), Clock(), clock=lambda: wall[0]).start()
        restart_s = time.perf_counter() - start
        late = max(n // 100, 1)
        for i in range(n, n + late):  # parked after the snapshot, then a crash: no stop, no new snapshot
            props = {MessageConst.TIMER_DELAY_MS: str(2_000 + (i % 100) * 1000), MessageConst.TAGS: "T"}
            topic, queue = park_timer("Real", i % 4, props, now_ms, cfg)
            store.put_message(topic, queue, body, props)
        start = time.perf_counter()
        wheel = TimerMessageService(StoreAdapter(store, Clock()), Clock(), clock=lambda: wall[0])
        wheel.start()
        crash_restart_s = time.perf_counter() - start
        assert wheel.pending == n + late, wheel.pending
        wall[0] += 200
        start = time.perf_counter()
        fired = wheel.run_once()
        fire_rate = fired / (time.perf_counter() - start)
        assert fired == n + late, fired
        wheel.stop()
        store.shutdown()
    print(
        f"timers: {scheduled:,.0f} scheduled/s (park + wheel), {fire_rate:,.0f} fired/s ({n:,} timers, 1 KiB); "
        f"wheel holds {wheel_bytes / 2**20:.1f} MiB of offsets; with all pending: anonymous RSS {anon_mib:.0f} MiB "
        f"(peak VmRSS {peak_rss_mib:.0f} MiB counts the mapped commit log's pages); restart with all pending: "
        f"{restart_s:.2f} s after a clean stop, {crash_restart_s:.2f} s after a crash with {late:,} parked since "
        f"the last wheel snapshot"
    )
    return {"scheduled_per_s": scheduled, "fired_per_s": fire_rate, "anon_rss_mib": anon_mib,
            "peak_rss_mib": peak_rss_mib, "restart_s": restart_s, "crash_restart_s": crash_restart_s}


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
