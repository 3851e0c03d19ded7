"""RemotingCommand: one request or response, independent of how its header is serialized."""

from __future__ import annotations

import dataclasses
import itertools
from dataclasses import dataclass

from .codes import CURRENT_VERSION, Flag, LanguageCode, SerializeType


_RESPONSE = int(Flag.RESPONSE)  # plain ints: IntFlag arithmetic is slow on the per-frame path
_ONEWAY = int(Flag.ONEWAY)


@dataclass(slots=True)
class RemotingCommand:
    """A decoded frame. ``ext_fields`` is the custom header: string keys to string values.

    ``serialize_type`` records how the frame arrived so that a response can be written the same way.
    """

    code: int
    opaque: int = 0
    flag: int = 0
    language: LanguageCode = LanguageCode.JAVA
    version: int = CURRENT_VERSION
    remark: str | None = None
    ext_fields: dict[str, str] | None = None
    body: bytes = b""
    serialize_type: SerializeType = SerializeType.JSON

    @property
    def is_response(self) -> bool:
        return bool(self.flag & _RESPONSE)

    @property
    def is_oneway(self) -> bool:
        return bool(self.flag & _ONEWAY)

    def ext(self, key: str, default: str | None = None) -> str | None:
        fields = self.ext_fields
        if fields is None:
            return default
        return fields.get(key, default)

    def response(
        self,
        code: int = 0,
        remark: str | None = None,
        ext_fields: dict[str, str] | None = None,
        body: bytes = b"",
    ) -> "RemotingCommand":
        """The response to this request: same opaque and serialization, RESPONSE bit set."""
        return RemotingCommand(
            code=int(code),
            opaque=self.opaque,
            flag=_RESPONSE,
            language=LanguageCode.JAVA,
            version=CURRENT_VERSION,
            remark=remark,
            ext_fields=ext_fields,
            body=body,
            serialize_type=self.serialize_type,
        )


class PartsCommand(RemotingCommand):
    """A command whose body is several buffers back to back (a pull answer: views of the commit log).

    The frame encoder copies the parts once, straight into the frame, instead of joining them into a
    body that it would copy again; reading ``body`` joins them on demand.
    """

    __slots__ = ("body_parts",)

    @property
    def body(self) -> bytes:
        return b"".join(self.body_parts)

    @body.setter
    def body(self, value: bytes) -> None:
        self.body_parts = [value] if value else []

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RemotingCommand) and _fields(self) == _fields(other)


def _fields(cmd: RemotingCommand) -> tuple:
    """The values the dataclass compares, read through attributes (so a joined ``body`` for parts)."""
    return tuple(getattr(cmd, f.name) for f in dataclasses.fields(RemotingCommand))


def parts_response(req: RemotingCommand, code: int, remark: str | None, ext_fields: dict[str, str] | None,
                   parts: list) -> PartsCommand:
    """``req.response(...)`` with a body made of ``parts`` (buffers that stay valid until it is written)."""
    resp = PartsCommand(code=int(code), opaque=req.opaque, flag=_RESPONSE, remark=remark, ext_fields=ext_fields,
                        serialize_type=req.serialize_type)
    resp.body_parts = parts
    return resp


_opaque_counter = itertools.count(1)


def next_opaque() -> int:
    """A process-wide request id, kept within int32 as the clients expect."""
    return next(_opaque_counter) & 0x7FFFFFFF


def request(
    code: int,
    ext_fields: dict[str, str] | None = None,
    body: bytes = b"",
    *,
    oneway: bool = False,
    language: LanguageCode = LanguageCode.PYTHON,
    serialize_type: SerializeType = SerializeType.JSON,
    opaque: int | None = None,
) -> RemotingCommand:
    """A new request with a fresh opaque."""
    return RemotingCommand(
        code=int(code),
        opaque=next_opaque() if opaque is None else opaque,
        flag=_ONEWAY if oneway else 0,
        language=language,
        ext_fields=ext_fields,
        body=body,
        serialize_type=serialize_type,
    )
