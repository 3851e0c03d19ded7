"""The gRPC port's connections (:mod:`.transport`) on a plain asyncio loop: the loop of the gRPC thread
(``grpcEventLoop=OWN_THREAD``), beside a reactor that is not asyncio's.

:mod:`.transport`'s protocols (the opening, TLS by Twisted's memory-BIO layer, the HTTP/2 calls) are the
port's one implementation. Here each accepted asyncio connection drives them through
:class:`AsyncioTransport`, the few transport calls they make, and :class:`LoopClock` gives them the loop's
timers. TLS is the same layer as on the reactor, fed the bytes the opening has already read to tell a
ClientHello from a plain client's preface, with the same context (:class:`.tls.AlpnTls`).
"""

from __future__ import annotations

import asyncio
import functools
import socket
import struct
from collections.abc import Callable
from typing import Any

from twisted.internet.address import IPv4Address, IPv6Address
from twisted.internet.error import ConnectionDone, ConnectionLost
from twisted.python.failure import Failure


class _Delayed:
    """A call scheduled by :meth:`LoopClock.callLater`: Twisted's ``IDelayedCall``, the part the port uses."""

    __slots__ = ("_handle", "_called")

    def __init__(self, loop: asyncio.AbstractEventLoop, delay: float, fn: Callable[[], None]):
        self._called = False
        self._handle = loop.call_later(delay, self._run, fn)

    def _run(self, fn: Callable[[], None]) -> None:
        self._called = True
        fn()

    def active(self) -> bool:
        return not self._called and not self._handle.cancelled()

    def cancel(self) -> None:
        self._handle.cancel()


class LoopClock:
    """An asyncio loop as Twisted's ``IReactorTime``: the timers of the port's protocols run on it."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop

    def seconds(self) -> float:
        return self.loop.time()

    def callLater(self, delay: float, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> _Delayed:
        return _Delayed(self.loop, delay, functools.partial(fn, *args, **kwargs))


def _address(address: tuple) -> IPv4Address | IPv6Address:
    host, port = address[0], address[1]
    return IPv6Address("TCP", host, port) if ":" in host else IPv4Address("TCP", host, port)


class AsyncioTransport(asyncio.Protocol):
    """One accepted asyncio connection, driving the Twisted protocol ``factory`` builds for it: that protocol
    is :attr:`protocol` (which the opening replaces by the connection's own), and this object is its
    transport."""

    def __init__(self, factory: Any):
        self.factory = factory
        self.protocol: Any = None
        self.disconnecting = False
        self._transport: asyncio.Transport | None = None
        self._producer: Any = None

    # ------------------------------------------------------------------ asyncio's side

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]
        self.protocol = self.factory.buildProtocol(_address(transport.get_extra_info("peername")))
        self.protocol.makeConnection(self)

    def data_received(self, data: bytes) -> None:
        self.protocol.dataReceived(data)

    def eof_received(self) -> bool:
        return False  # HTTP/2 has no half-closed connection

    def pause_writing(self) -> None:
        if self._producer is not None:
            self._producer.pauseProducing()

    def resume_writing(self) -> None:
        if self._producer is not None:
            self._producer.resumeProducing()

    def connection_lost(self, exc: Exception | None) -> None:
        self.disconnecting = True  # a write after the end is dropped, as Twisted drops it
        reason = ConnectionDone() if exc is None else ConnectionLost(str(exc))
        self.protocol.connectionLost(Failure(reason))

    # ------------------------------------------------------------------ the Twisted protocol's side

    def write(self, data: bytes) -> None:
        if not self.disconnecting:
            self._transport.write(data)

    def writeSequence(self, data: list[bytes]) -> None:
        self.write(b"".join(data))

    def loseConnection(self) -> None:
        """Close once what is written is out."""
        self.disconnecting = True
        self._transport.close()

    def abortConnection(self) -> None:
        """Cut at once, with a reset (SO_LINGER 0), as the reactor's TCP transport cuts."""
        self.disconnecting = True
        sock = self._transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self._transport.abort()

    def setTcpNoDelay(self, enabled: bool) -> None:
        sock = self._transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, int(enabled))

    def getPeer(self) -> IPv4Address | IPv6Address:
        return _address(self._transport.get_extra_info("peername"))

    def getHost(self) -> IPv4Address | IPv6Address:
        return _address(self._transport.get_extra_info("sockname"))

    def registerProducer(self, producer: Any, _streaming: bool) -> None:
        self._producer = producer

    def unregisterProducer(self) -> None:
        self._producer = None

    def pauseProducing(self) -> None:
        self._transport.pause_reading()

    def resumeProducing(self) -> None:
        self._transport.resume_reading()

    def stopProducing(self) -> None:
        self.abortConnection()
