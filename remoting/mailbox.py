"""Calls handed from one thread to another a burst at a time.

A wake-up of another thread (``reactor.callFromThread``, ``loop.call_soon_threadsafe``) writes to its
wake-up pipe and hands it the interpreter lock: code that crosses between the reactor thread and an
asyncio loop for every request (the SDK's asyncio bridge, the gRPC service) posts here instead, and the
calls of many concurrent requests run on one wake-up.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any

log = logging.getLogger("ferrymq.remoting.mailbox")


class Mailbox:
    """Calls posted from one thread, run in the order posted in another, which is woken once per burst.

    A wake-up (``reactor.callFromThread``, ``loop.call_soon_threadsafe``) writes to the other thread's
    wake-up pipe and hands it the interpreter lock; the calls of many concurrent requests posted here
    are run by one wake-up instead, in one turn of the other thread's loop.
    """

    __slots__ = ("_calls", "_lock", "_wake", "_woken")

    def __init__(self, wake: Callable[[Callable[[], None]], Any]) -> None:
        self._calls: collections.deque[tuple[Callable[..., Any], tuple]] = collections.deque()
        self._lock = threading.Lock()
        self._woken = False
        self._wake = wake

    def post(self, fn: Callable[..., Any], *args: Any) -> None:
        """Raises what the wake-up raises (RuntimeError for a closed loop) when it has to wake."""
        self._calls.append((fn, args))
        with self._lock:
            if self._woken:
                return
            self._woken = True
        try:
            self._wake(self._run)
        except BaseException:
            with self._lock:
                self._woken = False
            raise

    def _run(self) -> None:
        with self._lock:
            self._woken = False  # before taking the calls: one posted from now on wakes the thread again
        calls = self._calls
        while calls:
            fn, args = calls.popleft()
            try:
                fn(*args)
            except Exception:  # noqa: BLE001 - one failing call must not stop the others
                log.exception("call %r posted across threads failed", fn)


#: answers to each event loop awaiting them
_answers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Mailbox] = weakref.WeakKeyDictionary()


def answers_to(loop: asyncio.AbstractEventLoop) -> Mailbox:
    """The mailbox that hands answers to ``loop``'s thread, one wake-up per turn of the answering side."""
    mailbox = _answers.get(loop)
    if mailbox is None:
        ref = weakref.ref(loop)  # the loop's entry goes with the loop

        def wake(run: Callable[[], None]) -> None:
            target = ref()
            if target is None:
                raise RuntimeError("the event loop is gone")
            target.call_soon_threadsafe(run)

        mailbox = _answers[loop] = Mailbox(wake)
    return mailbox
