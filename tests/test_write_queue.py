"""The metadata write queue: order kept, failures logged without stopping later writes, own thread."""

from __future__ import annotations

import logging
import threading

from twisted.internet import threads

from ferrymq.sdk import reactor_thread
from ferrymq.server.write_queue import WriteQueue


def _queue(name: str) -> WriteQueue:
    reactor_thread.ensure_running()
    from twisted.internet import reactor

    return reactor_thread.call(WriteQueue, reactor, name)


def test_writes_run_in_order_and_a_failure_does_not_stop_the_rest(caplog):
    queue = _queue("test-order")
    done: list[int] = []

    def write(i: int) -> None:
        if i == 2:
            raise OSError(28, "No space left on device")
        done.append(i)

    with caplog.at_level(logging.ERROR, logger="ferrymq.files"):
        for i in range(5):
            reactor_thread.call(queue.submit, f"/data/file{i}", write, i)
        reactor_thread.call(queue.close)
    assert done == [0, 1, 3, 4]
    assert "could not write /data/file2" in caplog.text and "No space left" in caplog.text


def test_writes_do_not_wait_for_a_busy_reactor_pool():
    """A listener blocking every thread of the reactor's shared pool must not hold a config write back."""
    from twisted.internet import reactor

    pool_size = reactor_thread.call(lambda: reactor.getThreadPool().max)
    release = threading.Event()

    def occupy() -> None:
        threads.deferToThread(release.wait, 30)  # not waited on: it holds a pool thread until released

    for _ in range(pool_size):
        reactor_thread.call(occupy)
    try:
        queue = _queue("test-busy")
        wrote = threading.Event()
        reactor_thread.call(lambda: queue.submit("/data/kv.json", wrote.set) and None)  # do not wait on it here
        assert wrote.wait(5), "the write waited behind the blocked reactor thread pool"
        reactor_thread.call(queue.close)
    finally:
        release.set()


def test_an_owner_that_never_closes_the_queue_does_not_keep_the_process_alive(tmp_path):
    """A broker built on a test Clock (no shutdown triggers) and never stopped: the process still exits."""
    import subprocess
    import sys

    script = f"""
import time
from twisted.internet import task
from ferrymq.server.write_queue import WriteQueue
q = WriteQueue(task.Clock(), "orphan")
q.submit("x", open({str(tmp_path / "wrote")!r}, "w").close)
time.sleep(0.5)
"""
    proc = subprocess.run([sys.executable, "-c", script], timeout=30, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "wrote").exists()


def test_a_caller_failing_on_its_deferred_does_not_stop_later_writes():
    queue = _queue("test-caller")
    done: list[int] = []

    held = []

    def submit_and_fail() -> None:
        d = queue.submit("/data/a", done.append, 1)
        d.addCallback(lambda _: 1 / 0)  # a caller's bug, left unhandled for now
        held.append(d)

    reactor_thread.call(submit_and_fail)
    reactor_thread.call(lambda: queue.submit("/data/b", done.append, 2) and None)
    reactor_thread.call(queue.close)
    reactor_thread.call(lambda: held[0].addErrback(lambda f: None) and None)
    assert done == [1, 2]
