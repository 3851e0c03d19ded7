"""RemotingCommand: one request or response, independent of how its header is serialized."""

from __future__ import annotations

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
