"""Connecting side: one connection per ``host:port``, opened on first use and again after it drops.

Requests the server sends on these connections (NOTIFY_CONSUMER_IDS_CHANGED, CHECK_TRANSACTION_STATE,
GET_CONSUMER_RUNNING_INFO...) go to the client's own processor.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from twisted.internet import defer, endpoints
from twisted.internet.protocol import Factory
from twisted.python.failure import Failure

from ferrymq.wire.codes import Flag, RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.signature import Credentials, sign_command

from .channel import Channel
from .dispatch import Processor
from .errors import RemotingClosedError, RemotingConnectError, RemotingTimeoutError, ResponseCodeError
from .options import TransportOptions
from .protocol import RemotingProtocol
from .tls import ClientTls

log = logging.getLogger("ferrymq.remoting")

#: Apache's client connect timeout (``com.rocketmq.remoting.client.connect.timeout``), seconds.
DEFAULT_CONNECT_TIMEOUT = 3.0


def split_address(addr: str) -> tuple[str, int]:
    """``"host:port"`` or ``"[v6]:port"`` to (host, port), with an error that names the bad address."""
    host, sep, port = addr.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"address {addr!r} is not of the form host:port")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, int(port)


class _ClientFactory(Factory):
    noisy = False

    def __init__(self, client: "RemotingClient", addr: str):
        self.client = client
        self.addr = addr

    def buildProtocol(self, _addr: Any) -> RemotingProtocol:
        return RemotingProtocol(self.client.processor, self.client.options, self.client.reactor, owner=self)

    def connection_made(self, proto: RemotingProtocol) -> None:
        pass

    def connection_lost(self, proto: RemotingProtocol) -> None:
        self.client._forget(self.addr, proto)


class RemotingClient:
    """Connection pool keyed by address. All calls return Deferreds; nothing blocks."""

    def __init__(
        self,
        processor: Processor | None = None,
        options: TransportOptions | None = None,
        reactor: Any = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        tls: ClientTls | None = None,
        credentials: Credentials | None = None,
    ):
        """``tls``: connect with TLS (Apache's ``tls.enable`` / a client's ``setUseTLS(true)``), else plain.
        ``credentials``: sign every request sent, as Apache's ``AclClientRPCHook`` does; None sends them as
        built."""
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.processor = processor
        self.options = options or TransportOptions()
        self.reactor = reactor
        self.connect_timeout = connect_timeout
        self.tls = tls
        self.credentials = credentials
        self._connections: dict[str, RemotingProtocol] = {}
        self._connecting: dict[str, list[defer.Deferred]] = {}
        self._closed = False

    # ------------------------------------------------------------------ connections

    def channel(self, addr: str) -> defer.Deferred:
        """Fires with an open Channel to ``addr``, connecting if needed (concurrent callers share one
        attempt)."""
        if self._closed:
            return defer.fail(RemotingClosedError(addr, "the client is closed"))
        proto = self._connections.get(addr)
        if proto is not None and proto.channel is not None and proto.channel.is_active:
            return defer.succeed(proto.channel)
        d = defer.Deferred()
        waiters = self._connecting.get(addr)
        if waiters is not None:
            waiters.append(d)
            return d
        self._connecting[addr] = [d]
        try:
            host, port = split_address(addr)
        except ValueError as exc:
            self._connect_done(addr, failure=RemotingConnectError(addr, str(exc)))
            return d
        if ":" in host:
            endpoint = endpoints.TCP6ClientEndpoint(self.reactor, host, port, timeout=self.connect_timeout)
        else:
            endpoint = endpoints.TCP4ClientEndpoint(self.reactor, host, port, timeout=self.connect_timeout)
        if self.tls is not None:
            endpoint = endpoints.wrapClientTLS(self.tls, endpoint)
        attempt = endpoint.connect(_ClientFactory(self, addr))
        attempt.addCallbacks(
            lambda proto: self._connected(addr, proto),
            lambda f: self._connect_done(addr, failure=RemotingConnectError(addr, f.getErrorMessage())),
        )
        return d

    def _connected(self, addr: str, proto: RemotingProtocol) -> None:
        if self._closed:
            proto.close()
            self._connect_done(addr, failure=RemotingClosedError(addr, "the client was closed while connecting"))
            return
        self._connections[addr] = proto
        self._connect_done(addr, channel=proto.channel)

    def _connect_done(self, addr: str, channel: Channel | None = None, failure: Exception | None = None) -> None:
        for d in self._connecting.pop(addr, []):
            if failure is not None:
                d.errback(failure)
            else:
                d.callback(channel)

    def _forget(self, addr: str, proto: RemotingProtocol) -> None:
        if self._connections.get(addr) is proto:
            del self._connections[addr]

    # ------------------------------------------------------------------ calls

    def invoke(self, addr: str, cmd: RemotingCommand, timeout: float = 3.0) -> defer.Deferred:
        """Send ``cmd`` to ``addr``; fires with the response. ``timeout`` covers connecting too.

        Fails with RemotingConnectError, RemotingTimeoutError or RemotingClosedError.
        """
        started = time.monotonic()
        if self.credentials is not None:
            sign_command(cmd, self.credentials)

        def send(channel: Channel) -> defer.Deferred:
            remaining = timeout - (time.monotonic() - started)
            if remaining <= 0:
                raise RemotingTimeoutError(addr, cmd.code, cmd.opaque, timeout)
            return channel.invoke(cmd, remaining)

        connecting = self.channel(addr)
        if not connecting.called:  # a connect that hangs (e.g. SYN to a dead host) counts against timeout
            connecting.addTimeout(
                timeout,
                self.reactor,
                onTimeoutCancel=lambda _result, _t: Failure(RemotingTimeoutError(addr, cmd.code, cmd.opaque, timeout)),
            )
        return connecting.addCallback(send)

    def call(self, addr: str, cmd: RemotingCommand, timeout: float, accept: tuple[int, ...] = (ResponseCode.SUCCESS,),
             operation: str | None = None) -> defer.Deferred:
        """``invoke``, then fail with ResponseCodeError unless the answer's code is in ``accept``."""

        def check(resp: RemotingCommand) -> RemotingCommand:
            if resp.code not in accept:
                try:
                    name = operation or RequestCode(cmd.code).name
                except ValueError:
                    name = f"request code {cmd.code}"
                raise ResponseCodeError(name, addr, resp.code, resp.remark)
            return resp

        return self.invoke(addr, cmd, timeout).addCallback(check)

    def invoke_oneway(self, addr: str, cmd: RemotingCommand) -> defer.Deferred:
        """Send ``cmd`` with the ONEWAY flag; fires (with None) once written."""
        cmd.flag |= Flag.ONEWAY
        if self.credentials is not None:
            sign_command(cmd, self.credentials)
        return self.channel(addr).addCallback(lambda channel: channel.write(cmd))

    def close(self) -> defer.Deferred:
        """Close every connection; pending calls fail with RemotingClosedError."""
        self._closed = True
        waits = []
        for proto in list(self._connections.values()):
            if proto.channel is not None and proto.channel.is_active:
                d = defer.Deferred()
                proto.channel.on_close(lambda _c, d=d: d.callback(None))
                waits.append(d)
            proto.transport.abortConnection()
        self._connections.clear()
        return defer.DeferredList(waits)
