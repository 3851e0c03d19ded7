"""The two header serializations, JSON and ROCKETMQ (binary), in both directions.

A server must read either on any connection, frame by frame, and answers in the one its request used.
JSON is written the way Java's fastjson writes it (alphabetical keys, compact, nulls omitted, every
``extFields`` value a string) because the Go client decodes ``extFields`` into ``map[string]string``.
"""

from __future__ import annotations

import struct

import orjson

from .codes import LanguageCode, SerializeType
from .command import RemotingCommand
from . import native
from .errors import HeaderError

# ROCKETMQ header, fixed part: code, language, version, opaque, flag (the remark length follows).
ROCKETMQ_FIXED = struct.Struct(">hBhii")
_I32 = struct.Struct(">i")
_U16 = struct.Struct(">H")

_LANGUAGE_NAMES = {member: member.name for member in LanguageCode}
_LANGUAGE_BY_NUMBER = {int(member): member for member in LanguageCode}
_LANGUAGE_BY_NAME = {member.name: member for member in LanguageCode}
_STR_ONLY = {str}
_SERIALIZE_NAMES = {SerializeType.JSON: "JSON", SerializeType.ROCKETMQ: "ROCKETMQ"}

_headerc = native.load("ferrymq.wire._headerc")  # the ROCKETMQ header's byte work in C


# ---------------------------------------------------------------- JSON


def encode_json_header(cmd: RemotingCommand) -> bytes:
    header: dict = {"code": cmd.code}
    if cmd.ext_fields is not None:
        header["extFields"] = cmd.ext_fields
    header["flag"] = cmd.flag
    header["language"] = _LANGUAGE_NAMES.get(cmd.language, "OTHER")
    header["opaque"] = cmd.opaque
    if cmd.remark is not None:
        header["remark"] = cmd.remark
    header["serializeTypeCurrentRPC"] = _SERIALIZE_NAMES[cmd.serialize_type]
    header["version"] = cmd.version
    return orjson.dumps(header)


def _as_str(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, (int, float)):
        return str(value)
    return orjson.dumps(value).decode()


def _int_field(header: dict, name: str, default: int = 0) -> int:
    value = header.get(name, default)
    if isinstance(value, bool):
        raise HeaderError(f"JSON header field '{name}' must be an integer, got {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    if value is None:
        return default
    raise HeaderError(f"JSON header field '{name}' must be an integer, got {value!r}")


def decode_json_header(data: bytes | memoryview) -> RemotingCommand:
    try:
        header = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise HeaderError(f"JSON header is not valid JSON: {exc}") from None
    if not isinstance(header, dict):
        raise HeaderError("JSON header must be an object")
    if "code" not in header:
        raise HeaderError("JSON header has no 'code'")
    ext = header.get("extFields")
    if ext is not None:
        if not isinstance(ext, dict):
            raise HeaderError("JSON header field 'extFields' must be an object")
        if not set(map(type, ext.values())) <= _STR_ONLY:  # one C-level pass; the loop only when needed
            for key, value in ext.items():
                if not isinstance(value, str):
                    ext[key] = _as_str(value)
    remark = header.get("remark")
    if remark is not None and not isinstance(remark, str):
        remark = _as_str(remark)
    code, opaque, flag, version = (header.get("code"), header.get("opaque", 0), header.get("flag", 0),
                                   header.get("version", 0))
    language = header.get("language", "JAVA")
    return RemotingCommand(
        code=code if type(code) is int else _int_field(header, "code"),
        opaque=opaque if type(opaque) is int else _int_field(header, "opaque"),
        flag=flag if type(flag) is int else _int_field(header, "flag"),
        language=(type(language) is str and _LANGUAGE_BY_NAME.get(language)) or LanguageCode.parse(language),
        version=version if type(version) is int else _int_field(header, "version"),
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.JSON,
    )


# ---------------------------------------------------------------- ROCKETMQ


_KEY_PREFIXES: dict[str, bytes] = {}


def _key_prefix(key: str) -> bytes:
    """``int16 len + key``; header keys are a small fixed vocabulary, so this is cached."""
    prefix = _KEY_PREFIXES.get(key)
    if prefix is None:
        raw = key.encode()
        prefix = _U16.pack(len(raw)) + raw
        if len(_KEY_PREFIXES) < 4096:
            _KEY_PREFIXES[key] = prefix
    return prefix


def encode_ext_fields(ext: dict | None) -> bytes:
    """``int16 keyLen, key, int32 valLen, value`` per entry; entries with a None key or value are skipped."""
    if not ext:
        return b""
    out = bytearray()
    pack = _I32.pack
    for key, value in ext.items():
        if key is None or value is None:
            continue
        v = value.encode() if type(value) is str else _as_str(value).encode()
        out += _KEY_PREFIXES.get(key) or _key_prefix(key)
        out += pack(len(v))
        out += v
    return bytes(out)


def encode_rocketmq_header(cmd: RemotingCommand) -> bytes:
    if _headerc is not None:
        out = _headerc.encode(cmd.code, cmd.language, cmd.version, cmd.opaque, cmd.flag, cmd.remark or None,
                              cmd.ext_fields)
        if out is not None:
            return out
    return encode_rocketmq_header_py(cmd)


def _rocketmq_command(code: int, language: int, version: int, opaque: int, flag: int, remark: str | None,
                      ext: dict[str, str] | None) -> RemotingCommand:
    return RemotingCommand(
        code=code,
        opaque=opaque,
        flag=flag,
        language=_LANGUAGE_BY_NUMBER.get(language) or LanguageCode.parse(language),
        version=version,
        remark=remark,
        ext_fields=ext,
        serialize_type=SerializeType.ROCKETMQ,
    )


def decode_rocketmq_header(data: bytes | memoryview) -> RemotingCommand:
    if _headerc is None:
        return decode_rocketmq_header_py(data)
    try:
        code, language, version, opaque, flag, remark, ext = _headerc.decode(data)
    except UnicodeDecodeError as exc:
        raise HeaderError(f"ROCKETMQ header: unreadable extFields ({exc})") from None
    except ValueError as exc:
        raise HeaderError(f"ROCKETMQ header: {exc}") from None
    return _rocketmq_command(code, language, version, opaque, flag, remark, ext)


# The Python implementation: the specification of wire/_headerc.c, and what runs without it.


def encode_rocketmq_header_py(cmd: RemotingCommand) -> bytes:
    remark = cmd.remark.encode() if cmd.remark else b""
    ext = encode_ext_fields(cmd.ext_fields)
    return b"".join(
        (
            ROCKETMQ_FIXED.pack(cmd.code, int(cmd.language), cmd.version, cmd.opaque, cmd.flag),
            _I32.pack(len(remark)),
            remark,
            _I32.pack(len(ext)),
            ext,
        )
    )


def decode_ext_fields(data: bytes, start: int, end: int) -> dict[str, str]:
    if data.isascii():
        return _decode_ascii_ext_fields(data, start, end)
    ext: dict[str, str] = {}
    pos = start
    u16 = _U16.unpack_from
    i32 = _I32.unpack_from
    try:
        while pos < end:
            klen = u16(data, pos)[0]
            pos += 2
            key = data[pos : pos + klen].decode()
            pos += klen
            vlen = i32(data, pos)[0]
            pos += 4
            if vlen < 0 or pos + vlen > end:
                raise HeaderError(f"ROCKETMQ header: value of '{key}' overruns the header")
            ext[key] = data[pos : pos + vlen].decode()
            pos += vlen
    except (struct.error, UnicodeDecodeError) as exc:
        raise HeaderError(f"ROCKETMQ header: unreadable extFields ({exc})") from None
    if pos != end:
        raise HeaderError("ROCKETMQ header: extFields overrun their declared length")
    return ext


def _decode_ascii_ext_fields(data: bytes, start: int, end: int) -> dict[str, str]:
    """The same walk over an all-ASCII header (what clients send): decoded once, byte offsets are string
    offsets, so each key and value is one slice instead of a slice and a decode."""
    text = data.decode("ascii")
    ext: dict[str, str] = {}
    pos = start
    u16 = _U16.unpack_from
    i32 = _I32.unpack_from
    try:
        while pos < end:
            klen = u16(data, pos)[0]
            pos += 2
            key = text[pos : pos + klen]
            pos += klen
            vlen = i32(data, pos)[0]
            pos += 4
            if vlen < 0 or pos + vlen > end:
                raise HeaderError(f"ROCKETMQ header: value of '{key}' overruns the header")
            ext[key] = text[pos : pos + vlen]
            pos += vlen
    except struct.error as exc:
        raise HeaderError(f"ROCKETMQ header: unreadable extFields ({exc})") from None
    if pos != end:
        raise HeaderError("ROCKETMQ header: extFields overrun their declared length")
    return ext


def decode_rocketmq_header_py(data: bytes | memoryview) -> RemotingCommand:
    data = bytes(data)
    size = len(data)
    if size < ROCKETMQ_FIXED.size + 8:
        raise HeaderError(f"ROCKETMQ header of {size} bytes is shorter than its 21-byte fixed part")
    code, language, version, opaque, flag = ROCKETMQ_FIXED.unpack_from(data, 0)
    pos = ROCKETMQ_FIXED.size
    (rlen,) = _I32.unpack_from(data, pos)
    pos += 4
    if rlen < 0 or pos + rlen + 4 > size:
        raise HeaderError("ROCKETMQ header: remark length overruns the header")
    try:
        remark = data[pos : pos + rlen].decode() if rlen else None
    except UnicodeDecodeError:
        raise HeaderError("ROCKETMQ header: remark is not UTF-8") from None
    pos += rlen
    (elen,) = _I32.unpack_from(data, pos)
    pos += 4
    if elen < 0 or pos + elen > size:
        raise HeaderError("ROCKETMQ header: extFields length overruns the header")
    ext = decode_ext_fields(data, pos, pos + elen) if elen else None
    return _rocketmq_command(code, language, version, opaque, flag, remark, ext)


ENCODERS = {SerializeType.JSON: encode_json_header, SerializeType.ROCKETMQ: encode_rocketmq_header}
DECODERS = {SerializeType.JSON: decode_json_header, SerializeType.ROCKETMQ: decode_rocketmq_header}
