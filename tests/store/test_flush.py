"""Flush: SYNC_FLUSH group commit (one fsync covers all pending puts), ASYNC periodic flush, checkpoint."""

from __future__ import annotations

import threading
import time

from server.store import SYNC_FLUSH
from server.store import PutMessageStatus as P
from server.store.checkpoint import StoreCheckpoint
from server.store.flush import GroupCommitService


def test_sync_flush_put_completes_after_fsync(make_store):
    s = make_store(flushDiskType=SYNC_FLUSH, flushIntervalCommitLog=600000)
    fut = s.put_message_future("T", 0, b"durable", {})
    r = fut.result(timeout=5)
    assert r.status is P.PUT_OK and not r.needs_flush_wait
    assert s.get_flushed_phy_offset() >= r.commitlog_offset + r.wrote_bytes


def test_wait_false_does_not_wait(make_store):
    s = make_store(flushDiskType=SYNC_FLUSH)
    r = s.put_message("T", 0, b"x", {"WAIT": "false"})
    assert r.ok and not r.needs_flush_wait


def test_group_commit_covers_all_pending_with_one_fsync():
    release = threading.Event()
    calls = []
    flushed = [0]

    def slow_flush():
        calls.append(time.monotonic())
        release.wait(5)
        return flushed[0]

    svc = GroupCommitService(slow_flush)
    svc.start()
    results = []
    flushed[0] = 100
    svc.submit(10, results.append)  # first fsync starts and blocks
    deadline = time.monotonic() + 5
    while not calls and time.monotonic() < deadline:
        time.sleep(0.001)
    for end in (20, 30, 40):  # these arrive while it runs: one more fsync covers all three
        svc.submit(end, results.append)
    release.set()
    svc.stop()
    assert results == [True] * 4
    assert len(calls) == 2


def test_group_commit_reports_failure_when_not_covered():
    svc = GroupCommitService(lambda: 5)
    svc.start()
    out = []
    svc.submit(10, out.append)
    svc.stop()
    assert out == [False]


def test_sync_flush_timeout_status(make_store):
    s = make_store(flushDiskType=SYNC_FLUSH, syncFlushTimeout=0)
    r = s.put_message_future("T", 0, b"x", {}).result(timeout=5)
    assert r.status is P.FLUSH_DISK_TIMEOUT  # flushed, but later than the (zero) timeout


def test_async_flush_and_checkpoint_advance(make_store):
    s = make_store(flushIntervalCommitLog=20, flushIntervalConsumeQueue=20)
    for _ in range(10):
        s.put_message("T", 0, b"y" * 500, {"KEYS": "a"})
    end = s.get_max_phy_offset()
    deadline = time.time() + 5
    while time.time() < deadline:
        cp = StoreCheckpoint.open(s.config.checkpoint_path)
        if cp.min_flushed_offset >= end:
            break
        time.sleep(0.02)
    assert s.get_flushed_phy_offset() == end
    assert cp.physic_flushed_offset == end and cp.logics_flushed_offset == end
    assert cp.clean_shutdown_offset == -1


def test_twisted_adapter_fires_deferred(make_store):
    from twisted.internet import defer
    from server.store import twisted_adapter

    class FakeReactor:
        def __init__(self):
            self.later = []

        def callLater(self, delay, fn, *a):
            class Call:
                def __init__(s):
                    s.cancelled = False

                def active(s):
                    return not s.cancelled

                def cancel(s):
                    s.cancelled = True
            c = Call()
            self.later.append((fn, c))
            return c

        def callFromThread(self, fn, *a):
            fn(*a)

    s = make_store(flushDiskType=SYNC_FLUSH)
    reactor = FakeReactor()
    d = twisted_adapter.put_message(s, "T", 0, b"x", {}, reactor=reactor)
    got = []
    d.addCallback(got.append)
    deadline = time.time() + 5
    while not got and time.time() < deadline:
        time.sleep(0.01)
    assert got and got[0].status is P.PUT_OK
    assert reactor.later[0][1].cancelled
    d2 = twisted_adapter.put_message(s, "T", 0, b"y", {"WAIT": "false"}, reactor=reactor)
    assert isinstance(d2, defer.Deferred) and d2.called
