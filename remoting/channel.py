"""Channel: what a processor sees of a connection (address, requests to the peer, close hooks).

The broker keeps Channels of its clients to push NOTIFY_CONSUMER_IDS_CHANGED or CHECK_TRANSACTION_STATE,
and the name server keeps a broker's Channel to unregister it when the connection drops; neither needs
to know about Twisted transports.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from twisted.internet import defer

from ferrymq.wire.codes import Flag
from ferrymq.wire.command import RemotingCommand

if TYPE_CHECKING:
    from .protocol import RemotingProtocol

log = logging.getLogger("ferrymq.remoting")

#: Apache's default RPC timeout (``mqClientApiTimeout``) for server-initiated requests.
DEFAULT_REQUEST_TIMEOUT = 3.0


def format_address(address: Any) -> str:
    """``host:port`` (IPv6 hosts bracketed) from a Twisted address; ``str(address)`` otherwise."""
    host = getattr(address, "host", None)
    port = getattr(address, "port", None)
    if host is None or port is None:
        return str(address)
    if ":" in host:
        return f"[{host}]:{port}"
    return f"{host}:{port}"


class Channel:
    """One open connection, either side. Equality is identity: a Channel is one connection's lifetime."""

    __slots__ = ("_protocol", "remote_address", "local_address", "attrs", "_close_callbacks", "_closed")

    def __init__(self, protocol: "RemotingProtocol", remote_address: str, local_address: str):
        self._protocol = protocol
        self.remote_address = remote_address
        self.local_address = local_address
        #: Per-connection state a processor wants to keep (client id, language, version...).
        self.attrs: dict[str, Any] = {}
        self._close_callbacks: list[Callable[["Channel"], Any]] = []
        self._closed = False

    def __repr__(self) -> str:
        return f"<Channel {self.remote_address} {'closed' if self._closed else 'open'}>"

    @property
    def is_active(self) -> bool:
        return not self._closed

    def invoke(self, cmd: RemotingCommand, timeout: float = DEFAULT_REQUEST_TIMEOUT) -> defer.Deferred:
        """Send a request to the peer; fires with its response, or fails with RemotingTimeoutError /
        RemotingClosedError."""
        return self._protocol.request(cmd, timeout)

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        """Send a request that the peer must not answer (the ONEWAY flag is set here)."""
        cmd.flag |= Flag.ONEWAY
        self._protocol.send(cmd)

    def write(self, cmd: RemotingCommand) -> None:
        """Write any command as is (e.g. a response produced outside the processor's return value)."""
        self._protocol.send(cmd)

    def close(self) -> None:
        self._protocol.close()

    def on_close(self, callback: Callable[["Channel"], Any]) -> None:
        """Call ``callback(channel)`` once the connection is gone (at once if it already is)."""
        if self._closed:
            callback(self)
        else:
            self._close_callbacks.append(callback)

    def _mark_closed(self) -> None:
        if self._closed:
            return
        self._closed = True
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            try:
                callback(self)
            except Exception:  # noqa: BLE001 - one bad hook must not stop the others
                log.exception("close callback %r of %s failed", callback, self.remote_address)
