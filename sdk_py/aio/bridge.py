"""Calls between an asyncio event loop and the SDK's Twisted reactor thread.

Two directions:

- :func:`call` runs an SDK call in the reactor thread and lets a coroutine await its result. Its
  Deferred's failure is raised as the exception it carries (MQResponseError, MQClientError,
  RemotingTimeoutError...). Cancelling the awaiting task cancels the Deferred in the reactor thread.
- :func:`on_loop` turns application code (a plain function or a coroutine function) into a callable the
  SDK may call from the reactor thread: it runs on the application's loop and answers with a Deferred,
  so listeners, local transactions and transaction checkers run where the application's state lives.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import inspect
import logging
import threading
from collections.abc import Callable
from typing import Any, Self

from twisted.internet import defer
from twisted.python.failure import Failure

from .. import reactor_thread

log = logging.getLogger("ferrymq.sdk.aio")


def _reactor():
    from twisted.internet import reactor

    return reactor


class _Hops:
    """Calls into the reactor thread, run in the order posted, the reactor woken once per burst.

    ``reactor.callFromThread`` writes to the reactor's wake-up pipe on every call, and the posting
    thread gives up the interpreter lock for each write; the calls of many concurrent requests posted
    here are run by one ``callFromThread`` instead, in one turn of the reactor.
    """

    def __init__(self) -> None:
        self._calls: collections.deque[tuple[Callable[..., Any], tuple]] = collections.deque()
        self._lock = threading.Lock()
        self._woken = False

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        self._calls.append((fn, args))
        with self._lock:
            if self._woken:
                return
            self._woken = True
        _reactor().callFromThread(self._run)

    def _run(self) -> None:
        with self._lock:
            self._woken = False  # before taking the calls: one posted from now on wakes the reactor again
        calls = self._calls
        while calls:
            fn, args = calls.popleft()
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - one failing call must not stop the others
                log.exception("call %r in the reactor thread failed", fn)


_hops = _Hops()


async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` in the reactor thread and return its result (a Deferred is waited on)."""
    reactor_thread.ensure_running()
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    running: list[defer.Deferred] = []

    def settle(ok: bool, value: Any) -> None:
        if future.done():  # cancelled meanwhile
            return
        if ok:
            future.set_result(value)
        else:
            future.set_exception(value)

    def post(ok: bool, value: Any) -> None:
        try:
            loop.call_soon_threadsafe(settle, ok, value)
        except RuntimeError:  # the loop is closed: nobody awaits the answer any more
            pass

    def run() -> None:
        d = defer.maybeDeferred(fn, *args, **kwargs)
        running.append(d)
        d.addCallbacks(lambda result: post(True, result), lambda f: post(False, f.value))

    def cancel() -> None:
        for d in running:
            d.cancel()

    _hops.post(run)
    try:
        return await future
    except asyncio.CancelledError:
        _hops.post(cancel)  # after run(): calls run in the order posted
        raise


def post(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` in the reactor thread without waiting; calls posted run in the order posted."""
    reactor_thread.ensure_running()
    _hops.post(fn, *args)


def on_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any]) -> Callable[..., defer.Deferred]:
    """``fn`` as the reactor thread may call it: it runs on ``loop`` (awaited when it returns an
    awaitable) and the returned Deferred fires in the reactor thread with its result or exception."""

    async def run(args: tuple) -> Any:
        result = fn(*args)
        if inspect.isawaitable(result):
            result = await result
        return result

    def from_reactor(*args: Any) -> defer.Deferred:
        try:
            future = asyncio.run_coroutine_threadsafe(run(args), loop)
        except RuntimeError:  # the loop is closed
            return defer.fail()
        d = defer.Deferred(lambda _: future.cancel())
        reactor = _reactor()

        def done(f: concurrent.futures.Future) -> None:
            try:
                result = f.result()
            except BaseException as exc:  # noqa: BLE001 - handed to the Deferred
                reactor.callFromThread(_fire, d, Failure(exc))
            else:
                reactor.callFromThread(_fire, d, result)

        future.add_done_callback(done)
        return d

    return from_reactor


def _fire(d: defer.Deferred, result: Any) -> None:
    if d.called:  # cancelled: it has fired already
        return
    if isinstance(result, Failure):
        d.errback(result)
    else:
        d.callback(result)


class Client:
    """What every asyncio client of one group shares: ``group``, ``start``/``stop`` of its core client
    (made in the reactor thread by the subclass, as ``_core``) and ``async with`` (start, then stop)."""

    _core: Any

    @property
    def group(self) -> str:
        return self._core.group

    async def start(self) -> None:
        await call(self._core.start)

    async def stop(self) -> None:
        await call(self._core.shutdown)

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()
