"""Serving the v2 service, on the broker's own loop or on a loop of its own.

Where it runs is ``grpcEventLoop``:

- :class:`GrpcOnReactor` (``BROKER``): FerryMQ's own HTTP/2 transport (:mod:`.transport`, on the ``h2``
  library) on the reactor, Twisted's asyncio reactor on uvloop. A call runs from its first byte read to
  its answer written in the reactor thread: the broker's send or POP is called straight from the service
  (:func:`.reactor.in_reactor`), with no thread to wake, no splice and no contention for the interpreter
  lock. TLS and plain clients share the port in ``permissive`` mode, told apart by their first byte.
- :class:`GrpcThread` (``OWN_THREAD``): grpcio's asyncio server on a loop of its own in a thread, beside the
  broker's epoll reactor (where the asyncio reactor cannot be installed); what a call asks of the broker
  hops to the reactor thread and back. grpcio serves its port plain (``tls.server.mode=disabled``) or TLS
  (``enforcing``); in ``permissive`` mode it listens on two loopback ports, plain and TLS, and the port is
  the :mod:`.splitter`'s, on the same loop.

Either way the port is bound by ``start()``, before the reactor runs: a taken port stops the server from
starting, as a taken listenPort does.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from typing import Any

import grpc

from .protocol import service_grpc
from .dispatch import Dispatcher
from .service import MessagingService
from .splitter import BACKLOG, LOOPBACK, Splitter
from .tls import PortTls
from .transport import GrpcFactory

log = logging.getLogger("ferrymq.grpc")

#: the largest request accepted (the proxy's grpcMaxInboundMessageSize): above maxMessageSize, so a
#: too-large body is answered MESSAGE_BODY_TOO_LARGE rather than cut off by the transport
MAX_INBOUND_MESSAGE_SIZE = 130 * 1024 * 1024
#: seconds calls in flight get to finish when the server stops
GRACE = 2.0


def _cannot_listen(host: str, port: int, problem: object) -> str:
    return (f"grpcListenPort {port} on {host} cannot be listened on ({problem}; in use by another process?): "
            f"set grpcListenPort in the config file, or 0 to turn gRPC off")


def _target(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class _Port:
    """The gRPC port of ``service`` on ``host:port``."""

    #: where the server runs, for the log line
    placement = ""

    def __init__(self, service: MessagingService, host: str, port: int, interceptors: Sequence[Any] = (),
                 tls: PortTls | None = None):
        """``interceptors``: the access checks (:class:`.access.AccessInterceptor`) each request passes
        first; ``tls``: serve TLS (:func:`.tls.port_tls`), and plain too when it says so; None: plain only."""
        self.service = service
        self.interceptors = tuple(interceptors)
        self.tls = tls
        self.host = host
        self.port = port

    def _served(self) -> None:
        clients = "plain" if self.tls is None else "TLS and plain" if self.tls.plain_too else "TLS"
        log.info("gRPC MessagingService served on %s:%d to %s clients, %s (docs/grpc.md)", self.host, self.port,
                 clients, self.placement)


class _Serving(_Port):
    """grpcio's server of the service and, in permissive mode, its splitter: bound by :meth:`_bind` in the
    thread of the loop that is to run them, started by :meth:`_start` on it."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.splitter: Splitter | None = None
        self._server: grpc.aio.Server | None = None

    def _bind(self) -> None:
        """Create the server (on this thread's event loop) and bind its ports; raises OSError naming the
        key when the port cannot be listened on."""
        tls = self.tls
        splitter = None
        try:
            if tls is not None and tls.plain_too:
                splitter = Splitter(0, 0)
                bound = splitter.bind(self.host, self.port)
        except OSError as exc:
            raise OSError(self._cannot_listen(exc)) from None
        server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_INBOUND_MESSAGE_SIZE),
                                          ("grpc.so_reuseport", 0)], interceptors=self.interceptors)
        service_grpc.add_MessagingServiceServicer_to_server(self.service, server)
        try:
            if splitter is not None:
                splitter.plain_port = server.add_insecure_port(f"{LOOPBACK}:0")
                splitter.tls_port = server.add_secure_port(f"{LOOPBACK}:0", tls.credentials)
                ok = splitter.plain_port and splitter.tls_port
            else:
                target = _target(self.host, self.port)
                bound = ok = (server.add_secure_port(target, tls.credentials) if tls is not None
                              else server.add_insecure_port(target))
        except RuntimeError as exc:  # grpcio raises when it cannot bind
            ok, problem = 0, exc
        else:
            problem = "not bound"
        if not ok:
            if splitter is not None:
                splitter.stop_accepting()
            raise OSError(self._cannot_listen(problem))
        self.port = bound
        self.splitter = splitter
        self._server = server

    def _cannot_listen(self, problem: object) -> str:
        return _cannot_listen(self.host, self.port, problem)

    async def _start(self) -> None:
        await self._server.start()
        if self.splitter is not None:
            await self.splitter.serve()
        self._served()

    async def _shut_down(self) -> None:
        """Stop accepting, give the calls in flight :data:`GRACE` seconds, then cut every splice."""
        if self.splitter is not None:
            self.splitter.stop_accepting()
        if self._server is not None:
            await self._server.stop(GRACE)
        if self.splitter is not None:
            await self.splitter.close()


class GrpcOnReactor(_Port):
    """The service served by FerryMQ's own HTTP/2 transport (:mod:`.transport`) on the reactor, Twisted's
    asyncio reactor (:func:`ferrymq.server.event_loop.install_reactor`), whose loop runs the calls: a call
    runs from its first byte read to its answer written in the reactor thread, with no thread, splice or
    second loop between the client and the broker. TLS and plain clients share the port in ``permissive``
    mode, told apart by their first byte."""

    placement = "on the broker's event loop"

    def __init__(self, *args: Any, **kwargs: Any):
        from twisted.internet import reactor

        super().__init__(*args, **kwargs)
        access = self.interceptors[0] if self.interceptors else None
        self.factory = GrpcFactory(Dispatcher(self.service, access), self.tls, MAX_INBOUND_MESSAGE_SIZE,
                                   asyncio.get_event_loop(), reactor)
        self._listening: Any = None

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


class GrpcThread(_Serving):
    """The service on a loop of its own, in a thread of the broker process."""

    placement = "on a thread of its own"

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopped: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None

    def start(self, timeout: float = 30.0) -> None:
        ready = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(ready,), name="grpc", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError(f"the gRPC server did not start within {timeout} s")
        if self._error is not None:
            raise OSError(str(self._error)) from None

    def _run(self, ready: threading.Event) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopped = asyncio.Event()
            self._bind()
            await self._start()
            ready.set()
            await self._stopped.wait()
            await self._shut_down()

        try:
            asyncio.run(serve())
        except BaseException as exc:  # noqa: BLE001 - reported by start()
            self._error = exc
        finally:
            ready.set()

    def stop(self):
        """Stop serving (calls in flight get :data:`GRACE` seconds); a Deferred fired once stopped."""
        from twisted.internet import defer, threads

        if self._loop is None or self._loop.is_closed() or self._stopped is None:
            return defer.succeed(None)
        self._loop.call_soon_threadsafe(self._stopped.set)
        return threads.deferToThread(self._thread.join, GRACE + 5)
