"""Group commit benchmark: the store alone in SYNC_FLUSH, and what each fsync writes to the disk.

A SYNC_FLUSH send is answered after the fdatasync that covers it, so a latency-bound sender (the side by
side's 32 sync threads) runs at the pace of those fsyncs. This drives ``MessageStore`` in process with no
broker and no client: ``--group`` puts of 1 KiB, then wait for their fsync, again and again, and reports
puts/s, the fdatasync time and what the block device wrote per fsync (``/sys/block/*/stat``; "n/a" when
the store's device is not found there).

    .venv/bin/python -m benchmarks.group_commit_bench [--seconds 8] [--group 16] [--zeros [--piece BYTES]]

``--zeros``: the first segment is written full of zeros first, by the allocator's own fill, as every later
segment is (otherwise the puts land on a fresh store's fallocated first segment, which the store prepares
ahead of the writer: ``MappedFile.populate``). The figure that exposed
large page-cache folios (Linux 6.x): zeros written 8 MiB at a time made each fsync write ~1.7 MB to the
disk for ~17 KB of records. ``--piece``: the fill's write size instead of ``FILL_PIECE`` (8388608 is what
the fill did before).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

from ferrymq.server.store import mapped_file
from ferrymq.server.store.config import MessageStoreConfig
from ferrymq.server.store.message_store import MessageStore


def _device_stat(path: str) -> Path | None:
    """``/sys/block/<dev>/stat`` (or the partition's) of the device holding ``path``."""
    dev = os.stat(path).st_dev
    link = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
    if not link.exists():
        return None
    stat = link.resolve() / "stat"
    return stat if stat.exists() else None


def _written_bytes(stat: Path | None) -> int | None:
    return int(stat.read_text().split()[6]) * 512 if stat is not None else None


def run(seconds: float, group: int, zeros: bool, body_size: int = 1024, segment_size: int | None = None) -> dict:
    root = tempfile.mkdtemp(prefix="ferrymq-gc-bench-")
    try:
        cfg = MessageStoreConfig(storePathRootDir=root, flushDiskType="SYNC_FLUSH")
        if segment_size is not None:
            cfg.mappedFileSizeCommitLog = segment_size
        if zeros:
            first = os.path.join(root, "commitlog", mapped_file.segment_name(0))
            os.makedirs(os.path.dirname(first))
            mapped_file._create_file(first, cfg.mappedFileSizeCommitLog)
            mapped_file._fill_file(first, cfg.mappedFileSizeCommitLog, threading.Event())
        store = MessageStore(cfg)
        store.start()
        fsyncs: list[float] = []
        real = os.fdatasync

        def timed(fd: int) -> None:  # the store's own calls, timed where they are made
            t = time.perf_counter()
            real(fd)
            fsyncs.append(time.perf_counter() - t)

        os.fdatasync = timed
        try:
            body = b"x" * body_size
            done = threading.Event()
            left = [0]
            lock = threading.Lock()

            def answered(_result) -> None:
                with lock:
                    left[0] -= 1
                    if left[0] == 0:
                        done.set()

            stat = _device_stat(root)
            written0 = _written_bytes(stat)
            puts = 0
            start = time.perf_counter()
            end = start + seconds
            while time.perf_counter() < end:
                done.clear()
                left[0] = group
                for _ in range(group):
                    store.wait_flush(store.put_message("bench", puts % 8, body, {"TAGS": "t"}), answered)
                    puts += 1
                done.wait()
            elapsed = time.perf_counter() - start
            written1 = _written_bytes(stat)
            record_bytes = store.commitlog.max_offset
            n = len(fsyncs)
        finally:
            os.fdatasync = real
        store.shutdown()
    finally:
        shutil.rmtree(root, ignore_errors=True)
    ordered = sorted(fsyncs)
    return {
        "puts": puts,
        "puts_per_s": puts / elapsed,
        "fsyncs": n,
        "fdatasync_p50_us": statistics.median(ordered) * 1e6,
        "fdatasync_p90_us": ordered[int(n * 0.9)] * 1e6,
        "disk_bytes_per_fsync": (written1 - written0) / n if written0 is not None else None,
        "record_bytes_per_fsync": record_bytes / n,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seconds", type=float, default=8.0)
    p.add_argument("--group", type=int, default=16, help="puts per fsync wait")
    p.add_argument("--zeros", action="store_true", help="fill the first segment with zeros first")
    p.add_argument("--piece", type=int, default=mapped_file.FILL_PIECE, help="the fill's write size (bytes)")
    a = p.parse_args()
    mapped_file.FILL_PIECE = a.piece
    r = run(a.seconds, a.group, a.zeros)
    disk = f"{r['disk_bytes_per_fsync'] / 1024:.0f} KiB" if r["disk_bytes_per_fsync"] is not None else "n/a"
    first = f"zero-filled ({a.piece >> 10} KiB writes)" if a.zeros else "fallocated, prepared ahead,"
    print(f"{first} first segment, {a.group} puts per fsync: "
          f"{r['puts_per_s']:.0f} puts/s, fdatasync p50 {r['fdatasync_p50_us']:.0f} us p90 "
          f"{r['fdatasync_p90_us']:.0f} us, disk writes {disk} per fsync "
          f"(records {r['record_bytes_per_fsync'] / 1024:.0f} KiB)")


if __name__ == "__main__":
    main()
