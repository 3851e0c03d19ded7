"""Calls between an asyncio event loop and the SDK's Twisted reactor thread.

Two directions:

- :func:`call` runs an SDK call in the reactor thread and lets a coroutine await its result. Its
  Deferred's failure is raised as the exception it carries (MQResponseError, MQClientError,
  RemotingTimeoutError...). Cancelling the awaiting task cancels the Deferred in the reactor thread.
- :func:`on_loop` turns application code (a plain function or a coroutine function) into a callable the
  SDK may call from the reactor thread: it runs on the application's loop and answers with a Deferred,
  so listeners, local transactions and transaction checkers run where the application's state lives.

Where the application's loop is the reactor's own (Twisted's asyncio reactor, as a FerryMQ broker runs
it when it serves its HTTP gateway on its loop), both directions are plain calls: no thread to hop to.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import logging
from collections.abc import Callable
from typing import Any, Self

from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.python.threadable import isInIOThread

from ferrymq.remoting.mailbox import Mailbox, answers_to

from .. import reactor_thread

log = logging.getLogger("ferrymq.sdk.aio")


_reactor_module = None


def _reactor():
    global _reactor_module
    if _reactor_module is None:
        from twisted.internet import reactor

        _reactor_module = reactor
    return _reactor_module


def _ensure_reactor() -> None:
    """:func:`reactor_thread.ensure_running`, which takes a lock, only until the reactor runs."""
    if not _reactor().running:
        reactor_thread.ensure_running()


#: calls into the reactor thread
_hops = Mailbox(lambda run: _reactor().callFromThread(run))
def _settle(future: asyncio.Future, ok: bool, value: Any) -> None:
    if future.done():  # cancelled meanwhile
        return
    if ok:
        future.set_result(value)
    else:
        future.set_exception(value)


class _Call:
    """One :func:`call` in the reactor thread: runs ``fn`` and posts its outcome to the awaiting loop."""

    __slots__ = ("answers", "args", "deferred", "fn", "future", "kwargs")

    def __init__(self, fn: Callable[..., Any], args: tuple, kwargs: dict, future: asyncio.Future,
                 answers: Mailbox) -> None:
        self.fn, self.args, self.kwargs, self.future, self.answers = fn, args, kwargs, future, answers
        self.deferred: defer.Deferred | None = None

    def run(self) -> None:
        self.deferred = d = defer.maybeDeferred(self.fn, *self.args, **self.kwargs)
        d.addCallbacks(self.answer, self.fail)

    def answer(self, result: Any) -> None:
        self._post(True, result)

    def fail(self, failure: Failure) -> None:
        self._post(False, failure.value)

    def _post(self, ok: bool, value: Any) -> None:
        try:
            self.answers.post(_settle, self.future, ok, value)
        except RuntimeError:  # the loop is closed: nobody awaits the answer any more
            pass

    def cancel(self) -> None:
        if self.deferred is not None:
            self.deferred.cancel()


async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` in the reactor thread and return its result (a Deferred is waited on)."""
    _ensure_reactor()
    if isInIOThread():
        return await _here(fn, args, kwargs)
    loop = asyncio.get_running_loop()
    future = loop.create_future()
    running = _Call(fn, args, kwargs, future, answers_to(loop))
    _hops.post(running.run)
    try:
        return await future
    except asyncio.CancelledError:
        _hops.post(running.cancel)  # after run(): calls run in the order posted
        raise


async def _here(fn: Callable[..., Any], args: tuple, kwargs: dict) -> Any:
    """:func:`call` on the reactor's own loop: an answer given at once is returned at once, a Deferred
    is awaited (cancelling the task cancels it)."""
    future: asyncio.Future | None = None
    outcome: list = []

    def settle(result: Any) -> None:
        if future is None:
            outcome.append(result)
        elif not future.done():  # cancelled meanwhile
            if isinstance(result, Failure):
                future.set_exception(result.value)
            else:
                future.set_result(result)

    d = defer.maybeDeferred(fn, *args, **kwargs)
    d.addBoth(settle)
    if outcome:
        if isinstance(outcome[0], Failure):
            raise outcome[0].value
        return outcome[0]
    future = asyncio.get_running_loop().create_future()
    try:
        return await future
    except asyncio.CancelledError:
        d.cancel()
        raise


def post(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` in the reactor thread without waiting; calls posted run in the order posted."""
    _ensure_reactor()
    if isInIOThread():  # at once, as call() runs there: the two keep the order they are made in
        fn(*args)
    else:
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
        if _runs_on(loop):
            return defer.Deferred.fromFuture(asyncio.ensure_future(run(args), loop=loop))
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


def _runs_on(loop: asyncio.AbstractEventLoop) -> bool:
    """Whether this thread is running ``loop`` (the reactor's own, when the reactor is asyncio's)."""
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False


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
    def core(self) -> Any:
        """The Twisted-native client this one drives; use it in the reactor thread."""
        return self._core

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
