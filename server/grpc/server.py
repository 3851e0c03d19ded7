"""Serving the v2 service: grpcio's asyncio server on a loop of its own, in a thread of the broker process.

One thread and one loop serve every call and every Telemetry stream; what a call asks of the broker
hops to the reactor thread and back (:func:`.reactor.in_reactor`). grpcio's thread-pool server spends
the same CPU per unary call (measured with QueryRoute, 8 concurrent callers), but it holds a pool thread
for as long as each client's Telemetry stream stays open (the client's whole life), and another for
every send waiting on the broker: its pool would bound the number of clients. On asyncio a stream or a
waiting send costs a coroutine.

The port is grpcio's own, plain (``tls.server.mode=disabled``) or TLS (``enforcing``); in ``permissive`` mode
grpcio listens on two loopback ports, plain and TLS, and the port is the :mod:`.splitter`'s, on the same loop.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from typing import Any

import grpc

from .protocol import service_grpc
from .service import MessagingService
from .splitter import LOOPBACK, Splitter
from .tls import PortTls

log = logging.getLogger("ferrymq.grpc")

#: the largest request accepted (the proxy's grpcMaxInboundMessageSize): above maxMessageSize, so a
#: too-large body is answered MESSAGE_BODY_TOO_LARGE rather than cut off by the transport
MAX_INBOUND_MESSAGE_SIZE = 130 * 1024 * 1024
#: seconds calls in flight get to finish when the server stops
GRACE = 2.0


def _target(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


class GrpcThread:
    """The service listening on ``host:port``. :meth:`start` binds before the reactor runs (a taken port
    stops the server from starting, as a taken listenPort does)."""

    def __init__(self, service: MessagingService, host: str, port: int, interceptors: Sequence[Any] = (),
                 tls: PortTls | None = None):
        """``interceptors``: grpcio server interceptors run before the service (the access checks);
        ``tls``: serve TLS (:func:`.tls.port_tls`), and plain too when it says so; None: plain only."""
        self.service = service
        self.interceptors = tuple(interceptors)
        self.tls = tls
        self.host = host
        self.port = port
        self.splitter: Splitter | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: grpc.aio.Server | None = None
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
            raise OSError(f"grpcListenPort {self.port} on {self.host} cannot be listened on (in use by another "
                          f"process?): set grpcListenPort in the config file, or 0 to turn gRPC off") from None
        clients = "plain" if self.tls is None else "TLS and plain" if self.tls.plain_too else "TLS"
        log.info("gRPC MessagingService served on %s:%d to %s clients (docs/grpc.md)", self.host, self.port, clients)

    def _run(self, ready: threading.Event) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self._stopped = asyncio.Event()
            server = grpc.aio.server(options=[("grpc.max_receive_message_length", MAX_INBOUND_MESSAGE_SIZE),
                                              ("grpc.so_reuseport", 0)], interceptors=self.interceptors)
            service_grpc.add_MessagingServiceServicer_to_server(self.service, server)
            tls = self.tls
            split = tls is not None and tls.plain_too
            try:
                if split:
                    plain = server.add_insecure_port(f"{LOOPBACK}:0")
                    secure = server.add_secure_port(f"{LOOPBACK}:0", tls.credentials)
                    bound = min(plain, secure)
                else:
                    target = _target(self.host, self.port)
                    bound = (server.add_secure_port(target, tls.credentials) if tls is not None
                             else server.add_insecure_port(target))
            except RuntimeError as exc:  # grpcio raises when it cannot bind
                self._error = exc
                return
            if bound == 0:
                self._error = OSError("not bound")
                return
            await server.start()
            if split:
                splitter = Splitter(plain, secure)
                try:
                    bound = await splitter.listen(self.host, self.port)
                except OSError as exc:
                    self._error = exc
                    await server.stop(None)
                    return
                self.splitter = splitter
            self.port = bound
            self._server = server
            ready.set()
            await self._stopped.wait()
            if self.splitter is not None:
                self.splitter.stop_accepting()
            await server.stop(GRACE)
            if self.splitter is not None:
                await self.splitter.close()

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
