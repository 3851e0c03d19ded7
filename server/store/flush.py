"""Background work of the store, off the writer (reactor) thread: fsync, group commit, periodic tasks.

* :class:`GroupCommitService` (SYNC_FLUSH): puts that must wait for the disk register the commit-log
  offset their record ends at; the service fsyncs once for everything pending when it starts and
  completes every request that fsync covered. Callbacks run on the service thread. Woken by a first
  request, it waits :data:`COMMIT_DELAY_S` for more before the fsync (see there).
* :class:`PeriodicService`: one thread running the store's timed tasks (ASYNC_FLUSH of the commit
  log, consume-queue and index flush + checkpoint, retention, disk check), each at its own period.
* :class:`DemandService`: one thread running a task when the writer asks for it (the commit-log pages
  written ahead of the writer), so that it does not wake on a timer to find nothing to do.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable

log = logging.getLogger(__name__)

#: How long a group commit woken by a first request waits for more before it fsyncs (like PostgreSQL's
#: commit_delay). Each ``fdatasync`` costs ~100–150 µs of kernel CPU on top of the disk, on a 2-core box
#: the same cores the broker and its clients need; with sends in flight, a short wait makes fewer, fuller
#: commits (FerryMQ alone, SYNC_FLUSH batch sends: +14 %, 15–18 -> 13–15 µs of broker CPU per message;
#: the side-by-side run after it showed no change). Longer waits cost sync senders, who each wait out
#: the delay: 300 µs took 15 % off 32-thread sync sends, 100 µs nothing measurable (docs/perf-history.md,
#: 9575106).
COMMIT_DELAY_S = 100e-6


class GroupCommitService:
    def __init__(self, flush: Callable[[], int], name: str = "store-group-commit", delay_s: float = COMMIT_DELAY_S):
        """``flush()`` fsyncs the commit log and returns the offset it is now flushed up to."""
        self._flush = flush
        self._delay = delay_s
        self._cond = threading.Condition()
        #: hop -> [(end offset, callback)]: requests are grouped by hop as they come, so the service
        #: thread does no per-request Python work (it would hold the GIL the reactor needs)
        self._requests: dict[Callable | None, list[tuple[int, Callable[[bool], None]]]] = {}
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, end_offset: int, callback: Callable[[bool], None], hop: Callable | None = None) -> None:
        """Call ``callback(True)`` once the commit log is fsynced past ``end_offset`` (False on I/O error
        or shutdown). With ``hop`` (e.g. ``reactor.callFromThread``) the callbacks run through it, and all
        the requests one fsync completes go through it together: one thread hop per group, not per put."""
        with self._cond:
            if self._stopping:
                stopped = True
            else:
                stopped = False
                if not self._requests:
                    self._cond.notify()
                waiting = self._requests.get(hop)
                if waiting is None:
                    self._requests[hop] = [(end_offset, callback)]
                else:
                    waiting.append((end_offset, callback))
        if stopped:
            if hop is None:
                callback(False)
            else:
                hop(callback, False)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._requests and not self._stopping:
                    self._cond.wait()
                if self._delay and not self._stopping:
                    self._cond.wait(self._delay)  # requests arriving meanwhile do not notify: the wait runs out
                groups, self._requests = self._requests, {}
                stopping = self._stopping
            if groups:
                try:
                    flushed = self._flush()
                except OSError as exc:
                    log.error("commit log fsync failed: %s", exc)
                    flushed = -1
                for hop, waiting in groups.items():
                    if hop is None:
                        _complete(waiting, flushed)
                    else:
                        try:
                            hop(_complete, waiting, flushed)
                        except Exception:  # e.g. the reactor already stopped
                            log.exception("group commit could not hand %d completions over", len(waiting))
            elif stopping:
                return

    def stop(self) -> None:
        """Flush what is pending, complete it, then stop."""
        with self._cond:
            self._stopping = True
            self._cond.notify()
        if self._thread.is_alive():
            self._thread.join(timeout=30)


def _complete(waiting: list[tuple[int, Callable[[bool], None]]], flushed: int) -> None:
    """Tell each waiter whether the fsync that reached ``flushed`` covered its end offset."""
    for end, cb in waiting:
        try:
            cb(flushed >= end)
        except Exception:  # a bad callback must not kill the flush thread or the rest of the group
            log.exception("group commit callback failed")


class PeriodicService:
    """Runs ``(period_ms, task)`` pairs on one background thread until stopped."""

    def __init__(self, name: str = "store-periodic"):
        self._tasks: list[list] = []  # [period_s, next_due, fn]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def add(self, period_ms: int, fn: Callable[[], None]) -> None:
        period = max(period_ms, 1) / 1000
        self._tasks.append([period, time.monotonic() + period, fn])

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            now = time.monotonic()
            for task in self._tasks:
                if now >= task[1]:
                    try:
                        task[2]()
                    except Exception:
                        log.exception("store task %s failed", getattr(task[2], "__name__", task[2]))
                    task[1] = time.monotonic() + task[0]
            if not self._tasks:
                self._stop.wait(1)
                continue
            wait = min(t[1] for t in self._tasks) - time.monotonic()
            if wait > 0:
                self._stop.wait(wait)

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)


class DemandService:
    """Runs ``task`` on a background thread once after any number of :meth:`wake` calls.

    A thread polling on a short timer costs the reactor even when it finds nothing to do: each wake-up
    takes the GIL, and a reactor thread that releases it for a system call then waits for the other
    thread to give it back (100 wake-ups a second raised the paced MQTT p99 by about a sixth). Woken only
    by the writer's progress, the thread runs a few times per megabyte written and never at rest.
    """

    def __init__(self, task: Callable[[], None], name: str):
        self._task = task
        self._due = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def wake(self) -> None:
        """Have the task run (again) soon; any thread."""
        self._due.set()

    def _run(self) -> None:
        while True:
            self._due.wait()
            if self._stopping:
                return
            self._due.clear()
            try:
                self._task()
            except Exception:
                log.exception("store task %s failed", getattr(self._task, "__name__", self._task))

    def stop(self) -> None:
        self._stopping = True
        self._due.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
