"""Run the global Twisted reactor in a background thread so blocking code (tests, scripts, compat
fixtures) can call the Deferred-based SDK.

The reactor can run only once per process, so this is a process-wide singleton; code already running
inside the reactor must use the Deferred API directly instead. Where the process's own main thread runs
the reactor (a FerryMQ server hosting a gateway), the other threads call into that one, and code on the
reactor's own asyncio loop (a gateway served on the broker's loop) may make the calls that answer at once.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure
from twisted.python.threadable import isInIOThread

_lock = threading.Lock()
_thread: threading.Thread | None = None


def ensure_running() -> None:
    """Start the reactor in a daemon thread unless this module already did."""
    global _thread
    from twisted.internet import reactor

    with _lock:
        if _thread is not None and _thread.is_alive():
            return
        if reactor.running:  # another thread of this process runs it, or this one: call into that
            return
        started = threading.Event()
        reactor.callWhenRunning(started.set)
        _thread = threading.Thread(
            target=reactor.run, kwargs={"installSignalHandlers": False}, name="twisted-reactor", daemon=True
        )
        _thread.start()
    if not started.wait(10):
        raise RuntimeError("the Twisted reactor thread did not start within 10 s")


def call(fn: Callable[..., Any], *args: Any, timeout: float = 30.0, **kwargs: Any) -> Any:
    """Run ``fn(*args, **kwargs)`` in the reactor thread and wait for its result (a Deferred is waited on).

    Raises the function's exception, or TimeoutError after ``timeout`` seconds. In the reactor's own
    thread it runs at once, and only a call that answers at once may be made there: nothing can wait
    for a Deferred in the thread that has to fire it.
    """
    ensure_running()
    from twisted.internet import reactor

    if isInIOThread():
        outcome: list = []
        d = defer.maybeDeferred(fn, *args, **kwargs).addBoth(outcome.append)
        if not outcome:
            d.cancel()
            raise RuntimeError(f"{getattr(fn, '__name__', fn)!s} waits in the reactor's own thread, which must "
                               "fire it: use the Deferred API there, not the blocking one")
        if isinstance(outcome[0], Failure):
            outcome[0].raiseException()
        return outcome[0]

    future: concurrent.futures.Future = concurrent.futures.Future()

    def run() -> None:
        d = defer.maybeDeferred(fn, *args, **kwargs)
        d.addCallbacks(future.set_result, lambda f: future.set_exception(f.value))

    reactor.callFromThread(run)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"{getattr(fn, '__name__', fn)!s} did not finish within {timeout} s") from None
