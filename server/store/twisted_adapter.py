"""Deferreds over the store's callbacks, for the broker's reactor.

Create the store without ``call_from_thread``: these helpers hop back to the reactor themselves.
A SYNC_FLUSH put's Deferred fires with the PutMessageResult once the fsync that covers it is done,
or with status FLUSH_DISK_TIMEOUT after ``syncFlushTimeout`` if the disk has not answered by then.
"""

from __future__ import annotations

import dataclasses

from twisted.internet import defer

from .message_store import MessageStore
from .status import PutMessageResult, PutMessageStatus


def deferred_for(store: MessageStore, result: PutMessageResult, reactor=None) -> defer.Deferred:
    """A Deferred firing when ``result``'s promise is met (at once unless it needs a flush wait)."""
    if not result.needs_flush_wait:
        return defer.succeed(result)
    if reactor is None:
        from twisted.internet import reactor  # type: ignore[no-redef]
    d = defer.Deferred()

    def fire(r: PutMessageResult) -> None:
        if not d.called:
            if timer.active():
                timer.cancel()
            d.callback(r)

    def timed_out() -> None:
        if not d.called:
            d.callback(dataclasses.replace(result, status=PutMessageStatus.FLUSH_DISK_TIMEOUT, needs_flush_wait=False))

    timer = reactor.callLater(store.config.syncFlushTimeout / 1000, timed_out)
    store.wait_flush(result, lambda r: reactor.callFromThread(fire, r))
    return d


def put_message(store: MessageStore, *args, reactor=None, **kwargs) -> defer.Deferred:
    """``store.put_message`` as a Deferred of its PutMessageResult."""
    return deferred_for(store, store.put_message(*args, **kwargs), reactor)


def put_messages(store: MessageStore, *args, reactor=None, **kwargs) -> defer.Deferred:
    """``store.put_messages`` (a batch) as a Deferred of its PutMessageResult."""
    return deferred_for(store, store.put_messages(*args, **kwargs), reactor)
