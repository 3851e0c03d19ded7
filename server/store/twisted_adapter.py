"""Deferreds over the store's callbacks, for the broker's reactor.

Create the store without ``call_from_thread``: these helpers hop back to the reactor themselves, once
per group commit for all the puts one fsync covered.
A SYNC_FLUSH put's Deferred fires with the PutMessageResult once the fsync that covers it is done,
or with status FLUSH_DISK_TIMEOUT after ``syncFlushTimeout`` if the disk has not answered by then.
"""

from __future__ import annotations

import collections
import dataclasses
import time
import weakref
from typing import Any, Callable

from twisted.internet import defer

from .message_store import MessageStore
from .status import PutMessageResult, PutMessageStatus


class _FlushWatch:
    """Answers FLUSH_DISK_TIMEOUT for waits the disk has not completed within ``syncFlushTimeout``.

    One timer per store and reactor instead of one per put: the timeout is the same for every wait, so
    waits expire in the order they started; a deque holds them and the timer is armed for the oldest.
    Completed waits are dropped from the front as new ones arrive, so the deque stays short.
    """

    def __init__(self, reactor, timeout_s: float):
        self.reactor = reactor
        self.timeout_s = timeout_s
        self.pending: collections.deque[tuple[float, Any, PutMessageResult]] = collections.deque()
        self.timer = None

    def add(self, d: Any, result: PutMessageResult) -> None:
        pending = self.pending
        while pending and pending[0][1].called:
            pending.popleft()
        pending.append((time.monotonic() + self.timeout_s, d, result))
        if self.timer is None:
            self.timer = self.reactor.callLater(self.timeout_s, self._expire)

    def _expire(self) -> None:
        self.timer = None
        pending = self.pending
        now = time.monotonic()
        while pending and (pending[0][1].called or pending[0][0] <= now):
            _deadline, d, result = pending.popleft()
            if not d.called:
                d.callback(dataclasses.replace(result, status=PutMessageStatus.FLUSH_DISK_TIMEOUT,
                                               needs_flush_wait=False))
        if pending:
            self.timer = self.reactor.callLater(max(0.0, pending[0][0] - now), self._expire)


_watches: weakref.WeakKeyDictionary[MessageStore, dict[int, _FlushWatch]] = weakref.WeakKeyDictionary()


def flush_watch(store: MessageStore, reactor) -> _FlushWatch:
    """The store's timeout watch on ``reactor`` (one per pair); a caller putting often keeps it and passes
    it to :func:`deferred_for` instead of having it looked up per put."""
    per_reactor = _watches.setdefault(store, {})
    watch = per_reactor.get(id(reactor))
    if watch is None:
        watch = per_reactor[id(reactor)] = _FlushWatch(reactor, store.config.syncFlushTimeout / 1000)
    return watch


def deferred_for(store: MessageStore, result: PutMessageResult, reactor=None,
                 watch: _FlushWatch | None = None, make: Callable[[], Any] = defer.Deferred) -> Any:
    """A Deferred firing when ``result``'s promise is met (at once unless it needs a flush wait).
    ``watch``: :func:`flush_watch` of this store and reactor, when the caller keeps it. ``make``: what
    to return instead of a Deferred (anything with ``callback`` and ``called``, e.g. the broker's
    lighter ``server.remoting.pending.Pending``)."""
    if not result.needs_flush_wait:
        return defer.succeed(result)
    if reactor is None:
        from twisted.internet import reactor  # type: ignore[no-redef]
    d = make()

    def fire(r: PutMessageResult) -> None:
        if not d.called:
            d.callback(r)

    (watch or flush_watch(store, reactor)).add(d, result)
    store.wait_flush(result, fire, reactor.callFromThread)
    return d


def put_message(store: MessageStore, *args, reactor=None, **kwargs) -> defer.Deferred:
    """``store.put_message`` as a Deferred of its PutMessageResult."""
    return deferred_for(store, store.put_message(*args, **kwargs), reactor)


def put_messages(store: MessageStore, *args, reactor=None, **kwargs) -> defer.Deferred:
    """``store.put_messages`` (a batch) as a Deferred of its PutMessageResult."""
    return deferred_for(store, store.put_messages(*args, **kwargs), reactor)
