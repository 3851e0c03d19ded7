"""What the gRPC port (:mod:`.transport`) reads of a connection's opening: how long it may stay silent, and
the client's address in grpcio's peer form, the form the service and the access checks read."""

from __future__ import annotations

#: seconds a connection may stay silent before its first byte after any PROXY header (the proxy's
#: grpcClientIdleTimeMills)
FIRST_BYTE_TIMEOUT = 120.0


def grpc_peer(host: str, port: int) -> str:
    """A socket address in grpcio's peer form: ``ipv4:10.0.0.1:5000``, ``ipv6:[::1]:5000`` (an IPv4 address
    mapped into IPv6 reads as IPv4, as grpcio writes it)."""
    if host.startswith("::ffff:") and "." in host:
        host = host[len("::ffff:"):]
    return f"ipv6:[{host}]:{port}" if ":" in host else f"ipv4:{host}:{port}"
