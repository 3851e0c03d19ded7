"""The reactor a broker process runs: Twisted's asyncio reactor on uvloop when something is served on the
broker's own loop (``httpEventLoop=BROKER``, ``grpcEventLoop=BROKER``), else Twisted's default, epoll's.

On the asyncio reactor an asyncio server (uvicorn, grpcio's asyncio server) runs in the reactor thread, so
its calls into the broker need no thread hop and no hand-over of the interpreter lock."""

from __future__ import annotations

import asyncio
import math
import sys
from collections.abc import Callable
from typing import Any

from twisted.internet.asyncioreactor import AsyncioSelectorReactor


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
    from twisted.internet.main import installReactor

    loop = uvloop.new_event_loop()
    asyncio.set_event_loop(loop)
    installReactor(BrokerReactor(loop))
    return True


class BrokerReactor(AsyncioSelectorReactor):
    """Twisted's asyncio reactor, its timers armed in whole milliseconds rounded up, its reads without a
    log context.

    uvloop counts a timer's delay in milliseconds, rounded to the nearest, from a clock truncated to the
    millisecond, so the loop's timer fires up to a millisecond and a half before Twisted's own clock says
    the call is due; the stock reactor then re-arms it for what is left, which rounds to no wait at all,
    and the loop turns without sleeping until that clock catches up (28 turns a timer, measured: a broker
    at rest spun ~90 turns a second). Rounded up, a timer fires at most a millisecond late and at most
    once early.

    The stock reactor calls each read through ``log.callWithLogger``, which builds a legacy log context
    (the reader's prefix, two dict copies, a context push) for ``twisted.python.log.msg`` calls that
    FerryMQ does not make: a third of an empty read turn (6.3 against 4.3 µs, a socketpair), 4 % of a paced
    MQTT message's CPU. The reader is registered with the loop directly, when Twisted's reactor keeps the
    state this relies on (``_readers``, ``_readOrWrite``; otherwise it stays as Twisted registered it)."""

    def timeout(self) -> float | None:
        t = super().timeout()
        return t if not t else math.ceil(t * 1000) / 1000

    def addReader(self, reader) -> None:
        super().addReader(reader)
        fd = getattr(self, "_readers", {}).get(reader)
        read = getattr(self, "_readOrWrite", None)
        if fd is not None and read is not None:
            self._asyncioEventloop.add_reader(fd, read, reader, True)


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
