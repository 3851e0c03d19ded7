"""Errors the SDK raises for answers that are not what the call needed."""

from __future__ import annotations

from wire.codes import ResponseCode


class MQResponseError(Exception):
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
