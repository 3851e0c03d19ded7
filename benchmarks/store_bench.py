"""Store benchmark: appends/s and MB/s for 1 KiB messages (ASYNC_FLUSH, SYNC_FLUSH group commit) next to a
raw sequential write of the same bytes on the same disk; crash recovery time over ~1 GiB of commit log;
RSS as the commit log grows.

    .venv/bin/python -m benchmarks.store_bench [--dir DIR] [--messages N] [--recovery-gib G] [--rss-gib G]

Each message carries what a Java producer sends by default (TAGS, UNIQ_KEY, WAIT), so it is indexed
once; the broker hands the store both the parsed properties and the original string. Rates are given
by wall clock and by the writer thread's CPU time (the machine may be shared: CPU time shows what one
core sustains).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time

from ferrymq.server.store import ASYNC_FLUSH, SYNC_FLUSH, MessageStore, MessageStoreConfig
from ferrymq.wire.message import encode_properties
from ferrymq.wire.msgid import UniqKeyGenerator

BODY = os.urandom(1024)
TOPIC = "BenchTopic"
QUEUES = 8


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return -1.0


def make_props(n: int) -> list[tuple[dict, str]]:
    gen = UniqKeyGenerator()
    out = []
    for _ in range(n):
        p = {"TAGS": "TagA", "UNIQ_KEY": gen.next(), "WAIT": "true"}
        out.append((p, encode_properties(p)))
    return out


def open_store(root: str, flush: str, **kw) -> MessageStore:
    s = MessageStore(MessageStoreConfig(storePathRootDir=root, flushDiskType=flush, **kw))
    s.start()
    return s


def bench_async(root: str, n: int, props) -> dict:
    s = open_store(root, ASYNC_FLUSH)
    put = s.put_message
    t, ct = time.perf_counter(), time.thread_time()
    total = 0
    for i in range(n):
        p, ps = props[i % len(props)]
        total += put(TOPIC, i % QUEUES, BODY, p, born_timestamp=1, born_host=("127.0.0.1", 40000),
                     properties_str=ps).wrote_bytes
    wall, cpu = time.perf_counter() - t, time.thread_time() - ct
    # pulls: 32 messages per call over every queue, bodies joined as a PULL response would be
    t, pulled, pulled_bytes = time.perf_counter(), 0, 0
    for q in range(QUEUES):
        offset = 0
        while True:
            g = s.get_message("bench", TOPIC, q, offset, 32)
            if not g.messages:
                break
            pulled += len(g.messages)
            pulled_bytes += len(g.body())
            offset = g.next_begin_offset
    pull_wall = time.perf_counter() - t
    s.shutdown()
    return {"n": n, "bytes": total, "wall": wall, "cpu": cpu, "pulled": pulled, "pulled_bytes": pulled_bytes,
            "pull_wall": pull_wall}


def bench_sync(root: str, n: int, props, window: int) -> dict:
    s = open_store(root, SYNC_FLUSH)
    fsyncs = [0]
    inner = s._group_commit._flush

    def counting_flush():
        fsyncs[0] += 1
        return inner()

    s._group_commit._flush = counting_flush
    put, wait = s.put_message, s.wait_flush
    done = threading.Semaphore(0)
    bad = [0]

    def on_done(r):
        if not r.ok:
            bad[0] += 1
        done.release()

    t, ct = time.perf_counter(), time.thread_time()
    total = 0
    i = 0
    while i < n:
        k = min(window, n - i)
        for _ in range(k):
            p, ps = props[i % len(props)]
            r = put(TOPIC, i % QUEUES, BODY, p, born_timestamp=1, born_host=("127.0.0.1", 40000), properties_str=ps)
            total += r.wrote_bytes
            wait(r, on_done)
            i += 1
        for _ in range(k):
            done.acquire()
    wall, cpu = time.perf_counter() - t, time.thread_time() - ct
    s.shutdown()
    return {"n": n, "bytes": total, "wall": wall, "cpu": cpu, "fsyncs": fsyncs[0], "failed": bad[0]}


def bench_raw(path: str, total: int, record: int) -> dict:
    """The same number of bytes written sequentially: per record (like appends) and in 1 MiB chunks,
    each followed by one fsync."""
    out = {}
    buf = os.urandom(record)
    for name, chunk in (("per-record", buf), ("1MiB", os.urandom(1 << 20))):
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        t = time.perf_counter()
        written = 0
        while written < total:
            written += os.write(fd, chunk)
        os.fsync(fd)
        out[name] = time.perf_counter() - t
        os.close(fd)
        os.unlink(path)
    return out


def fill(root: str, gib: float, props, rss_marks: list[float] | None = None) -> tuple[int, list]:
    """Append ~``gib`` GiB of 1 KiB messages; returns (count, [(GiB, RSS MiB)] at each mark)."""
    s = open_store(root, ASYNC_FLUSH)
    target = int(gib * (1 << 30))
    put = s.put_message
    i = 0
    marks = sorted(rss_marks or [])
    seen = []
    while s.get_max_phy_offset() < target:
        p, ps = props[i % len(props)]
        put(TOPIC, i % QUEUES, BODY, p, born_timestamp=1, born_host=("127.0.0.1", 40000), properties_str=ps)
        i += 1
        if marks and s.get_max_phy_offset() >= marks[0] * (1 << 30):
            time.sleep(1.0)  # let the flush thread release flushed pages
            seen.append((marks.pop(0), rss_mib()))
    return i, seen, s


def crash(s: MessageStore) -> None:
    """Leave the store as SIGKILL would (abort file kept, no final checkpoint)."""
    s._stop_threads()
    s.commitlog.queue.close()
    for cq in s._all_cqs():
        cq.queue.close()
    s.index.close()
    os.close(s._lock_fd)
    s._lock_fd = -1


def bench_recovery(root: str, gib: float, props) -> dict:
    n, _, s = fill(root, gib, props)
    size = s.get_max_phy_offset()
    crash(s)
    res = {"messages": n, "bytes": size}
    # worst case: a checkpoint that covers nothing, so every record is re-validated (CRC) and re-dispatched
    from ferrymq.server.store.checkpoint import StoreCheckpoint

    cp = StoreCheckpoint.open(os.path.join(root, "checkpoint"))
    cp.physic_flushed_offset = cp.logics_flushed_offset = cp.index_flushed_offset = 0
    cp.flush()
    t = time.perf_counter()
    s2 = MessageStore(MessageStoreConfig(storePathRootDir=root))
    s2.start()
    res["full_scan_s"] = time.perf_counter() - t
    res["report"] = dict(s2.recovery_report)
    time.sleep(1.5)  # let a checkpoint happen
    crash(s2)
    t = time.perf_counter()
    s3 = MessageStore(MessageStoreConfig(storePathRootDir=root))
    s3.start()
    res["from_checkpoint_s"] = time.perf_counter() - t
    s3.shutdown()
    t = time.perf_counter()
    s4 = MessageStore(MessageStoreConfig(storePathRootDir=root))
    s4.start()
    res["clean_s"] = time.perf_counter() - t
    s4.shutdown()
    return res


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", default=None, help="where to put the stores (default: a temp dir under /tmp)")
    ap.add_argument("--messages", type=int, default=200_000)
    ap.add_argument("--sync-messages", type=int, default=50_000)
    ap.add_argument("--sync-window", type=int, default=128, help="puts in flight per group commit round")
    ap.add_argument("--recovery-gib", type=float, default=1.0)
    ap.add_argument("--rss-gib", type=float, default=0.0, help="also fill this much and report RSS (e.g. 4)")
    args = ap.parse_args(argv)
    base = tempfile.mkdtemp(prefix="ferrymq-store-bench-", dir=args.dir)
    try:
        props = make_props(50_000)
        a = bench_async(os.path.join(base, "async"), args.messages, props)
        shutil.rmtree(os.path.join(base, "async"))
        mib = a["bytes"] / (1 << 20)
        print(f"ASYNC_FLUSH  {a['n']} x 1 KiB: {a['n'] / a['wall']:,.0f} appends/s wall "
              f"({a['n'] / a['cpu']:,.0f}/s per writer CPU-second), {mib / a['wall']:.1f} MB/s")
        print(f"pull         {a['pulled']} messages, 32 per call: {a['pulled'] / a['pull_wall']:,.0f} messages/s, "
              f"{a['pulled_bytes'] / (1 << 20) / a['pull_wall']:.1f} MB/s")
        raw = bench_raw(os.path.join(base, "raw"), a["bytes"], a["bytes"] // a["n"])
        for name, sec in raw.items():
            print(f"raw write    {mib:.0f} MiB {name} + fsync: {mib / sec:.1f} MB/s")
        sy = bench_sync(os.path.join(base, "sync"), args.sync_messages, props, args.sync_window)
        shutil.rmtree(os.path.join(base, "sync"))
        print(f"SYNC_FLUSH   {sy['n']} x 1 KiB, {args.sync_window} in flight: {sy['n'] / sy['wall']:,.0f} appends/s "
              f"wall, {sy['bytes'] / (1 << 20) / sy['wall']:.1f} MB/s, {sy['fsyncs']} fsyncs "
              f"({sy['n'] / max(sy['fsyncs'], 1):.1f} messages each), {sy['failed']} timeouts")
        if args.recovery_gib > 0:
            r = bench_recovery(os.path.join(base, "recovery"), args.recovery_gib, props)
            shutil.rmtree(os.path.join(base, "recovery"))
            print(f"recovery     {r['bytes'] / (1 << 30):.2f} GiB, {r['messages']:,} messages: full re-validation + "
                  f"re-dispatch after a crash {r['full_scan_s']:.2f} s; from the last checkpoint "
                  f"{r['from_checkpoint_s']:.2f} s; after a clean shutdown {r['clean_s']:.2f} s")
        if args.rss_gib > 0:
            marks = [m for m in (0.25, 1.0, 2.0, 4.0, 8.0) if m <= args.rss_gib]
            n, seen, s = fill(os.path.join(base, "rss"), args.rss_gib, props, marks)
            s.shutdown()
            shutil.rmtree(os.path.join(base, "rss"))
            print("RSS          " + ", ".join(f"{g:g} GiB: {m:.0f} MiB" for g, m in seen))
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
