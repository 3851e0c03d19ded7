"""Typed failures of a remote call, so callers can tell a slow peer from a dead one."""

from __future__ import annotations

from ferrymq.wire.codes import ResponseCode


class RemotingError(Exception):
    """Base class for transport-level failures of a request (not protocol-level error responses)."""


class RemotingTimeoutError(RemotingError):
    """No response arrived within the timeout; the connection itself may still be fine."""

    def __init__(self, addr: str, code: int, opaque: int, timeout: float):
        super().__init__(
            f"request code {code} (opaque {opaque}) to {addr} got no response within {timeout:.3f} s"
        )
        self.addr = addr
        self.code = code
        self.opaque = opaque
        self.timeout = timeout


class RemotingConnectError(RemotingError):
    """The connection to ``addr`` could not be opened; the next call tries again."""

    def __init__(self, addr: str, reason: str):
        super().__init__(f"cannot connect to {addr}: {reason}")
        self.addr = addr
        self.reason = reason


class RemotingClosedError(RemotingError):
    """The connection closed before the response arrived (or before the request could be written)."""

    def __init__(self, addr: str, detail: str = ""):
        super().__init__(f"connection to {addr} closed" + (f": {detail}" if detail else ""))
        self.addr = addr


class ResponseCodeError(Exception):
    """The server answered with a code the call cannot use; ``code`` and ``remark`` are the server's."""

    def __init__(self, operation: str, addr: str, code: int, remark: str | None):
        try:
            name = ResponseCode(code).name
        except ValueError:
            name = "UNKNOWN"
        super().__init__(f"{operation} at {addr} answered {code} ({name}): {remark or ''}".rstrip(": "))
        self.operation = operation
        self.addr = addr
        self.code = code
        self.remark = remark
