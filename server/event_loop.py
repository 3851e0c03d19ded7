"""The reactor a broker process runs: Twisted's asyncio reactor on uvloop when something is served on the
broker's own loop (``httpEventLoop=BROKER``, ``grpcEventLoop=BROKER``), else Twisted's default, epoll's.

On the asyncio reactor an asyncio server (uvicorn, grpcio's asyncio server) runs in the reactor thread, so
its calls into the broker need no thread hop and no hand-over of the interpreter lock."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from typing import Any


def install_reactor() -> bool:
    """Make Twisted's reactor the asyncio reactor on a uvloop loop, made this thread's event loop; call
    before anything imports ``twisted.internet.reactor``. False when that happened already (the reactor
    installed stays), or when uvloop is missing."""
    if "twisted.internet.reactor" in sys.modules:
        return False
    try:
        import uvloop
    except ImportError:
        return False
    from twisted.internet import asyncioreactor

    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    asyncioreactor.install(loop)
    return True


def on_asyncio_reactor() -> bool:
    """Whether the installed reactor runs on an asyncio loop (an installed :func:`install_reactor`)."""
    from twisted.internet import asyncioreactor, reactor

    return isinstance(reactor, asyncioreactor.AsyncioSelectorReactor)


def call_soon(reactor: Any, f: Callable[[], None]) -> Any:
    """Run ``f`` in the reactor's next turn; the handle returned has ``cancel()``.

    On the asyncio reactor this is the loop's own ``call_soon``: a ``callLater(0)`` there costs a
    DelayedCall in Twisted's timer heap, a cancelled and re-armed asyncio timer, and a pass of
    ``runUntilCurrent`` over the reactor's timed calls when it fires. Any other reactor (a test's
    ``Clock`` included) gets ``callLater(0, f)``."""
    loop = getattr(reactor, "_asyncioEventloop", None)
    if loop is not None:
        return loop.call_soon(f)
    return reactor.callLater(0, f)
