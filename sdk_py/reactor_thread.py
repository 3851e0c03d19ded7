"""Run the global Twisted reactor in a background thread so blocking code (tests, scripts, compat
fixtures) can call the Deferred-based SDK.

The reactor can run only once per process, so this is a process-wide singleton; code already running
inside the reactor must use the Deferred API directly instead. Where the process's own main thread runs
the reactor (a FerryMQ server hosting a gateway), the other threads call into that one.
"""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
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
        if reactor.running and not isInIOThread():  # another thread of this process runs it: call into that
            return
        if reactor.running:
            raise RuntimeError(
                "the Twisted reactor already runs in this process; use the Deferred API, not the blocking one"
            )
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

    Raises the function's exception, or TimeoutError after ``timeout`` seconds.
    """
    ensure_running()
    from twisted.internet import reactor

    future: concurrent.futures.Future = concurrent.futures.Future()

    def run() -> None:
        d = defer.maybeDeferred(fn, *args, **kwargs)
        d.addCallbacks(future.set_result, lambda f: future.set_exception(f.value))

    reactor.callFromThread(run)
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"{getattr(fn, '__name__', fn)!s} did not finish within {timeout} s") from None
