"""Issue 26 compat: what a broker does with bytes that are no frame, on Apache 5.5.0 and FerryMQ alike.

Apache's NettyDecoder (a LengthFieldBasedFrameDecoder capped at ``com.rocketmq.remoting.frameMaxLength``,
16 MiB) closes the connection, answering nothing, on a length field above the cap or below zero, and on
a frame whose header it cannot decode; the broker's other connections are untouched. FerryMQ's
``frameMaxLength`` defaults to the same 16 MiB.

Every sample is 12 bytes or more: Apache 5's first handler waits for 12 bytes to tell a PROXY protocol
header from a frame, so a shorter write sits unanswered until the idle timeout closes it.
"""

from __future__ import annotations

import socket
import struct
import time

import pytest

from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request

from .socket_client import Connection, split_addr

FRAME_MAX_LENGTH = 16 * 1024 * 1024

GARBAGE = {
    "oversized": struct.pack(">i", FRAME_MAX_LENGTH + 1) + b"\x00" * 64,
    "negative-length": struct.pack(">i", -8) + b"\x00" * 8,
    "shorter-than-header-word": struct.pack(">i", 2) + b"\x00" * 8,
    "header-length-past-frame": struct.pack(">ii", 8, 64) + b"{}\x00\x00",
    "unreadable-json-header": struct.pack(">ii", 12, 8) + b"not json",
    "http-request": b"GET / HTTP/1.1\r\nHost: broker\r\n\r\n",
}


def answer_then_close(addr: str, data: bytes, timeout: float = 10.0) -> tuple[bytes, bool]:
    """What the server wrote back to ``data`` and whether it closed the connection within ``timeout``."""
    got = b""
    with socket.create_connection(split_addr(addr), timeout=timeout) as sock:
        sock.sendall(data)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                return got, False
            except (ConnectionResetError, BrokenPipeError):
                return got, True
            if not chunk:
                return got, True
            got += chunk
    return got, False


@pytest.mark.parametrize("kind", list(GARBAGE))
def test_a_bad_frame_closes_its_connection_unanswered_and_the_broker_serves_the_others(server, kind):
    with Connection(server.broker_addr) as other:
        assert other.call(request(RequestCode.GET_BROKER_RUNTIME_INFO)).code == ResponseCode.SUCCESS
        answered, closed = answer_then_close(server.broker_addr, GARBAGE[kind])
        assert (answered, closed) == (b"", True)
        assert other.call(request(RequestCode.GET_BROKER_RUNTIME_INFO)).code == ResponseCode.SUCCESS
