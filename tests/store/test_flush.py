"""Flush: SYNC_FLUSH group commit (one fsync covers all pending puts), ASYNC periodic flush, checkpoint."""

from __future__ import annotations

import threading
import time

import pytest

from ferrymq.server.store import SYNC_FLUSH
from ferrymq.server.store import PutMessageStatus as P
from ferrymq.server.store.checkpoint import StoreCheckpoint
from ferrymq.server.store.flush import DemandService, GroupCommitService


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


@pytest.mark.parametrize("delay_s, fsyncs", [(0.3, 1), (0.0, 2)])
def test_group_commit_waits_its_delay_for_more_requests_before_the_fsync(delay_s, fsyncs):
    calls = []
    svc = GroupCommitService(lambda: (calls.append(1), 100)[1], delay_s=delay_s)
    svc.start()
    done = threading.Event()
    results = []

    def record(ok):
        results.append(ok)
        if len(results) == 2:
            done.set()

    svc.submit(10, record)
    time.sleep(0.05)  # well inside the delay: the first request has not been fsynced yet
    svc.submit(20, record)
    assert done.wait(5)
    svc.stop()
    assert results == [True, True]
    assert len(calls) == fsyncs  # with the delay one fsync covers both; without it the first went alone


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


def checkpoint_covering(store, end: int, timeout: float = 5.0) -> StoreCheckpoint:
    """The checkpoint file once its commit-log and consume-queue offsets reach ``end`` (or at the timeout)."""
    deadline = time.time() + timeout
    while True:
        cp = StoreCheckpoint.open(store.config.checkpoint_path)
        if cp.min_flushed_offset_without_index >= end or time.time() > deadline:
            return cp
        time.sleep(0.02)


def test_async_flush_and_checkpoint_advance(make_store):
    s = make_store(flushIntervalCommitLog=20, flushIntervalConsumeQueue=20)
    for _ in range(10):
        s.put_message("T", 0, b"y" * 500, {"KEYS": "a"})
    end = s.get_max_phy_offset()
    cp = checkpoint_covering(s, end)
    assert s.get_flushed_phy_offset() == end
    assert cp.physic_flushed_offset == end and cp.logics_flushed_offset == end
    assert cp.clean_shutdown_offset == -1


@pytest.mark.parametrize("safe", [False, True])
def test_index_counts_in_the_checkpoint_only_when_message_index_safe(make_store, safe):
    s = make_store(flushIntervalCommitLog=20, flushIntervalConsumeQueue=20, messageIndexSafe=safe)
    for i in range(10):
        s.put_message("T", 0, b"y" * 500, {"KEYS": f"k{i}"})
    end = s.get_max_phy_offset()
    cp = checkpoint_covering(s, end)
    assert cp.min_flushed_offset_without_index == end
    # Apache's rule: the index is fsynced and trusted by recovery only when messageIndexSafe=true
    assert cp.index_flushed_offset == (end if safe else 0)
    assert s.index.files[-1].dirty is not safe
    assert [s.query_message("T", f"k{i}", 1, 0, 2**62).commitlog_offsets != [] for i in range(10)] == [True] * 10


def test_twisted_adapter_fires_deferred(make_store):
    from twisted.internet import defer
    from ferrymq.server.store import twisted_adapter

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
    fn, _call = reactor.later[0]  # the shared timeout watch: firing it after the answer changes nothing
    fn()
    assert len(got) == 1 and got[0].status is P.PUT_OK
    d2 = twisted_adapter.put_message(s, "T", 0, b"y", {"WAIT": "false"}, reactor=reactor)
    assert isinstance(d2, defer.Deferred) and d2.called


def test_flush_watch_answers_timeout_for_waits_the_disk_left_hanging():
    from twisted.internet import defer
    from ferrymq.server.store.status import PutMessageResult
    from ferrymq.server.store.twisted_adapter import _FlushWatch

    class Reactor:
        def __init__(self):
            self.later = []

        def callLater(self, delay, fn):
            self.later.append((delay, fn))
            return object()

    reactor = Reactor()
    watch = _FlushWatch(reactor, 0.0)
    answered, hanging = defer.Deferred(), defer.Deferred()
    watch.add(answered, PutMessageResult(P.PUT_OK, needs_flush_wait=True))
    watch.add(hanging, PutMessageResult(P.PUT_OK, needs_flush_wait=True))
    assert len(reactor.later) == 1  # one timer for both waits
    answered.callback("fsynced")
    reactor.later.pop()[1]()
    out = []
    hanging.addCallback(out.append)
    assert out[0].status is P.FLUSH_DISK_TIMEOUT and not out[0].needs_flush_wait
    assert not watch.pending and not reactor.later


def test_group_commit_hands_a_whole_group_over_in_one_hop():
    release = threading.Event()
    svc = GroupCommitService(lambda: (release.wait(5), 100)[1])
    svc.start()
    hops, results = [], []

    def hop(fn, *args):
        hops.append(fn)
        fn(*args)

    for end in (10, 20, 30, 200):
        svc.submit(end, results.append, hop)
    release.set()
    svc.stop()
    assert sorted(results) == [False, True, True, True]  # 200 is beyond what the fsync covered
    assert len(hops) <= 2  # the first put may get an fsync of its own; the rest share one hop


def test_a_demand_service_runs_its_task_after_wakes_and_never_on_its_own():
    ran = []
    done = threading.Event()

    def task():
        ran.append(time.monotonic())
        done.set()

    service = DemandService(task, "test-demand")
    service.start()
    try:
        time.sleep(0.2)
        assert ran == []  # no timer: at rest it never runs
        for _ in range(5):
            service.wake()
        assert done.wait(5)
        time.sleep(0.1)
        assert 1 <= len(ran) <= 5  # wakes before it ran are served by one run
        done.clear()
        service.wake()
        assert done.wait(5)
    finally:
        service.stop()
    assert not service._thread.is_alive()
