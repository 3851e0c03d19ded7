"""TLS on the gRPC port from the tls.* keys, as Apache's proxy takes them: the server's certificate and key
(test mode: the self-signed pair of the remoting port), client certificates asked for or required per
``tls.server.need_client_auth`` and checked against ``tls.server.trustCertPath``.

grpcio serves a port either with TLS or without, so only ``tls.server.mode=enforcing`` makes gRPC TLS;
``permissive``, where Apache's proxy tells TLS from plain on one port, serves plain gRPC (docs/grpc.md).
"""

from __future__ import annotations

import grpc
from ferrymq.remoting.tls import ClientAuth, ServerTls, _load_key, self_signed


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
        raise ValueError("tls.server.need_client_auth=require on the gRPC port needs tls.server.trustCertPath")
    return grpc.ssl_server_credentials([(key_pem, chain)], root_certificates=roots, require_client_auth=required)
