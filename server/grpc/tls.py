"""TLS on the gRPC port from the tls.* keys, as Apache's proxy takes them: the server's certificate and key
(test mode: a self-signed pair made at start, the remoting port's), client certificates asked for or
required per ``tls.server.need.client.auth`` and checked against ``tls.server.trustCertPath``.

``tls.server.mode`` decides who may connect: ``enforcing`` TLS clients only (grpcio serves TLS on the port),
``permissive`` TLS and plain clients alike (the :mod:`.splitter` tells them apart), ``disabled`` plain
clients only (grpcio serves plain gRPC on the port).
"""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from ferrymq.remoting.tls import ClientAuth, ServerTls, TlsMode, _load_key, self_signed


@dataclass(frozen=True)
class PortTls:
    """TLS on the gRPC port: grpcio's credentials, and whether plain clients are served on the port too."""

    credentials: grpc.ServerCredentials
    plain_too: bool


def port_tls(tls: ServerTls | None) -> PortTls | None:
    """The port's TLS for the server's (:meth:`TlsConfig.server_tls`); None when TLS is disabled."""
    if tls is None or tls.mode is TlsMode.DISABLED:
        return None
    return PortTls(server_credentials(tls), plain_too=tls.mode is TlsMode.PERMISSIVE)


def server_credentials(tls: ServerTls) -> grpc.ServerCredentials:
    from cryptography.hazmat.primitives import serialization

    if tls.test_mode or tls.own is None:
        cert, key = self_signed()
        chain = cert.public_bytes(serialization.Encoding.PEM)
    else:
        key = _load_key(tls.own)  # grpcio takes no key password: the key is handed over decrypted
        with open(tls.own.cert_path, "rb") as f:
            chain = f.read()
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    roots = None
    if tls.client_auth is not ClientAuth.NONE and tls.check.trust_path:
        with open(tls.check.trust_path, "rb") as f:
            roots = f.read()
    required = tls.client_auth is ClientAuth.REQUIRE
    if required and roots is None:
        raise ValueError("tls.server.need.client.auth=require on the gRPC port needs tls.server.trustCertPath")
    return grpc.ssl_server_credentials([(key_pem, chain)], root_certificates=roots, require_client_auth=required)
