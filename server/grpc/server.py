"""Serving the v2 service, on the broker's own loop or on a loop of its own.

Either way the port is FerryMQ's own HTTP/2 transport (:mod:`.transport`, on the ``h2`` library): a
connection's opening (a PROXY header, then TLS or plain by its first byte) and its calls, dispatched to the
service (:mod:`.dispatch`). Where it runs is ``grpcEventLoop``:

- :class:`GrpcOnReactor` (``BROKER``): on the reactor, Twisted's asyncio reactor on uvloop. A call runs from
  its first byte read to its answer written in the reactor thread: the broker's send or POP is called
  straight from the service (:func:`.reactor.in_reactor`), with no thread to wake and no contention for the
  interpreter lock.
- :class:`GrpcThread` (``OWN_THREAD``): on an asyncio loop of its own in a thread, beside the broker's epoll
  reactor (where the asyncio reactor cannot be installed), through :mod:`.on_asyncio`; what a call asks of
  the broker hops to the reactor thread and back (:mod:`.reactor`).

Either way the port is bound by ``start()``, before the reactor runs: a taken port stops the server from
starting, as a taken listenPort does.
"""

from __future__ import annotations

import abc
import asyncio
import concurrent.futures
import logging
import socket
import threading
from typing import TYPE_CHECKING, Any

from .dispatch import Dispatcher
from .on_asyncio import AsyncioTransport, LoopClock
from .service import MessagingService
from .tls import PortTls
from .transport import GrpcFactory

if TYPE_CHECKING:
    from .access import AccessChecks

log = logging.getLogger("ferrymq.grpc")

#: the largest request accepted (the proxy's grpcMaxInboundMessageSize): above maxMessageSize, so a
#: too-large body is answered MESSAGE_BODY_TOO_LARGE rather than cut off by the transport
MAX_INBOUND_MESSAGE_SIZE = 130 * 1024 * 1024
#: seconds calls in flight get to finish when the server stops
GRACE = 2.0
#: connections the port queues before they are accepted
BACKLOG = 100


def _cannot_listen(host: str, port: int, problem: object) -> str:
    return (f"grpcListenPort {port} on {host} cannot be listened on ({problem}; in use by another process?): "
            f"set grpcListenPort in the config file, or 0 to turn gRPC off")


class _Port(abc.ABC):
    """The gRPC port of ``service`` on ``host:port``: its connections (:class:`.transport.GrpcFactory`) run on
    the loop, and with the clock, of :meth:`_runner`."""

    #: where the server runs, for the log line
    placement = ""

    def __init__(self, service: MessagingService, host: str, port: int, access: AccessChecks | None = None,
                 tls: PortTls | None = None):
        """``access``: the access checks each request passes first (None: none); ``tls``: serve TLS
        (:func:`.tls.port_tls`), and plain too when it says so; None: plain only."""
        self.service = service
        self.access = access
        self.tls = tls
        self.host = host
        self.port = port
        loop, clock = self._runner()
        self.factory = GrpcFactory(Dispatcher(service, access), tls, MAX_INBOUND_MESSAGE_SIZE, loop, clock)

    @abc.abstractmethod
    def _runner(self) -> tuple[asyncio.AbstractEventLoop, Any]:
        """The loop that runs the port's calls, and the clock of its timers."""

    def _served(self) -> None:
        clients = "plain" if self.tls is None else "TLS and plain" if self.tls.plain_too else "TLS"
        log.info("gRPC MessagingService served on %s:%d to %s clients, %s (docs/grpc.md)", self.host, self.port,
                 clients, self.placement)


class GrpcOnReactor(_Port):
    """The port on the reactor, Twisted's asyncio reactor (:func:`ferrymq.server.event_loop.install_reactor`),
    whose loop runs the calls: a call runs from its first byte read to its answer written in the reactor
    thread, with no thread or second loop between the client and the broker."""

    placement = "on the broker's event loop"

    def __init__(self, *args: Any, **kwargs: Any):
        self._listening: Any = None
        super().__init__(*args, **kwargs)

    def _runner(self) -> tuple[asyncio.AbstractEventLoop, Any]:
        from twisted.internet import reactor

        return asyncio.get_event_loop(), reactor

    def start(self) -> None:
        """Listen (before the reactor runs, if need be); raises OSError naming the key when the port cannot
        be listened on."""
        from twisted.internet import reactor
        from twisted.internet.error import CannotListenError

        try:
            self._listening = reactor.listenTCP(self.port, self.factory, backlog=BACKLOG, interface=self.host)
        except CannotListenError as exc:
            raise OSError(_cannot_listen(self.host, self.port, exc.socketError)) from None
        self.port = self._listening.getHost().port
        self._served()

    def stop(self):
        """Stop serving (calls in flight get :data:`GRACE` seconds); a Deferred fired once stopped."""
        from twisted.internet import defer

        stopped = defer.maybeDeferred(self._listening.stopListening) if self._listening else defer.succeed(None)
        return defer.gatherResults([stopped, self.factory.go_away(GRACE)])


class GrpcThread(_Port):
    """The port on an asyncio loop of its own, in a thread of the broker process: the same connections as
    on the reactor (:mod:`.on_asyncio`); the service's calls into the broker hop to the reactor thread."""

    placement = "on a thread of its own"

    def __init__(self, *args: Any, **kwargs: Any):
        self._loop = asyncio.new_event_loop()
        self._thread: threading.Thread | None = None
        self._server: asyncio.AbstractServer | None = None
        super().__init__(*args, **kwargs)

    def _runner(self) -> tuple[asyncio.AbstractEventLoop, Any]:
        return self._loop, LoopClock(self._loop)

    def start(self, timeout: float = 30.0) -> None:
        """Listen, and serve from the thread; raises OSError naming the key when the port cannot be
        listened on."""
        try:
            family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
            # IPv4 clients too on an IPv6 address, as the reactor's listenTCP takes them
            dual = family == socket.AF_INET6 and socket.has_dualstack_ipv6()
            sock = socket.create_server((self.host, self.port), family=family, backlog=BACKLOG, dualstack_ipv6=dual)
        except OSError as exc:
            raise OSError(_cannot_listen(self.host, self.port, exc)) from None
        self.port = sock.getsockname()[1]
        self._thread = threading.Thread(target=self._loop.run_forever, name="grpc", daemon=True)
        self._thread.start()
        self._server = self._in_loop(self._serve(sock), timeout)
        self._served()

    def _in_loop(self, coroutine: Any, timeout: float) -> Any:
        """``coroutine`` run on the thread's loop, waited for here."""
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    async def _serve(self, sock: socket.socket) -> asyncio.AbstractServer:
        factory = self.factory
        return await self._loop.create_server(lambda: AsyncioTransport(factory), sock=sock, backlog=BACKLOG)

    async def _shut_down(self) -> None:
        """Stop accepting, and wait for the connections to close (:meth:`GrpcFactory.go_away`)."""
        self._server.close()
        await self.factory.go_away(GRACE).asFuture(self._loop)

    def _stop_thread(self) -> None:
        """Shut down (:meth:`_shut_down`) and end the thread; once stopped, nothing."""
        if self._thread is None or not self._thread.is_alive():
            return
        try:
            self._in_loop(self._shut_down(), GRACE + 5)
        except (concurrent.futures.TimeoutError, RuntimeError):
            log.warning("gRPC: the server's thread did not stop in time")
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        if not self._thread.is_alive():
            self._loop.close()

    def stop(self):
        """Stop serving (calls in flight get :data:`GRACE` seconds); a Deferred fired once stopped."""
        from twisted.internet import defer, threads

        if self._thread is None or not self._thread.is_alive():
            return defer.succeed(None)
        return threads.deferToThread(self._stop_thread)
