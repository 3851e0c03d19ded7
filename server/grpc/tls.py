"""TLS on the gRPC port from the tls.* keys, as Apache's proxy takes them: the server's certificate and key
(test mode: a self-signed pair made at start, the remoting port's), client certificates asked for or
required per ``tls.server.need.client.auth`` and checked against ``tls.server.trustCertPath``.

``tls.server.mode`` decides who may connect: ``enforcing`` TLS clients only, ``permissive`` TLS and plain
clients alike (told apart by their first byte, :mod:`.transport`), ``disabled`` plain clients only. The
port's TLS layer takes the :class:`ServerTls` context with ALPN agreeing on ``h2`` (:class:`AlpnTls`),
whichever loop runs the port.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ferrymq.remoting.tls import ClientAuth, ServerTls, TlsMode
from twisted.internet.interfaces import IOpenSSLServerConnectionCreator
from zope.interface import implementer

#: the ALPN name of HTTP/2 over TLS
H2 = b"h2"


@dataclass(frozen=True)
class PortTls:
    """TLS on the gRPC port: the tls.server.* settings, and whether plain clients are served on the port too."""

    server: ServerTls
    plain_too: bool

    def connections(self) -> AlpnTls:
        """What makes the port's TLS connections (Twisted's TLS layer)."""
        return AlpnTls(self.server)


def port_tls(tls: ServerTls | None) -> PortTls | None:
    """The port's TLS for the server's (:meth:`TlsConfig.server_tls`); None when TLS is disabled. Its files
    are read now: a bad one stops the server from starting."""
    if tls is None or tls.mode is TlsMode.DISABLED:
        return None
    if tls.client_auth is ClientAuth.REQUIRE and not tls.test_mode and not tls.check.trust_path:
        raise ValueError("tls.server.need.client.auth=require on the gRPC port needs tls.server.trustCertPath")
    tls.check_files()
    return PortTls(tls, plain_too=tls.mode is TlsMode.PERMISSIVE)


def _select_h2(_connection: Any, offered: list[bytes]) -> bytes:
    """ALPN: HTTP/2 or nothing (a gRPC client offers ``h2``; one that does not is refused the handshake)."""
    from OpenSSL import SSL

    return H2 if H2 in offered else SSL.NO_OVERLAPPING_PROTOCOLS


@implementer(IOpenSSLServerConnectionCreator)
class AlpnTls:
    """The server's TLS connections (its :class:`ServerTls` context), agreeing on ``h2`` by ALPN."""

    def __init__(self, tls: ServerTls):
        self.tls = tls
        self._ctx: Any = None

    def serverConnectionForTLS(self, _protocol: Any) -> Any:
        from OpenSSL import SSL

        if self._ctx is None:
            ctx = self.tls.context()
            ctx.set_alpn_select_callback(_select_h2)
            self._ctx = ctx
        conn = SSL.Connection(self._ctx, None)
        conn.set_accept_state()
        return conn
