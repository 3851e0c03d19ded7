"""TLS on remoting connections, as Apache's Netty ends do it.

A server in ``permissive`` or ``enforcing`` mode listens with :class:`TlsDetectingFactory`: a new
connection's first byte tells a TLS handshake record (``0x16``) from a plain frame, whose first byte is
the top byte of a length no valid frame reaches. A handshake gets a TLS layer under the remoting protocol;
a plain connection gets the remoting protocol on the bare TCP transport, so after its first read it runs
exactly as on a server without TLS. ``disabled`` mode does not use this module: a handshake then reads as an
oversized frame and the connection is closed, as Apache's disabled mode closes it.

The OpenSSL contexts follow Apache's TlsHelper: without verification (``authServer`` / ``authClient`` false)
any peer certificate is accepted; test mode serves a self-signed certificate made on first use.
"""

from __future__ import annotations

import datetime
import enum
import logging
from dataclasses import dataclass
from typing import Any

from twisted.internet.interfaces import IOpenSSLClientConnectionCreator, IOpenSSLServerConnectionCreator
from twisted.internet.protocol import Factory, Protocol
from zope.interface import implementer

from .channel import format_address

log = logging.getLogger("ferrymq.remoting")

#: The content type of a TLS handshake record: the first byte a TLS client sends.
HANDSHAKE_RECORD = 0x16


class TlsMode(enum.Enum):
    """``tls.server.mode``: what a server accepts (Apache's TlsMode)."""

    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


@dataclass(frozen=True, slots=True)
class KeyPair:
    """A certificate chain (PEM) and its private key (PEM, PKCS#8 for Apache; encrypted when a password is
    given)."""

    cert_path: str
    key_path: str
    key_password: str = ""


@dataclass(frozen=True, slots=True)
class PeerCheck:
    """How the peer's certificate is checked: ``verify`` against ``trust_path`` (a PEM bundle; empty: the
    system's), else any certificate is accepted."""

    verify: bool = False
    trust_path: str = ""


def _load_key(pair: KeyPair) -> Any:
    from cryptography.hazmat.primitives import serialization

    with open(pair.key_path, "rb") as f:
        data = f.read()
    return serialization.load_pem_private_key(data, pair.key_password.encode() if pair.key_password else None)


def _check_peer(ctx: Any, check: PeerCheck, flags: int) -> None:
    if check.verify:
        if check.trust_path:
            ctx.load_verify_locations(check.trust_path)
        else:
            ctx.set_default_verify_paths()
        ctx.set_verify(flags, lambda _conn, _cert, _errno, _depth, ok: bool(ok))
    else:
        ctx.set_verify(flags, lambda *_: True)


_SELF_SIGNED: tuple[Any, Any] | None = None


def self_signed() -> tuple[Any, Any]:
    """A certificate and key for test mode, made once per process (Apache makes one per server)."""
    global _SELF_SIGNED
    if _SELF_SIGNED is None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID

        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(days=1)).not_valid_after(now + datetime.timedelta(days=365))
                .sign(key, hashes.SHA256()))
        _SELF_SIGNED = (cert, key)
    return _SELF_SIGNED


def _context(own: KeyPair | None, check: PeerCheck, flags: int, test_mode: bool = False) -> Any:
    from OpenSSL import SSL

    ctx = SSL.Context(SSL.TLS_METHOD)
    ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
    if test_mode:
        cert, key = self_signed()
        ctx.use_certificate(cert)
        ctx.use_privatekey(key)
    elif own is not None:
        ctx.use_certificate_chain_file(own.cert_path)
        ctx.use_privatekey(_load_key(own))
        ctx.check_privatekey()
    _check_peer(ctx, check, flags)
    return ctx


class ClientAuth(enum.Enum):
    """``tls.server.need.client.auth``: whether a server asks clients for a certificate."""

    NONE = "none"
    OPTIONAL = "optional"
    REQUIRE = "require"


@implementer(IOpenSSLServerConnectionCreator)
class ServerTls:
    """A server's TLS mode and the OpenSSL context its TLS connections use (built when first needed, so a
    server that only ever sees plain clients loads nothing)."""

    def __init__(self, mode: TlsMode, own: KeyPair | None = None, client_auth: ClientAuth = ClientAuth.NONE,
                 check: PeerCheck = PeerCheck(), test_mode: bool = True):
        if mode is not TlsMode.DISABLED and not test_mode and own is None:
            raise ValueError("TLS without test mode needs the server's certificate and key")
        self.mode = mode
        self.own = own
        self.client_auth = client_auth
        self.check = check
        self.test_mode = test_mode
        self._ctx: Any = None

    def context(self) -> Any:
        if self._ctx is None:
            from OpenSSL import SSL

            flags = SSL.VERIFY_NONE
            if self.client_auth is not ClientAuth.NONE and not self.test_mode:
                flags = SSL.VERIFY_PEER
                if self.client_auth is ClientAuth.REQUIRE:
                    flags |= SSL.VERIFY_FAIL_IF_NO_PEER_CERT
            self._ctx = _context(self.own, self.check, flags, self.test_mode)
        return self._ctx

    def check_files(self) -> None:
        """Build the context now: a bad path, key or password is told at start, not at the first client.
        Test mode reads no file: its context waits for the first TLS client (OpenSSL is not even loaded
        by a server that only ever sees plain clients)."""
        if self.mode is not TlsMode.DISABLED and not self.test_mode:
            self.context()

    def serverConnectionForTLS(self, _protocol: Any) -> Any:
        from OpenSSL import SSL

        conn = SSL.Connection(self.context(), None)
        conn.set_accept_state()
        return conn


@implementer(IOpenSSLClientConnectionCreator)
class ClientTls:
    """What a client's TLS connections present and check (Apache's tls.client.* keys)."""

    def __init__(self, own: KeyPair | None = None, check: PeerCheck = PeerCheck()):
        self.own = own
        self.check = check
        self._ctx: Any = None

    def context(self) -> Any:
        if self._ctx is None:
            from OpenSSL import SSL

            self._ctx = _context(self.own, self.check, SSL.VERIFY_PEER if self.check.verify else SSL.VERIFY_NONE)
        return self._ctx

    def check_files(self) -> None:
        """Build the context now: a bad path, key or password is told at start, not at the first connection."""
        self.context()

    def clientConnectionForTLS(self, _protocol: Any) -> Any:
        from OpenSSL import SSL

        conn = SSL.Connection(self.context(), None)
        conn.set_connect_state()
        return conn


class _FirstBytes(Protocol):
    """A new connection until its first bytes arrive; then it hands the transport on and is gone."""

    def __init__(self, factory: TlsDetectingFactory, addr: Any):
        self.factory = factory
        self.addr = addr
        self._timer: Any = None

    def connectionMade(self) -> None:
        timeout = self.factory.timeout
        if timeout > 0:
            self._timer = self.factory.clock.callLater(timeout, self.transport.abortConnection)

    def connectionLost(self, reason: Any = None) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()

    def dataReceived(self, data: bytes) -> None:
        if self._timer is not None and self._timer.active():
            self._timer.cancel()
        transport = self.transport
        if data[0] == HANDSHAKE_RECORD:
            proto = self.factory.tls_factory.buildProtocol(self.addr)
        elif self.factory.tls.mode is TlsMode.ENFORCING:
            log.warning("%s: closing plain connection from %s: tls.server.mode is enforcing",
                        self.factory.name, format_address(transport.getPeer()))
            transport.loseConnection()
            return
        else:
            proto = self.factory.plain.buildProtocol(self.addr)
        transport.protocol = proto
        proto.makeConnection(transport)
        proto.dataReceived(data)


class TlsDetectingFactory(Factory):
    """Listens for ``plain`` (a factory of remoting protocols), serving TLS and plain connections as
    ``tls.mode`` allows. A connection silent for ``timeout`` seconds before its first byte is aborted."""

    noisy = False

    def __init__(self, plain: Any, tls: ServerTls, clock: Any, timeout: float, name: str = "remoting"):
        self.plain = plain
        self.tls = tls
        self.clock = clock
        self.timeout = timeout
        self.name = name
        self._tls_factory: Any = None

    @property
    def tls_factory(self) -> Any:
        """The TLS layer's factory, made for the first TLS client (its module loads OpenSSL)."""
        if self._tls_factory is None:
            from twisted.protocols.tls import TLSMemoryBIOFactory

            self._tls_factory = TLSMemoryBIOFactory(self.tls, False, self.plain, self.clock)
        return self._tls_factory

    def buildProtocol(self, addr: Any) -> Protocol:
        return _FirstBytes(self, addr)
