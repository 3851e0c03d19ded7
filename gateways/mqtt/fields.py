"""The data representations of MQTT (spec 1.5): integers, Variable Byte Integers, strings and binary data.

Decoding goes through :class:`Reader`, a cursor over one packet's body that turns every shortfall and
every invalid string into :class:`~.errors.PacketError` (*Malformed Packet*), so packet decoders read
fields one after another without checking lengths themselves.
"""

from __future__ import annotations

import struct

from .errors import malformed

_U16 = struct.Struct(">H")
_U32 = struct.Struct(">I")

#: The largest Variable Byte Integer (four bytes of seven bits): also the largest remaining length.
MAX_VARINT = 268_435_455
#: Strings and binary data carry a two-byte length.
MAX_FIELD_LENGTH = 65_535


def encode_varint(value: int) -> bytes:
    if not 0 <= value <= MAX_VARINT:
        raise ValueError(f"{value} does not fit a Variable Byte Integer")
    out = bytearray()
    while True:
        value, digit = divmod(value, 128)
        if value:
            out.append(digit | 0x80)
        else:
            out.append(digit)
            return bytes(out)


def encode_u16(value: int) -> bytes:
    return _U16.pack(value)


def encode_u32(value: int) -> bytes:
    return _U32.pack(value)


def encode_binary(data: bytes) -> bytes:
    if len(data) > MAX_FIELD_LENGTH:
        raise ValueError(f"binary data of {len(data)} bytes exceeds {MAX_FIELD_LENGTH}")
    return _U16.pack(len(data)) + data


def encode_utf8(text: str) -> bytes:
    """A UTF-8 Encoded String; U+0000 is refused here as receivers must refuse it (MQTT-1.5.4-2)."""
    if "\x00" in text:
        raise ValueError("UTF-8 strings must not contain U+0000")
    return encode_binary(text.encode("utf-8"))


def decode_varint(data, pos: int) -> tuple[int, int] | None:
    """``(value, next_pos)``, or ``None`` when ``data`` ends before the integer does.

    A fifth byte is *Malformed Packet* (MQTT-1.5.5-1), so a stream of garbage fails fast.
    """
    value = 0
    for shift in (0, 7, 14, 21):
        if pos >= len(data):
            return None
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
    raise malformed("Variable Byte Integer longer than four bytes")


def decode_text(raw: bytes) -> str:
    """Strict UTF-8 without U+0000: surrogates, overlong forms and U+0000 are *Malformed Packet* (1.5.4)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise malformed(f"invalid UTF-8 string: {exc.reason}") from None
    if "\x00" in text:
        raise malformed("UTF-8 string contains U+0000")
    return text


class Reader:
    """A cursor over one packet's body (``data[pos:end]``); every read past ``end`` is *Malformed Packet*."""

    __slots__ = ("data", "end", "pos")

    def __init__(self, data, pos: int = 0, end: int | None = None):
        self.data = data
        self.pos = pos
        self.end = len(data) if end is None else end

    @property
    def remaining(self) -> int:
        return self.end - self.pos

    def _take(self, n: int) -> int:
        start = self.pos
        if start + n > self.end:
            raise malformed("packet ends inside a field")
        self.pos = start + n
        return start

    def byte(self) -> int:
        return self.data[self._take(1)]

    def u16(self) -> int:
        return _U16.unpack_from(self.data, self._take(2))[0]

    def u32(self) -> int:
        return _U32.unpack_from(self.data, self._take(4))[0]

    def varint(self) -> int:
        decoded = decode_varint(self.data, self.pos)
        if decoded is None or decoded[1] > self.end:
            raise malformed("packet ends inside a Variable Byte Integer")
        value, self.pos = decoded
        return value

    def bytes(self, n: int) -> bytes:
        start = self._take(n)
        return bytes(self.data[start:start + n])

    def binary(self) -> bytes:
        return self.bytes(self.u16())

    def utf8(self) -> str:
        return decode_text(self.binary())

    def rest(self) -> bytes:
        return self.bytes(self.remaining)

    def expect_end(self, what: str) -> None:
        if self.pos != self.end:
            raise malformed(f"{self.remaining} unexpected bytes after the {what}")


__all__ = [
    "MAX_VARINT", "MAX_FIELD_LENGTH", "encode_varint", "encode_u16", "encode_u32", "encode_binary",
    "encode_utf8", "decode_varint", "decode_text", "Reader",
]
