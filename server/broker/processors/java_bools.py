"""Header booleans read the way Java's ``Boolean.parseBoolean`` reads them.

Apache decodes boolean header fields with parseBoolean: "true" in any case is true, anything else
false. The C++ client (rocketmq-client-cpp 2.x, under Apache's Python binding) sends ``unitMode=0``
and ``batch=0``; the wire decoder accepts only true/false spellings and would refuse those sends.
This adapter rewrites such values before decoding, for the request codes the broker serves.
"""

from __future__ import annotations

from typing import Any

from wire.headers import REQUEST_HEADERS, V2_SEND_CODES

_PLAIN = frozenset({"true", "false", "True", "False", "TRUE", "FALSE", ""})


def bool_keys(code: int) -> tuple[str, ...]:
    cls = REQUEST_HEADERS.get(code)
    if cls is None:
        return ()
    v2 = code in V2_SEND_CODES
    return tuple((f.v2 if v2 else f.wire) for f in cls.FIELDS if f.kind is bool)


def lenient_bools(table: dict[int, Any]) -> dict[int, Any]:
    """Wrap the handlers whose request header has boolean fields."""
    out = dict(table)
    for code, handler in table.items():
        keys = bool_keys(code)
        if keys:
            out[code] = _wrap(handler, keys)
    return out


def _wrap(handler: Any, keys: tuple[str, ...]) -> Any:
    def handle(cmd, channel):
        ext = cmd.ext_fields
        if ext:
            for key in keys:
                value = ext.get(key)
                if value is not None and value not in _PLAIN:
                    ext[key] = "true" if value.strip().lower() == "true" else "false"
        return handler(cmd, channel)

    handle.__wrapped__ = handler
    return handle
