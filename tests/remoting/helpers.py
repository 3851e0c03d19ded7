"""Test helpers shared by the transport, name-server and SDK tests."""

from __future__ import annotations

import socket
import time

from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.frame import FrameDecoder, encode


class RawClient:
    """A plain blocking socket speaking frames, for tests that must control bytes exactly."""

    def __init__(self, addr: tuple[str, int], timeout: float = 5.0, rcvbuf: int | None = None):
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if rcvbuf is not None:  # before connect, or the kernel's autotuned window already applies
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        self.sock.settimeout(timeout)
        self.sock.connect(addr)
        self.decoder = FrameDecoder()
        self.ready: list[RemotingCommand] = []

    def send(self, cmd: RemotingCommand) -> None:
        self.sock.sendall(encode(cmd))

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv(self, timeout: float = 5.0) -> RemotingCommand:
        deadline = time.monotonic() + timeout
        while not self.ready:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("server closed the connection")
            self.ready.extend(self.decoder.feed(data))
        return self.ready.pop(0)

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the server has closed (EOF or reset) within ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not data:
                return True
        return False

    def close(self) -> None:
        self.sock.close()
