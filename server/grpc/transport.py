# cython: annotation_typing=False
# (an IntEnum is passed where an int is annotated: Cython would refuse it as not an int)
"""The gRPC port's connections, as Twisted protocols: each connection's opening (a PROXY protocol header,
then TLS or plain by its first byte) and its HTTP/2 gRPC calls (:mod:`.connection`), run by :mod:`.dispatch`.
They run on the Twisted reactor (``grpcEventLoop=BROKER``) or, through :mod:`.on_asyncio`, on the gRPC
thread's asyncio loop (``OWN_THREAD``): the factory's ``loop`` runs the calls, its ``clock`` the timers.

A load balancer in front may open a connection with a PROXY protocol header (v1 or v2, :mod:`.proxy_header`),
as Apache's proxy accepts it: the client is then the address it names. After it, a TLS ClientHello (a
handshake record, :data:`~ferrymq.remoting.tls.HANDSHAKE_RECORD`) starts TLS where ``tls.server.mode``
allows TLS, and any other byte starts plain HTTP/2 where it allows plain clients; a connection whose
opening is refused, or which stays silent for :data:`FIRST_BYTE_TIMEOUT`, is closed.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from ferrymq.remoting import twisted_io
from ferrymq.remoting.tls import HANDSHAKE_RECORD
from twisted.internet.protocol import Factory, Protocol

from . import proxy_header
from .connection import CallEnded, CallStarted, GrpcConnection, MessageReceived, RequestsEnded
from .dispatch import Call, Context, Dispatcher
from .framing import UNIMPLEMENTED, Status
from .opening import FIRST_BYTE_TIMEOUT, grpc_peer
from .tls import PortTls

log = logging.getLogger("ferrymq.grpc")

class GrpcProtocol(Protocol):
    """One client's HTTP/2 connection, its calls dispatched to the service; ``peer``: the client's address
    in grpcio's form (its PROXY header's, else the connection's)."""

    def __init__(self, factory: GrpcFactory, peer: str):
        self.factory = factory
        self.peer = peer
        self.loop = factory.loop
        self.conn = GrpcConnection(factory.max_message_size)
        self.calls: dict[int, Call] = {}
        self._flushing = False
        self._write: Callable[[bytes], None] | None = None

    def connectionMade(self) -> None:
        self.factory.connections.add(self)
        # a socket send when nothing is queued before the bytes, rather than on the reactor's next turn
        self._write = twisted_io.writer(self.transport)
        self._write(self.conn.data_to_send())

    def dataReceived(self, data: bytes) -> None:
        calls = self.calls
        for event in self.conn.receive(data):
            kind = type(event)
            if kind is MessageReceived:
                call = calls.get(event.stream_id)
                if call is not None:
                    call.message(event.message)
            elif kind is RequestsEnded:
                call = calls.get(event.stream_id)
                if call is not None:
                    call.requests_ended()
            elif kind is CallStarted:
                self._start(event)
            elif kind is CallEnded:
                call = calls.pop(event.stream_id, None)
                if call is not None:
                    call.ended()
        self._flush()
        if self.conn.closed:
            if self.conn.error:
                log.warning("gRPC: closing the connection from %s: %s", self.peer, self.conn.error)
            self.transport.loseConnection()

    def _start(self, event: CallStarted) -> None:
        dispatcher = self.factory.dispatcher
        handler = dispatcher.handler(event.path)
        if handler is None:
            self.conn.finish(event.stream_id, UNIMPLEMENTED, f"Method not found: {event.path}")
            return
        context = Context(event.metadata, self.peer, event.timeout)
        self.calls[event.stream_id] = Call(self, event.stream_id, handler, context, event.path, dispatcher.access,
                                           event.timeout)

    # ------------------------------------------------------------------ what the calls answer (dispatch.Host)

    def send_message(self, stream_id: int, message: bytes) -> None:
        self.conn.send_message(stream_id, message)
        self._flush_soon()

    def finish(self, stream_id: int, status: Status, trailing: tuple = ()) -> None:
        self.conn.finish(stream_id, status.code, status.details, trailing)
        self._flush_soon()

    def call_done(self, stream_id: int) -> None:
        self.calls.pop(stream_id, None)
        if not self.calls and self.factory.stopping:
            self._flush()
            self.transport.loseConnection()

    def _flush_soon(self) -> None:
        """Write what the connection has to send at the end of this turn of the loop: the answers of the
        calls completing in one turn go out in one write."""
        if not self._flushing:
            self._flushing = True
            self.loop.call_soon(self._flush)

    def _flush(self) -> None:
        self._flushing = False
        data = self.conn.data_to_send()
        if data:
            self._write(data)

    def go_away(self) -> None:
        """No new call: a GOAWAY to the client, and the connection closed once its calls have ended."""
        self.conn.go_away()
        self._flush()
        if not self.calls:
            self.transport.loseConnection()

    def connectionLost(self, reason: Any = None) -> None:
        calls, self.calls = self.calls, {}
        for call in calls.values():
            call.ended()
        self.factory.closed(self)


class _Opening(Protocol):
    """A new connection until its opening is read (a PROXY header, if any, and the first byte after it); then
    it hands the transport to the connection's :class:`GrpcProtocol`, under TLS or not, and is gone."""

    def __init__(self, factory: GrpcFactory, addr: Any):
        self.factory = factory
        self.origin = grpc_peer(addr.host, addr.port)
        self.head = b""
        self._timer: Any = None

    def connectionMade(self) -> None:
        self.transport.setTcpNoDelay(True)  # an answer is written whole at once: no reason to wait for more
        self._timer = self.factory.clock.callLater(self.factory.timeout, self.transport.abortConnection)

    def connectionLost(self, reason: Any = None) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()

    def dataReceived(self, data: bytes) -> None:
        self.head += data
        try:
            header = proxy_header.read(self.head)
        except proxy_header.BadHeader as exc:
            log.warning("gRPC: closing the connection from %s: %s", self.origin, exc)
            self.transport.loseConnection()
            return
        if header is None or len(self.head) == header.length:
            return
        self._timer.cancel()
        if header.source is not None:
            self.origin = grpc_peer(*header.source)
        rest = self.head[header.length:]
        tls = self.factory.tls
        grpc_protocol = GrpcProtocol(self.factory, self.origin)
        if rest[0] == HANDSHAKE_RECORD and tls is not None:
            from twisted.protocols.tls import TLSMemoryBIOProtocol

            protocol: Protocol = TLSMemoryBIOProtocol(self.factory.tls_factory, grpc_protocol)
        elif tls is None or tls.plain_too:
            protocol = grpc_protocol
        else:
            log.warning("gRPC: closing the plain connection from %s: tls.server.mode is enforcing", self.origin)
            self.transport.loseConnection()
            return
        transport = self.transport
        transport.protocol = protocol
        protocol.makeConnection(transport)
        protocol.dataReceived(rest)


class GrpcFactory(Factory):
    """The gRPC port's connections: ``tls`` the port's TLS (None: plain only); the calls are ``dispatcher``'s,
    run on ``loop`` (the reactor's)."""

    noisy = False

    def __init__(self, dispatcher: Dispatcher, tls: PortTls | None, max_message_size: int,
                 loop: asyncio.AbstractEventLoop, clock: Any, timeout: float = FIRST_BYTE_TIMEOUT):
        self.dispatcher = dispatcher
        self.tls = tls
        self.max_message_size = max_message_size
        self.loop = loop
        self.clock = clock
        self.timeout = timeout
        self.connections: set[GrpcProtocol] = set()
        #: set when the server stops: a connection whose calls have all ended closes
        self.stopping = False
        self._tls_factory: Any = None
        self._all_closed: list[Any] = []

    def closed(self, connection: GrpcProtocol) -> None:
        self.connections.discard(connection)
        if not self.connections:
            waiting, self._all_closed = self._all_closed, []
            for deferred in waiting:
                deferred.callback(None)

    def go_away(self, grace: float) -> Any:
        """Stop taking calls: every connection is told GOAWAY and closes once its calls have ended, or is
        cut after ``grace`` seconds. A Deferred fired once all are closed."""
        from twisted.internet import defer

        self.stopping = True
        if not self.connections:
            return defer.succeed(None)
        closed = defer.Deferred()
        self._all_closed.append(closed)
        cut = self.clock.callLater(grace, self._cut)
        closed.addBoth(lambda result: cut.cancel() if cut.active() else None)
        for connection in list(self.connections):
            connection.go_away()
        return closed

    def _cut(self) -> None:
        for connection in list(self.connections):
            connection.transport.abortConnection()

    @property
    def tls_factory(self) -> Any:
        """The TLS layer's factory, made for the first TLS client (its module loads OpenSSL)."""
        if self._tls_factory is None:
            from twisted.protocols.tls import TLSMemoryBIOFactory

            self._tls_factory = TLSMemoryBIOFactory(self.tls.connections(), False, self, self.clock)
        return self._tls_factory

    def buildProtocol(self, addr: Any) -> Protocol:
        return _Opening(self, addr)
