"""The gRPC port in ``tls.server.mode=permissive``: TLS and plain clients on one port, as Apache's proxy serves them.

grpcio serves a port either with TLS or without, and cannot tell the two apart. In permissive mode the
public port is therefore this module's: a connection's first byte tells a TLS ClientHello (a handshake
record, :data:`~ferrymq.remoting.tls.HANDSHAKE_RECORD`) from a plain client's HTTP/2 preface (``PRI *``),
and the connection is spliced, byte for byte, to one of grpcio's two loopback ports: its TLS port (grpcio
ends the TLS) or its plain one. Whatever else a client sends first goes to the plain port, whose HTTP/2
server refuses it. The splice runs on the gRPC server's own loop, so the broker's reactor carries none of
it; ``disabled`` and ``enforcing`` modes have no splitter at all (grpcio listens on the public port).

A load balancer in front may open the connection with a PROXY protocol header (v1 or v2, :mod:`.proxy_header`),
as Apache's proxy accepts it: the splitter reads it off, and the client is the address it names. A header
that does not parse closes the connection (logged).

grpcio sees a spliced client at the splitter's loopback address. :data:`ORIGINS` maps that address to the
client's own, for :func:`client_peer`: the address the service records (born host, client address) and
the access checks match against source IPs.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

from ferrymq.remoting.tls import HANDSHAKE_RECORD

from . import opening, proxy_header
from .opening import FIRST_BYTE_TIMEOUT

log = logging.getLogger("ferrymq.grpc")

#: connections the public port queues before they are accepted (asyncio's default)
BACKLOG = 100
#: where grpcio's two inner ports listen
LOOPBACK = "127.0.0.1"

#: grpcio's peer string of a spliced connection's inner end -> the client's peer string (this process's
#: splices; the loopback ports are unique while their connections are open)
ORIGINS: dict[str, str] = {}


def grpc_peer(address: tuple) -> str:
    """A socket address ``(host, port, ...)`` in grpcio's peer form (:func:`.opening.grpc_peer`)."""
    return opening.grpc_peer(address[0], address[1])


def client_peer(context: Any) -> str:
    """The peer of a call's client, in grpcio's form: the client's own address when it came through the
    splitter, else grpcio's."""
    peer = context.peer() or ""
    return ORIGINS.get(peer, peer)


class Splitter:
    """Listens on the public port and splices each connection to ``plain_port`` or ``tls_port`` on the loopback
    address. :attr:`open` holds the transports of both ends of every splice (empty once all are closed)."""

    def __init__(self, plain_port: int, tls_port: int, timeout: float = FIRST_BYTE_TIMEOUT):
        self.plain_port = plain_port
        self.tls_port = tls_port
        self.timeout = timeout
        self.open: set[asyncio.BaseTransport] = set()
        self._server: asyncio.AbstractServer | None = None
        self._socket: socket.socket | None = None  # bound, not yet served

    def bind(self, host: str, port: int) -> int:
        """Listen on ``host:port`` (before the loop runs, if need be); the port bound. Raises OSError when it
        cannot be listened on. :meth:`serve` accepts."""
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._socket = socket.create_server((host, port), family=family, backlog=BACKLOG)
        return self._socket.getsockname()[1]

    async def serve(self) -> None:
        """Start accepting on the port :meth:`bind` bound."""
        sock, self._socket = self._socket, None
        self._server = await asyncio.get_running_loop().create_server(lambda: _Client(self), sock=sock,
                                                                        backlog=BACKLOG)

    async def listen(self, host: str, port: int) -> int:
        """:meth:`bind` and :meth:`serve` at once; the port bound."""
        bound = self.bind(host, port)
        await self.serve()
        return bound

    def stop_accepting(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        if self._server is not None:
            self._server.close()

    async def close(self) -> None:
        """Stop accepting and cut every splice still open."""
        self.stop_accepting()
        for transport in list(self.open):
            transport.abort()
        if self._server is not None:
            await self._server.wait_closed()


class _Client(asyncio.Protocol):
    """A connection to the public port: silent until its first bytes, then spliced to an inner port."""

    def __init__(self, splitter: Splitter):
        self.splitter = splitter
        self.transport: asyncio.Transport | None = None
        self.origin = ""
        self.inner: _Inner | None = None
        self.pending: list[bytes] | None = None  # read while the inner connection is being made
        self.head: bytes | None = b""  # read while whether a PROXY protocol header comes first is unknown
        self.closed = False
        self._timer: asyncio.TimerHandle | None = None
        self._connecting: asyncio.Task | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        self.splitter.open.add(transport)
        self.origin = grpc_peer(transport.get_extra_info("peername"))
        if self.splitter.timeout > 0:
            self._timer = asyncio.get_running_loop().call_later(self.splitter.timeout, transport.abort)

    def data_received(self, data: bytes) -> None:
        if self.inner is not None:
            self.inner.transport.write(data)
        elif self.pending is not None:
            self.pending.append(data)
        elif self.head is not None:
            self._read_header(data)
        else:
            if self._timer is not None:
                self._timer.cancel()
            self.pending = [data]
            self.transport.pause_reading()
            port = self.splitter.tls_port if data[0] == HANDSHAKE_RECORD else self.splitter.plain_port
            self._connecting = asyncio.get_running_loop().create_task(self._connect(port))

    def _read_header(self, data: bytes) -> None:
        """``data`` read while a PROXY protocol header may still be coming: once it is known, the client is
        the address it names, and what follows it goes on to be spliced."""
        self.head += data
        try:
            header = proxy_header.read(self.head)
        except proxy_header.BadHeader as exc:
            log.warning("gRPC: closing the connection from %s: %s", self.origin, exc)
            self.transport.close()
            return
        if header is None:
            return
        if header.source is not None:
            self.origin = grpc_peer(header.source)
        rest, self.head = self.head[header.length:], None
        if rest:
            self.data_received(rest)

    async def _connect(self, port: int) -> None:
        try:
            await asyncio.get_running_loop().create_connection(lambda: _Inner(self), LOOPBACK, port)
        except OSError as exc:
            log.warning("gRPC: closing the connection from %s: the inner port %d refused it: %s",
                        self.origin, port, exc)
            self.transport.abort()

    def attach(self, inner: _Inner) -> None:
        """The inner connection is up: what was read goes through, and reading resumes."""
        self.inner = inner
        inner.transport.write(b"".join(self.pending))
        self.pending = None
        self.transport.resume_reading()

    def eof_received(self) -> bool:
        return False  # HTTP/2 has no half-closed connection: close both ends

    def pause_writing(self) -> None:
        if self.inner is not None:
            self.inner.transport.pause_reading()

    def resume_writing(self) -> None:
        if self.inner is not None:
            self.inner.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.splitter.open.discard(self.transport)
        if self._timer is not None:
            self._timer.cancel()
        if self.inner is not None:
            _end(self.inner.transport, exc)
        elif self._connecting is not None:
            self._connecting.cancel()


class _Inner(asyncio.Protocol):
    """The splice's connection to grpcio's inner port, for one :class:`_Client`."""

    def __init__(self, client: _Client):
        self.client = client
        self.transport: asyncio.Transport | None = None
        self.key = ""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        if self.client.closed:  # the client left while this connection was being made
            transport.abort()
            return
        self.client.splitter.open.add(transport)
        self.key = grpc_peer(transport.get_extra_info("sockname"))
        ORIGINS[self.key] = self.client.origin
        self.client.attach(self)

    def data_received(self, data: bytes) -> None:
        self.client.transport.write(data)

    def eof_received(self) -> bool:
        return False

    def pause_writing(self) -> None:
        self.client.transport.pause_reading()

    def resume_writing(self) -> None:
        self.client.transport.resume_reading()

    def connection_lost(self, exc: Exception | None) -> None:
        self.client.splitter.open.discard(self.transport)
        if self.key:
            ORIGINS.pop(self.key, None)
        _end(self.client.transport, exc)


def _end(transport: asyncio.Transport, exc: Exception | None) -> None:
    """The other end of a splice whose one end closed: closed once what it holds is written, or cut at once
    when the first end failed."""
    if exc is None:
        transport.close()
    else:
        transport.abort()
