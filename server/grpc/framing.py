# cython: annotation_typing=False
# (an IntEnum is passed where an int is annotated: Cython would refuse it as not an int)
"""gRPC over HTTP/2, the parts above HTTP/2 itself: the 5-byte message prefix, ``grpc-timeout``, the
percent-encoded ``grpc-message``, and a message's decompression (gRPC's "PROTOCOL-HTTP2" document).

Sans-I/O and stateless: :mod:`.connection` keeps the state of each call.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import dataclass

#: a message's prefix: the compressed flag (one byte) and the message's length (four, big-endian)
PREFIX = struct.Struct(">BI")
PREFIX_LENGTH = PREFIX.size

#: the grpc-timeout units, in seconds
_TIMEOUT_UNITS = {b"H": 3600.0, b"M": 60.0, b"S": 1.0, b"m": 1e-3, b"u": 1e-6, b"n": 1e-9}

#: grpc-encoding values meaning "not compressed"
IDENTITY = (b"identity", b"")

#: the bytes a grpc-message carries as themselves (printable ASCII but the percent sign)
_PLAIN = frozenset(range(0x20, 0x7F)) - {ord("%")}


class BadMessage(Exception):
    """A message that cannot be read: ``code`` (a gRPC status code) and ``details`` answer the call."""

    def __init__(self, code: int, details: str):
        super().__init__(details)
        self.code = code
        self.details = details


# gRPC status codes the transport itself answers with
OK, CANCELLED, UNKNOWN, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, UNIMPLEMENTED, INTERNAL = 0, 1, 2, 4, 8, 12, 13


def frame(message: bytes) -> bytes:
    """``message`` with its prefix (never compressed: FerryMQ answers uncompressed)."""
    return PREFIX.pack(0, len(message)) + message


def parse_timeout(value: bytes) -> float | None:
    """Seconds of a ``grpc-timeout`` value (``100m``: 0.1); None when it does not parse, which leaves the call
    without a deadline, as grpcio's server leaves it."""
    unit = _TIMEOUT_UNITS.get(value[-1:])
    digits = value[:-1]
    if unit is None or not digits.isdigit() or len(digits) > 8:
        return None
    return int(digits) * unit


def encode_message(details: str) -> bytes:
    """A ``grpc-message`` value: ``details`` in UTF-8, percent-encoded where not printable ASCII."""
    raw = details.encode("utf-8", "replace")
    if all(byte in _PLAIN for byte in raw):
        return raw
    return b"".join(bytes((byte,)) if byte in _PLAIN else b"%%%02X" % byte for byte in raw)


def decompress(encoding: bytes, payload: bytes, limit: int) -> bytes:
    """A message sent with the compressed flag under ``grpc-encoding`` ``encoding``; gzip is the one algorithm
    served, as grpcio serves it. Raises :class:`BadMessage` for another, for a broken one, and for a message
    that inflates beyond ``limit`` bytes."""
    if encoding in IDENTITY:
        raise BadMessage(INTERNAL, "Compressed message with no grpc-encoding")
    if encoding != b"gzip":
        raise BadMessage(UNIMPLEMENTED, f"Compression algorithm '{encoding.decode('latin-1')}' not supported")
    inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
    try:
        message = inflater.decompress(payload, limit + 1)
    except zlib.error as exc:
        raise BadMessage(INTERNAL, f"Failed to decompress the message: {exc}") from None
    if len(message) > limit:
        raise BadMessage(RESOURCE_EXHAUSTED, f"Received message larger than max (more than {limit} bytes "
                                             f"decompressed vs. {limit})")
    return message


def metadata_value(name: bytes, value: bytes) -> str | bytes:
    """A header's value as the service reads it: a ``-bin`` header's bytes decoded from Base64, else text."""
    if name.endswith(b"-bin"):
        return base64.b64decode(value + b"=" * (-len(value) % 4))
    return value.decode("latin-1")


@dataclass(frozen=True, slots=True)
class Status:
    """How a call ends: a gRPC status code and its message."""

    code: int
    details: str = ""


