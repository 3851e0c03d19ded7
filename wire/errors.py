"""Typed errors raised by the codecs; the transport maps them to a closed connection or a response code."""

from __future__ import annotations


class WireError(Exception):
    """Base class: the bytes or fields received do not follow the protocol."""


class FrameError(WireError):
    """The byte stream cannot be framed; the connection must be closed (nothing after it is trustworthy)."""


class FrameTooLarge(FrameError):
    def __init__(self, length: int, limit: int):
        super().__init__(
            f"frame of {length} bytes exceeds the limit of {limit} bytes "
            f"(frameMaxLength; raise it if the peer is legitimate)"
        )
        self.length = length
        self.limit = limit


class HeaderError(FrameError):
    """A frame's header (JSON or ROCKETMQ) is unreadable."""


class FieldError(WireError):
    """A typed header or body lacks a required field or has one of the wrong type.

    Answered with a response code (usually SYSTEM_ERROR or INVALID_PARAMETER) rather than a closed
    connection: the frame itself was fine.
    """

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class MissingField(FieldError):
    def __init__(self, header: str, field: str):
        super().__init__(f"the custom header {header} is missing required field '{field}'", field)


class BadField(FieldError):
    def __init__(self, header: str, field: str, value: object, expected: str):
        super().__init__(
            f"the custom header {header} has field '{field}' = {value!r}, expected {expected}", field
        )


class BodyError(WireError):
    """A request body is not the JSON (or binary layout) its code requires."""


class Refusal(Exception):
    """A well-formed request the server will not carry out: answered with ``code``, ``remark`` and ``ext``.

    Handlers raise it wherever they decide to refuse; the dispatcher turns it into the answer, so a
    refusal is written the same way from any depth of a handler, and ``ext`` is passed through as given
    (``None`` writes no extFields at all, ``{}`` an empty map: some clients tell them apart).
    """

    def __init__(self, code: int, remark: str | None, ext: dict[str, str] | None = None):
        super().__init__(code, remark)
        self.code = int(code)
        self.remark = remark
        self.ext = ext

    def __str__(self) -> str:
        return f"refused with code {self.code}: {self.remark}"
