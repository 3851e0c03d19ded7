"""JSON the way Java's fastjson writes and reads it, for request/response bodies.

Java brokers and clients serialize bodies with fastjson, which departs from JSON in two places that
matter on the wire:

* ``Map<Long|Integer, …>`` keys are written bare (``{0:"addr"}``) unless BrowserCompatible is on
  (then quoted, ``{"0":"addr"}``); Go's route parser splits ``brokerAddrs`` by hand and accepts both.
* ``Map<MessageQueue, …>`` keys are written as objects
  (``{{"brokerName":"b","queueId":0,"topic":"T"}:5}``) and Java mqadmin and Go's reset-offset parser
  read exactly that form.

:func:`dumps` writes compact JSON (no spaces: Go splits some payloads on ``,`` and ``:``); with
``quote_int_keys=False`` integer keys are bare, and keys that are objects (anything with ``to_json()``
or a mapping) are always written in the object form. :func:`loads` accepts strict JSON through orjson
and falls back to a small lenient parser only for text orjson rejects: bare numeric or identifier
keys, object keys (returned as hashable :class:`FrozenObject`), single-quoted strings and trailing
commas. Keys written as bare numbers come back as strings, the same as their quoted form, so callers
see one shape whichever form the peer used.

None values are written as ``null``: body classes omit their None fields themselves (fastjson does).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from json.decoder import scanstring
from typing import Any

import orjson

from .errors import BodyError

__all__ = ["dumps", "loads", "FrozenObject"]

# Dataclasses go through ``default`` (their ``to_json``): orjson would otherwise write snake_case field names.
_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_PASSTHROUGH_DATACLASS


class FrozenObject(Mapping):
    """A JSON object used as a map key (fastjson's MessageQueue keys): read-only and hashable."""

    __slots__ = ("_items", "_hash")

    def __init__(self, items: Mapping[str, Any]):
        self._items = dict(items)
        self._hash = None

    def __getitem__(self, key: str) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset((k, _hashable(v)) for k, v in self._items.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if isinstance(other, FrozenObject):
            return self._items == other._items
        if isinstance(other, Mapping):
            return self._items == dict(other)
        return NotImplemented

    def __repr__(self) -> str:
        return f"FrozenObject({self._items!r})"

    def __str__(self) -> str:  # as it appeared on the wire, for error messages
        return dumps(self._items).decode()

    def to_json(self) -> dict:
        return self._items


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return FrozenObject(value)
    if isinstance(value, list):
        return tuple(_hashable(v) for v in value)
    return value


# ------------------------------------------------------------------ encoding


def _default(obj: Any) -> Any:
    to_json = getattr(obj, "to_json", None)
    if to_json is not None:
        return to_json()
    if isinstance(obj, (set, frozenset, tuple)):
        return list(obj)
    raise TypeError(f"cannot write {type(obj).__name__} as JSON")


def dumps(obj: Any, *, quote_int_keys: bool = True) -> bytes:
    """Compact fastjson-compatible JSON of ``obj`` (dicts, lists, scalars, objects with ``to_json()``).

    ``quote_int_keys=False`` writes integer map keys bare, as fastjson does by default; object keys are
    always written as objects, because that is the only form Java and Go both read back.
    """
    if quote_int_keys:
        try:
            return orjson.dumps(obj, default=_default, option=_OPTIONS)
        except TypeError:
            pass  # an object key (or a value orjson rejects): write it by hand below
    parts: list[str] = []
    _write(obj, parts, quote_int_keys)
    return "".join(parts).encode()


def _write(obj: Any, out: list[str], quote: bool) -> None:
    if isinstance(obj, str):
        out.append(orjson.dumps(obj).decode())
    elif obj is None or isinstance(obj, (bool, float)):
        out.append(orjson.dumps(obj).decode())
    elif isinstance(obj, int):
        out.append(str(int(obj)))  # also beyond 64 bits, which orjson refuses
    elif isinstance(obj, Mapping):
        out.append("{")
        first = True
        for key, value in obj.items():
            if first:
                first = False
            else:
                out.append(",")
            _write_key(key, out, quote)
            out.append(":")
            _write(value, out, quote)
        out.append("}")
    elif isinstance(obj, (list, tuple, set, frozenset)):
        out.append("[")
        first = True
        for value in obj:
            if first:
                first = False
            else:
                out.append(",")
            _write(value, out, quote)
        out.append("]")
    else:
        _write(_default(obj), out, quote)


def _write_key(key: Any, out: list[str], quote: bool) -> None:
    if isinstance(key, str):
        out.append(orjson.dumps(key).decode())
    elif isinstance(key, bool):
        out.append('"true"' if key else '"false"')
    elif isinstance(key, int):
        out.append(f'"{key}"' if quote else str(int(key)))
    elif isinstance(key, Mapping) or hasattr(key, "to_json"):
        _write(key, out, quote)
    else:
        raise TypeError(f"cannot write a map key of type {type(key).__name__}")


# ------------------------------------------------------------------ decoding


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse strict JSON or any of fastjson's forms; raises BodyError saying where the text is wrong."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        strict_error = str(exc)
    if isinstance(data, (bytes, bytearray, memoryview)):
        try:
            text = bytes(data).decode()
        except UnicodeDecodeError as exc:
            raise BodyError(f"body is not UTF-8 text: {exc}") from None
    else:
        text = data
    try:
        return _Lenient(text).document()
    except _ParseError as exc:
        raise BodyError(f"body is not JSON (nor fastjson's extended form): {exc}; strict parser said: {strict_error}") from None
    except RecursionError:
        raise BodyError("body is nested too deeply to be a RocketMQ body") from None


class _ParseError(Exception):
    pass


_WS = re.compile(r"[ \t\n\r]*")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(\.\d+)?([eE][-+]?\d+)?")
_IDENT = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")


class _Lenient:
    """Recursive descent over text orjson refused; strings use the C-accelerated ``scanstring``."""

    __slots__ = ("text", "pos")

    def __init__(self, text: str):
        self.text = text
        self.pos = 0

    def error(self, what: str) -> _ParseError:
        snippet = self.text[self.pos : self.pos + 20]
        return _ParseError(f"{what} at character {self.pos} (near {snippet!r})")

    def skip(self) -> str:
        self.pos = _WS.match(self.text, self.pos).end()
        return self.text[self.pos : self.pos + 1]

    def document(self) -> Any:
        value = self.value()
        if self.skip():
            raise self.error("unexpected trailing text")
        return value

    def value(self) -> Any:
        ch = self.skip()
        if ch == "{":
            return self.obj()
        if ch == "[":
            return self.array()
        if ch == '"' or ch == "'":
            return self.string(ch)
        match = _NUMBER.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            if match.group(1) or match.group(2):
                return float(match.group())
            return int(match.group())
        match = _IDENT.match(self.text, self.pos)
        if match:
            word = match.group()
            self.pos = match.end()
            if word == "true":
                return True
            if word == "false":
                return False
            if word == "null":
                return None
            raise self.error(f"unknown word {word!r}")
        raise self.error("expected a value")

    def string(self, quote: str) -> str:
        if quote == '"':
            try:
                value, self.pos = scanstring(self.text, self.pos + 1, True)
            except ValueError as exc:
                raise self.error(f"bad string ({exc})") from None
            return value
        end = self.text.find("'", self.pos + 1)
        if end < 0:
            raise self.error("unterminated single-quoted string")
        value = self.text[self.pos + 1 : end]
        self.pos = end + 1
        return value

    def key(self) -> Any:
        ch = self.skip()
        if ch == '"' or ch == "'":
            return self.string(ch)
        if ch == "{":
            return FrozenObject(self.obj())
        match = _NUMBER.match(self.text, self.pos) or _IDENT.match(self.text, self.pos)
        if match:
            self.pos = match.end()
            return match.group()
        raise self.error("expected an object key")

    def obj(self) -> dict:
        self.pos += 1
        result: dict = {}
        if self.skip() == "}":
            self.pos += 1
            return result
        while True:
            key = self.key()
            if self.skip() != ":":
                raise self.error("expected ':' after an object key")
            self.pos += 1
            result[key] = self.value()
            ch = self.skip()
            self.pos += 1
            if ch == "}":
                return result
            if ch != ",":
                self.pos -= 1
                raise self.error("expected ',' or '}' in an object")
            if self.skip() == "}":  # trailing comma, as fastjson tolerates
                self.pos += 1
                return result

    def array(self) -> list:
        self.pos += 1
        result: list = []
        if self.skip() == "]":
            self.pos += 1
            return result
        while True:
            result.append(self.value())
            ch = self.skip()
            self.pos += 1
            if ch == "]":
                return result
            if ch != ",":
                self.pos -= 1
                raise self.error("expected ',' or ']' in an array")
            if self.skip() == "]":
                self.pos += 1
                return result
