"""Awaiting, on the gRPC server's loop, a call run in the reactor thread (where the broker's state lives)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from twisted.internet import defer


async def in_reactor(fn: Callable[..., Any], *args: Any) -> Any:
    """``fn(*args)`` run in the reactor thread; its result, or its Deferred's, or the exception it failed with."""
    from twisted.internet import reactor

    loop = asyncio.get_running_loop()
    future = loop.create_future()

    def settle(ok: bool, value: Any) -> None:
        if not future.done():
            future.set_result(value) if ok else future.set_exception(value)

    def post(ok: bool, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:  # the loop closed meanwhile: nobody awaits the answer
            pass

    def run() -> None:
        defer.maybeDeferred(fn, *args).addCallbacks(lambda result: post(True, result), lambda f: post(False, f.value))

    reactor.callFromThread(run)
    return await future
