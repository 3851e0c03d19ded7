"""Serving the gateway: uvicorn on an asyncio loop, uvloop's.

The loop is uvloop's and uvicorn parses HTTP with httptools when they are installed (both are
dependencies): httptools takes about a third off the broker process's CPU per HTTP publish and uvloop a
quarter of what is left (docs/benchmarks.md, "HTTP gateway").

Inside a FerryMQ server the gateway reaches the broker through the RocketMQ client it is, whose sends to
this broker are stored by its send processor in process (:meth:`.Gateway.store_in_process`; the others run
through its request table, :meth:`.Gateway.send_in_process`), and is served one of two ways
(``httpEventLoop``):

- :class:`GatewayOnReactor` (``BROKER``): on the broker's own loop, the reactor being Twisted's asyncio
  reactor on uvloop (:mod:`ferrymq.server.event_loop`). An HTTP publish runs start to end in one thread,
  with no hand-over to the reactor and back and no contention for the interpreter lock.
- :class:`GatewayThread` (``OWN_THREAD``): on a loop of its own in a thread, beside the broker's epoll
  reactor; every SDK call hops to the reactor thread and its answer hops back.

Alone (``ferrymq gateway http``, :func:`serve_forever`) the loop runs in the main thread and the client's
reactor in a thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
from typing import Any

import uvicorn

from .app import create_app
from .gateway import Gateway

log = logging.getLogger("ferrymq.gateway.http")


class _Server(uvicorn.Server):
    """uvicorn without its signal handlers: the process's owner (reactor or CLI) decides when to stop."""

    @contextlib.contextmanager
    def capture_signals(self):
        yield


def _new_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop where it is installed (the gateway's socket work in C), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


def _run(main) -> None:
    with asyncio.Runner(loop_factory=_new_loop) as runner:
        runner.run(main)


def _config(gateway: Gateway, host: str, port: int, manage_gateway: bool,
            ssl: dict[str, Any] | None = None) -> uvicorn.Config:
    """``ssl``: uvicorn's ``ssl_*`` settings, to serve HTTPS (``httpTlsEnable``)."""
    # no proxy-headers middleware (nothing reads the client's address or scheme) and no Server header:
    # both would cost every request, publishes included
    return uvicorn.Config(create_app(gateway, manage_gateway=manage_gateway), host=host, port=port,
                          log_config=None, access_log=False, lifespan="on", timeout_keep_alive=75,
                          timeout_graceful_shutdown=5, proxy_headers=False, server_header=False, **(ssl or {}))


class GatewayThread:
    """The gateway served from a thread of a FerryMQ server.

    :meth:`start` binds the port before the reactor runs (so a taken port stops the server from
    starting, as a taken listenPort does); the gateway's client starts once the reactor runs
    (:meth:`start_client`): until then requests are answered 503.
    """

    def __init__(self, gateway: Gateway, host: str, port: int, ssl: dict[str, Any] | None = None):
        self.gateway = gateway
        self.host = host
        self.port = port
        self._server = _Server(_config(gateway, host, port, manage_gateway=False, ssl=ssl))
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None

    def start(self, timeout: float = 30.0) -> None:
        ready = threading.Event()

        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            task = self._loop.create_task(self._server.serve())
            while not self._server.started and not task.done():
                await asyncio.sleep(0.01)
            if self._server.started:
                self.port = self._server.servers[0].sockets[0].getsockname()[1]
            ready.set()
            await task

        def run() -> None:
            try:
                _run(serve())
            except BaseException as exc:  # noqa: BLE001 - uvicorn exits (SystemExit) when it cannot bind
                self._error = exc
            finally:
                ready.set()

        self._thread = threading.Thread(target=run, name="http-gateway", daemon=True)
        self._thread.start()
        if not ready.wait(timeout):
            raise RuntimeError(f"the HTTP gateway did not start within {timeout} s")
        if not self._server.started:
            raise OSError(f"httpListenPort {self.port} on {self.host} cannot be listened on (in use by another "
                          f"process?): set httpListenPort in the config file, or 0 to turn the HTTP gateway off")

    def start_client(self) -> None:
        """Start the gateway's RocketMQ client; call from the running reactor (it does not block it)."""
        future = asyncio.run_coroutine_threadsafe(self.gateway.start(), self._loop)
        future.add_done_callback(self._started)

    def _started(self, future) -> None:
        if future.exception() is not None:
            log.error("the HTTP gateway's RocketMQ client did not start: %s", future.exception())
        else:
            log.info("HTTP gateway listening on %s:%d, on a loop of its own (docs/http.md)", self.host, self.port)

    def stop(self):
        """Stop the client (while the reactor still runs), then the server; a Deferred of both."""
        from twisted.internet import defer, threads

        if self._loop is None or self._loop.is_closed():
            return defer.succeed(None)

        def shut_down() -> None:
            try:
                asyncio.run_coroutine_threadsafe(self.gateway.stop(), self._loop).result(15)
            except Exception as exc:  # noqa: BLE001 - the server stops regardless
                log.warning("the HTTP gateway's client did not stop cleanly: %s", exc)
            self._server.should_exit = True
            self._thread.join(15)

        return threads.deferToThread(shut_down)


def _listen(host: str, port: int, backlog: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        sock = socket.create_server((host, port), family=family, backlog=backlog)
    except OSError as exc:
        raise OSError(f"httpListenPort {port} on {host} cannot be listened on ({exc.strerror}): set "
                      f"httpListenPort in the config file, or 0 to turn the HTTP gateway off") from None
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


class GatewayOnReactor:
    """The gateway served on the reactor's own loop (the reactor being
    :func:`ferrymq.server.event_loop.install_reactor`'s).

    :meth:`start` binds the port before the reactor runs (a taken port stops the server from starting,
    as a taken listenPort does); uvicorn serves from the reactor's first turn and the gateway's client
    starts there too (:meth:`start_client`): until then requests are answered 503.
    """

    def __init__(self, gateway: Gateway, host: str, port: int, ssl: dict[str, Any] | None = None):
        self.gateway = gateway
        self.host = host
        self.port = port
        self._server = _Server(_config(gateway, host, port, manage_gateway=False, ssl=ssl))
        self._socket: socket.socket | None = None
        self._task: asyncio.Task | None = None
        #: the reactor's loop (install_reactor made it this thread's), running once the reactor runs
        self._loop = asyncio.get_event_loop()

    def start(self) -> None:
        from twisted.internet import reactor

        self._socket = _listen(self.host, self.port, self._server.config.backlog)
        self.port = self._socket.getsockname()[1]
        reactor.callWhenRunning(self._serve)

    def _serve(self) -> None:
        self._task = self._loop.create_task(self._server.serve(sockets=[self._socket]))

    def start_client(self) -> None:
        """Start the gateway's RocketMQ client; call from the running reactor (it does not block it)."""
        self._loop.create_task(self.gateway.start()).add_done_callback(self._started)

    def _started(self, task: asyncio.Task) -> None:
        if task.exception() is not None:
            log.error("the HTTP gateway's RocketMQ client did not start: %s", task.exception())
        else:
            log.info("HTTP gateway listening on %s:%d, on the broker's event loop (docs/http.md)",
                     self.host, self.port)

    def stop(self):
        """Stop the client (while the reactor still runs), then the server; a Deferred of both."""
        from twisted.internet import defer

        return defer.Deferred.fromFuture(self._loop.create_task(self._stop()))

    async def _stop(self) -> None:
        try:
            await asyncio.wait_for(self.gateway.stop(), 15)
        except Exception as exc:  # noqa: BLE001 - the server stops regardless
            log.warning("the HTTP gateway's client did not stop cleanly: %s", exc)
        self._server.should_exit = True
        if self._task is not None:
            await asyncio.wait({self._task}, timeout=15)


def serve_forever(gateway: Gateway, host: str, port: int, ssl: dict[str, Any] | None = None) -> None:
    """Serve in this thread until SIGINT/SIGTERM, then stop gracefully and return (exit status 0, as the
    server commands have; uvicorn's own handlers would re-raise the signal once stopped)."""
    server = _Server(_config(gateway, host, port, manage_gateway=True, ssl=ssl))

    def stop() -> None:
        server.should_exit = True

    async def serve() -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, stop)
        task = loop.create_task(server.serve())
        while not server.started and not task.done():
            await asyncio.sleep(0.01)
        if server.started:
            bound = server.servers[0].sockets[0].getsockname()[1]
            log.info("HTTP gateway listening on %s:%d (docs/http.md)", host, bound)
        await task

    try:
        _run(serve())
    except SystemExit:  # uvicorn exits when it cannot bind
        pass
    if not server.started:
        raise OSError(f"httpListenPort {port} on {host} cannot be listened on (in use by another process?), or "
                      f"the gateway's client did not start; the lines above say which")
