"""The PROXY protocol header (HAProxy's v1 text line or v2 binary block) a load balancer sends ahead of the
client's first byte, read as Apache's proxy reads it on its gRPC port: always looked for, and naming the
client the service and the access checks see.

A connection whose first bytes are neither a header nor the start of one has no header. A header with a
source address and port names the client; one without (v2 ``LOCAL``, ``UNKNOWN``, a UNIX socket, port 0)
leaves the connection's own address, as the proxy does. The parsing is the ``proxy-protocol`` library's;
:func:`read` only frames the header in the bytes read so far.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from proxyprotocol import ProxyProtocolIncompleteError
from proxyprotocol.result import is_ipv4, is_ipv6
from proxyprotocol.v1 import ProxyProtocolV1
from proxyprotocol.v2 import ProxyProtocolV2

V1_PREFIX = b"PROXY "
V2_SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
#: the longest v1 line the specification allows, CRLF included
V1_MAX_LENGTH = 107
#: a v2 header's fixed part: the signature, version and command, family and protocol, the length that follows
V2_FIXED_LENGTH = 16

_V1, _V2 = ProxyProtocolV1(), ProxyProtocolV2()


class BadHeader(ValueError):
    """A PROXY protocol header that does not parse: the connection is refused."""


@dataclass(frozen=True, slots=True)
class Header:
    """A connection's PROXY protocol header: the bytes it takes at the stream's start (0: there is none), and
    the client's ``(host, port)`` it names (None: the connection's own)."""

    length: int
    source: tuple[str, int] | None = None


NO_HEADER = Header(0)


def read(data: bytes) -> Header | None:
    """The header at the start of ``data`` (the first bytes of a connection), :data:`NO_HEADER` when there is
    none, or None while too few bytes have come to tell. Raises :class:`BadHeader` for a broken one."""
    if data.startswith(V2_SIGNATURE):
        if len(data) < V2_FIXED_LENGTH:
            return None
        length = V2_FIXED_LENGTH + int.from_bytes(data[14:16], "big")
        return _parsed(_V2, data[:length]) if len(data) >= length else None
    if data.startswith(V1_PREFIX):
        end = data.find(b"\r\n", 0, V1_MAX_LENGTH)
        if end >= 0:
            return _parsed(_V1, data[:end + 2])
        if len(data) >= V1_MAX_LENGTH:
            raise BadHeader(f"a PROXY protocol v1 header longer than {V1_MAX_LENGTH} bytes")
        return None
    if V2_SIGNATURE.startswith(data) or V1_PREFIX.startswith(data):
        return None
    return NO_HEADER


def _parsed(version: ProxyProtocolV1 | ProxyProtocolV2, raw: bytes) -> Header:
    try:
        result = version.unpack(raw)
    except (ValueError, struct.error, IndexError, ProxyProtocolIncompleteError) as exc:
        kind = "v1" if version is _V1 else "v2"
        reason = exc or type(exc).__name__
        raise BadHeader(f"a bad PROXY protocol {kind} header {raw[:V1_MAX_LENGTH]!r}: {reason}") from None
    if (is_ipv4(result) or is_ipv6(result)) and result.source[1] > 0:
        return Header(len(raw), (str(result.source[0]), result.source[1]))
    return Header(len(raw))
