"""Awaiting, on the gRPC server's loop, a call run in the reactor thread (where the broker's state lives).

Each wake-up of the other thread (``reactor.callFromThread``, ``loop.call_soon_threadsafe``) writes to its
wake-up pipe and hands it the interpreter lock: the calls that one turn of the server's loop makes hop
to the reactor with one wake-up, and the answers that one turn of the reactor gives come back with one
(:class:`ferrymq.remoting.mailbox.Mailbox`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ferrymq.remoting.mailbox import Mailbox, answers_to
from twisted.internet import defer


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
    by :func:`in_reactor`."""
    _calls.post(fn, *args)
