"""Metadata file writes (topics, offsets, KV config) in order, on one worker thread of their own.

The writes fsync, so they stay off the reactor. They get a dedicated thread rather than the reactor's
shared pool: anything else in the process that blocks in that pool (an embedding application's
``deferToThread`` work, a push-consumer listener) would otherwise hold a config write back for as long.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from twisted.internet import defer, threads
from twisted.python.threadpool import ThreadPool

log = logging.getLogger("ferrymq.files")


def _daemon_thread(*args: Any, **kwargs: Any) -> threading.Thread:
    """The file thread never keeps a process alive: an owner that exits without ``close()`` loses at most
    the write in progress, and each write replaces its file atomically, so the old file stays whole."""
    return threading.Thread(*args, daemon=True, **kwargs)


class WriteQueue:
    """Runs submitted writes one after another on a single lazily started thread.

    A failed write is logged (naming the file) and does not stop the ones queued after it.
    """

    def __init__(self, reactor: Any, name: str):
        self._reactor = reactor
        self._name = name
        self._pool: ThreadPool | None = None
        self._trigger: Any = None
        self._tail: defer.Deferred = defer.succeed(None)

    def submit(self, path: str, write: Callable[..., Any], *args: Any) -> defer.Deferred:
        """Queue ``write(*args)``; the Deferred fires once it and every earlier write finished."""

        def run(_: object) -> defer.Deferred:
            return threads.deferToThreadPool(self._reactor, self._start(), write, *args)

        def report(failure: Any) -> None:
            log.error("could not write %s: %s (check the directory exists, is writable and has space)", path,
                      failure.getErrorMessage())

        self._tail = self._tail.addCallback(run).addErrback(report)
        done: defer.Deferred = defer.Deferred()  # the caller's own: what it chains on cannot stall the queue
        self._tail.addCallback(lambda result: (done.callback(None), result)[1])
        return done

    def _start(self) -> ThreadPool:
        if self._pool is None:
            pool = ThreadPool(minthreads=1, maxthreads=1, name=self._name)
            pool.threadFactory = _daemon_thread
            pool.start()
            self._pool = pool
            add_trigger = getattr(self._reactor, "addSystemEventTrigger", None)  # a test Clock has none
            if add_trigger is not None:
                self._trigger = add_trigger("during", "shutdown", self._stop_pool)
        return self._pool

    def _stop_pool(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.stop()

    @defer.inlineCallbacks
    def close(self):
        """Wait for the queued writes, then let the thread go (a later submit starts a new one)."""
        yield self._tail
        if self._trigger is not None:
            self._reactor.removeSystemEventTrigger(self._trigger)
            self._trigger = None
        self._stop_pool()
