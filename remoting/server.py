"""Listening side: accepts connections and hands their requests to a processor."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.internet.protocol import Factory

from .channel import Channel, format_address
from .dispatch import Processor
from .latency import RequestLatency
from .limits import TOO_MANY_CONNECTIONS, Refusals
from .options import TransportOptions
from .protocol import RemotingProtocol
from .tls import ServerTls, TlsDetectingFactory, TlsMode

log = logging.getLogger("ferrymq.remoting")

#: At most one log line per this many seconds about connections refused at accept: a flood must not
#: turn into a flood of log lines.
_REFUSAL_LOG_INTERVAL = 10.0


class RemotingServer(Factory):
    """``RemotingServer(processor).listen(port)``; ``stop()`` shuts down gracefully.

    ``name`` prefixes log lines so an operator can tell the name server's connections from the broker's.
    ``refusals`` counts what the limits refused, and ``latency`` holds sampled request latencies, over
    every port this server listens on.
    ``tls`` (None: disabled) lets TLS clients in, beside plain ones in permissive mode (:mod:`.tls`).
    A new :attr:`processor` answers the open connections' next requests too.
    """

    noisy = False  # the service logs its own "listening on" line

    def __init__(
        self,
        processor: Processor | None,
        options: TransportOptions | None = None,
        reactor: Any = None,
        name: str = "remoting",
        tls: ServerTls | None = None,
    ):
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self._processor = processor
        self.options = options or TransportOptions()
        self.reactor = reactor
        self.name = name
        self.tls = tls
        self.connections: set[RemotingProtocol] = set()
        self._close_listeners: list[Callable[[Channel], Any]] = []
        self._listening_ports: list[Any] = []  # the broker listens on listenPort and listenPort-2
        self._lost_waiters: list[defer.Deferred] = []
        self.refusals = Refusals()
        self.latency = RequestLatency()
        self._refused_unlogged = 0
        self._refusal_logged_at = -_REFUSAL_LOG_INTERVAL

    @property
    def processor(self) -> Processor | None:
        return self._processor

    @processor.setter
    def processor(self, processor: Processor | None) -> None:
        """Every connection, open or new, hands its next request to ``processor``: a broker whose role
        changes (controller mode) answers a client that connected before the change as its new role
        does, as a master must take the sends of a producer connected to it while it was a slave."""
        self._processor = processor
        for proto in self.connections:
            proto.processor = processor

    # ------------------------------------------------------------------ Factory

    def buildProtocol(self, addr: Any) -> RemotingProtocol | None:
        """A protocol for the accepted connection, or None (Twisted then closes the socket at once)
        when ``max_connections`` are open already."""
        limit = self.options.max_connections
        if limit and len(self.connections) >= limit:
            self._refuse_connection(addr, limit)
            return None
        return RemotingProtocol(self._processor, self.options, self.reactor, owner=self, refusals=self.refusals,
                                latency=self.latency)

    def _refuse_connection(self, addr: Any, limit: int) -> None:
        self.refusals.count(TOO_MANY_CONNECTIONS)
        self._refused_unlogged += 1
        now = self.reactor.seconds()
        if now - self._refusal_logged_at >= _REFUSAL_LOG_INTERVAL:
            log.warning("%s: refused the connection from %s: %d connections open (maxConnections); "
                        "%d refused since the last such line", self.name, format_address(addr), limit,
                        self._refused_unlogged)
            self._refusal_logged_at = now
            self._refused_unlogged = 0

    def connection_made(self, proto: RemotingProtocol) -> None:
        proto.processor = self._processor  # the one set since the protocol was built, if any
        self.connections.add(proto)
        log.debug("%s: connection from %s", self.name, proto.peer)

    def connection_lost(self, proto: RemotingProtocol) -> None:
        self.connections.discard(proto)
        log.debug("%s: connection from %s closed", self.name, proto.peer)
        for listener in list(self._close_listeners):
            try:
                listener(proto.channel)
            except Exception:  # noqa: BLE001
                log.exception("%s: close listener failed for %s", self.name, proto.peer)
        if not self.connections:
            waiters, self._lost_waiters = self._lost_waiters, []
            for d in waiters:
                d.callback(None)

    # ------------------------------------------------------------------ public API

    def add_close_listener(self, listener: Callable[[Channel], Any]) -> None:
        """Call ``listener(channel)`` whenever any connection closes (idle, error, peer, shutdown)."""
        self._close_listeners.append(listener)

    @property
    def channels(self) -> list[Channel]:
        return [p.channel for p in self.connections if p.channel is not None]

    def listen(self, port: int, interface: str = "0.0.0.0", backlog: int = 1024) -> Any:
        """Start listening; may be called again for more ports served by the same processor."""
        factory: Factory = self
        if self.tls is not None and self.tls.mode is not TlsMode.DISABLED:
            factory = TlsDetectingFactory(self, self.tls, self.reactor, self.options.idle_timeout, self.name)
        listening = self.reactor.listenTCP(port, factory, backlog=backlog, interface=interface)
        self._listening_ports.append(listening)
        return listening

    def _first_port(self) -> Any:
        if not self._listening_ports:
            raise RuntimeError(f"{self.name} is not listening")
        return self._listening_ports[0]

    @property
    def address(self) -> str:
        """``host:port`` of the first listening port, as bound (useful with port 0)."""
        return format_address(self._first_port().getHost())

    @property
    def port(self) -> int:
        return self._first_port().getHost().port

    @defer.inlineCallbacks
    def stop(self, grace: float | None = None):
        """Graceful shutdown: stop accepting, stop reading, answer requests already read, then close.

        Requests still unanswered after ``grace`` seconds (default ``options.shutdown_grace``) are dropped.
        """
        grace = self.options.shutdown_grace if grace is None else grace
        ports, self._listening_ports = self._listening_ports, []
        for listening in ports:
            yield defer.maybeDeferred(listening.stopListening)
        conns = list(self.connections)
        if conns:
            drained = defer.DeferredList([p.drain() for p in conns], consumeErrors=True)
            timer = self.reactor.callLater(grace, drained.cancel)
            yield drained
            if timer.active():
                timer.cancel()
            else:
                log.warning("%s: shutdown grace of %.1f s expired with requests in flight", self.name, grace)
        if self.connections:
            gone = defer.Deferred()
            self._lost_waiters.append(gone)
            for proto in list(self.connections):
                proto.close()
            # A peer that never reads could hold loseConnection open; abort after a short wait.
            abort = self.reactor.callLater(2.0, self._abort_all)
            yield gone
            if abort.active():
                abort.cancel()

    def _abort_all(self) -> None:
        for proto in list(self.connections):
            proto.transport.abortConnection()
