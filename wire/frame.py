"""Framing: ``int32 length | int32 (serializeType << 24 | headerLength) | header | body``.

Sans-I/O: :class:`FrameDecoder` is fed whatever bytes a socket produced and hands back whole commands;
:func:`encode` turns a command into the bytes to write.
"""

from __future__ import annotations

import struct

from .codes import SerializeType
from .command import PartsCommand, RemotingCommand
from .errors import FrameError, FrameTooLarge, HeaderError
from .serialization import DECODERS, ENCODERS

#: Apache's default ``com.rocketmq.remoting.frameMaxLength``: the largest value of the length field.
DEFAULT_MAX_FRAME_SIZE = 16 * 1024 * 1024

FRAME_PREFIX = struct.Struct(">ii")
_I32 = struct.Struct(">i")


def encode(cmd: RemotingCommand) -> bytes:
    """The complete frame for ``cmd``, header written in ``cmd.serialize_type``."""
    header = ENCODERS[cmd.serialize_type](cmd)
    hlen = len(header)
    word = (int(cmd.serialize_type) << 24) | hlen
    if type(cmd) is PartsCommand:  # body parts go into the frame directly: one copy, not two
        parts = cmd.body_parts
        size = 0
        for part in parts:
            size += len(part)
        return b"".join((FRAME_PREFIX.pack(4 + hlen + size, word), header, *parts))
    body = cmd.body or b""
    return b"".join((FRAME_PREFIX.pack(4 + hlen + len(body), word), header, body))


def decode_frame_payload(payload: bytes | memoryview) -> RemotingCommand:
    """Decode the bytes after the length field of one frame (header-length word, header, body)."""
    if len(payload) < 4:
        raise FrameError(f"frame of {len(payload)} bytes has no header-length word")
    (word,) = _I32.unpack_from(payload, 0)
    stype = (word >> 24) & 0xFF
    hlen = word & 0xFFFFFF
    if hlen > len(payload) - 4:
        raise HeaderError(f"header length {hlen} exceeds the frame's {len(payload) - 4} remaining bytes")
    try:
        decoder = DECODERS[SerializeType(stype)]
    except ValueError:
        raise HeaderError(f"unknown header serialization type {stype} (0 = JSON, 1 = ROCKETMQ)") from None
    cmd = decoder(payload[4 : 4 + hlen])
    cmd.body = bytes(payload[4 + hlen :])
    return cmd


class FrameDecoder:
    """Incremental decoder: ``feed(data)`` returns the commands completed by ``data``.

    Any frame split across reads is buffered. A FrameError leaves the decoder unusable: the caller
    closes the connection, since nothing after a bad frame can be trusted.
    """

    __slots__ = ("_buffer", "max_frame_size", "_failed")

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE):
        self._buffer = bytearray()
        self.max_frame_size = max_frame_size
        self._failed = False

    @property
    def buffered(self) -> int:
        return len(self._buffer)

    def feed(self, data: bytes) -> list[RemotingCommand]:
        if self._failed:
            raise FrameError("decoder already failed; the connection must be closed")
        buf = self._buffer
        buf += data
        commands: list[RemotingCommand] = []
        pos = 0
        size = len(buf)
        try:
            while size - pos >= 4:
                (length,) = _I32.unpack_from(buf, pos)
                if length > self.max_frame_size:
                    raise FrameTooLarge(length, self.max_frame_size)
                if length < 4:
                    raise FrameError(f"frame length {length} is smaller than the 4-byte header-length word")
                end = pos + 4 + length
                if end > size:
                    break
                commands.append(decode_frame_payload(memoryview(buf)[pos + 4 : end]))
                pos = end
        except FrameError:
            self._failed = True
            raise
        if pos:
            del buf[:pos]
        return commands
