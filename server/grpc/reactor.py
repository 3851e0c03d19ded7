"""Awaiting, on the gRPC server's loop, a call run in the reactor thread (where the broker's state lives).

On the broker's own loop (:class:`.server.GrpcOnReactor`) the service runs in the reactor thread: a call
runs at once and a Deferred it returns is awaited on the same loop, with no thread to wake. On a loop of
its own (:class:`.server.GrpcThread`) each wake-up of the other thread (``reactor.callFromThread``,
``loop.call_soon_threadsafe``) writes to its wake-up pipe and hands it the interpreter lock: the calls
that one turn of the server's loop makes hop to the reactor with one wake-up, and the answers that one
turn of the reactor gives come back with one (:class:`ferrymq.remoting.mailbox.Mailbox`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ferrymq.remoting.mailbox import Mailbox, answers_to
from twisted.internet import defer
from twisted.python.threadable import isInIOThread

log = logging.getLogger("ferrymq.grpc")


def _wake_reactor(run: Callable[[], None]) -> None:
    from twisted.internet import reactor

    reactor.callFromThread(run)  # before the reactor runs, queued until it does


#: calls into the reactor thread
_calls = Mailbox(_wake_reactor)


def _settle(future: asyncio.Future, ok: bool, value: Any) -> None:
    if not future.done():
        future.set_result(value) if ok else future.set_exception(value)


async def in_reactor(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` run in the reactor thread; its result, or its Deferred's, or the exception it failed with."""
    if isInIOThread():
        result = fn(*args)
        if not isinstance(result, defer.Deferred):
            return result
        # not Deferred.asFuture: a call given up (its task cancelled) leaves the broker's Deferred alone,
        # as it does when the call hops
        future = asyncio.get_running_loop().create_future()
        result.addCallbacks(lambda value: _settle(future, True, value), lambda f: _settle(future, False, f.value))
        return await future
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    answers = answers_to(loop)

    def post(ok: bool, value: Any) -> None:
        try:
            answers.post(_settle, future, ok, value)
        except RuntimeError:  # the loop closed meanwhile: nobody awaits the answer
            pass

    def run() -> None:
        defer.maybeDeferred(fn, *args).addCallbacks(lambda result: post(True, result), lambda f: post(False, f.value))

    _calls.post(run)
    return await future


def to_reactor(fn: Callable[..., Any], *args: Any) -> None:
    """``fn(*args)`` run in the reactor thread, not awaited: after every call posted before it here or
    by :func:`in_reactor` (at once in the reactor thread)."""
    if not isInIOThread():
        _calls.post(fn, *args)
        return
    try:
        fn(*args)
    except Exception:  # noqa: BLE001 - as a posted call's failure: the caller does not wait for it
        log.exception("call %r in the reactor thread failed", fn)
