"""The machinery behind the body classes: field types -> JSON converters and a JSON Schema, built once.

A body is a ``@dataclass(slots=True)`` decorated with :func:`body`. Its annotations are the single
statement of its layout: from them the decorator derives, per field, the wire name (camelCase of the
attribute unless given with :func:`wire`), a decoder, an encoder and a JSON Schema fragment. The
schemas of a class and everything nested in it are compiled with fastjsonschema into one validator,
run on every inbound body, so a peer's mistake is reported as "field X should be Y", not as a
KeyError three calls later.

Decoding is lenient where the clients differ (they are the specification): numbers may arrive as
strings (Go writes ``codeSet`` entries quoted, BrowserCompatible fastjson quotes big longs), booleans
as ``"true"``/``"false"``, any field may be absent or ``null`` (Go writes nil slices as null), null entries
of lists and maps are dropped, unknown fields are ignored. Encoding is fastjson's: nulls omitted, keys in alphabetical order, compact.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from typing import Any, Callable

import fastjsonschema

from .. import fastjson
from ..errors import BodyError

_INT_TEXT = r"^\s*[-+]?\d+\s*$"
_FLOAT_TEXT = r"^\s*[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?\s*$"


def wire(name: str, **kwargs: Any) -> Any:
    """A dataclass field whose JSON name is not the camelCase of its attribute (e.g. ``clientID``)."""
    return dataclasses.field(metadata={"wire": name}, **kwargs)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class Converter(typing.NamedTuple):
    decode: Callable[[Any], Any] | None  # None = value passes through as parsed
    encode: Callable[[Any], Any] | None  # None = value is already JSON-ready
    schema: dict


def _nullable(schema: dict) -> dict:
    schema = dict(schema)
    kind = schema.get("type")
    if isinstance(kind, str):
        schema["type"] = [kind, "null"]
    elif isinstance(kind, list) and "null" not in kind:
        schema["type"] = kind + ["null"]
    return schema


def _str_dec(v: Any) -> str:
    if type(v) is str:
        return v
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _int_dec(v: Any) -> int:
    return v if type(v) is int else int(v)


def _float_dec(v: Any) -> float:
    return v if type(v) is float else float(v)


def _bool_dec(v: Any) -> bool:
    return v if type(v) is bool else v == "true"


_SCALARS: dict[Any, Converter] = {
    str: Converter(_str_dec, None, {"type": ["string", "number", "boolean"]}),
    int: Converter(_int_dec, None, {"type": ["integer", "string"], "pattern": _INT_TEXT}),
    float: Converter(_float_dec, None, {"type": ["number", "string"], "pattern": _FLOAT_TEXT}),
    bool: Converter(_bool_dec, None, {"type": ["boolean", "string"], "enum": [True, False, "true", "false"]}),
    Any: Converter(None, None, {}),
}


def converter(tp: Any) -> Converter:
    """The converter for one annotation (scalars, Optional, list/set, dict, nested bodies, Any)."""
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) != 1:
            raise TypeError(f"unsupported union {tp!r}")
        return converter(inner[0])
    if origin in (list, set, frozenset, tuple):
        item = converter(args[0])
        dec, enc = item.decode, item.encode
        schema = {"type": "array", "items": _nullable(item.schema)}
        return Converter(
            (lambda v: [dec(x) for x in v if x is not None]) if dec else (lambda v: [x for x in v if x is not None]),
            (lambda v: [enc(x) for x in v]) if enc else (None if origin is list else list),
            schema,
        )
    if origin is dict:
        key_tp, val_tp = args
        val = converter(val_tp)
        vdec, venc = val.decode, val.encode
        if key_tp is str:
            schema = {"type": "object", "propertyNames": {"type": "string"}, "additionalProperties": _nullable(val.schema)}
            return Converter(
                (lambda v: {k: vdec(x) for k, x in v.items() if x is not None}) if vdec else _drop_nulls,
                (lambda v: {k: venc(x) for k, x in v.items()}) if venc else None,
                schema,
            )
        if key_tp is int:
            schema = {
                "type": "object",
                "propertyNames": {"pattern": _INT_TEXT},
                "additionalProperties": _nullable(val.schema),
            }
            if vdec:
                return Converter(lambda v: {int(k): vdec(x) for k, x in v.items() if x is not None}, _map_enc(venc), schema)
            return Converter(lambda v: {int(k): x for k, x in v.items() if x is not None}, _map_enc(venc), schema)
        key_body = getattr(key_tp, "__body__", None)
        if key_body is not None:
            return _object_key_map(key_tp, val)
        raise TypeError(f"unsupported map key type {key_tp!r}")
    spec = getattr(tp, "__body__", None)
    if spec is not None:
        return Converter(tp._convert, tp.to_json, tp._schema)
    raise TypeError(f"unsupported body field type {tp!r}")


def _drop_nulls(v: dict) -> dict:
    return {k: x for k, x in v.items() if x is not None}


def _map_enc(venc: Callable | None) -> Callable | None:
    return (lambda v: {k: venc(x) for k, x in v.items()}) if venc else None


def _object_key_map(key_tp: type, val: Converter) -> Converter:
    """A map keyed by a body (MessageQueue): fastjson object keys, Gson ``[[key, value], …]`` pairs,
    or BrowserCompatible keys holding the key's JSON text are all read; the object form is written."""
    key_validate = fastjsonschema.compile(key_tp._schema)
    vdec, venc = val.decode, val.encode

    def key_of(raw: Any) -> Any:
        if isinstance(raw, str):
            raw = fastjson.loads(raw)
        if not hasattr(raw, "items"):
            raise BodyError(f"map key {raw!r} should be a {key_tp.__name__} object")
        try:
            key_validate(dict(raw))
        except fastjsonschema.JsonSchemaException as exc:
            raise BodyError(f"map key {dict(raw)!r} is not a {key_tp.__name__}: {exc.message}") from None
        return key_tp._convert(raw)

    def dec(v: Any) -> dict:
        pairs = v.items() if isinstance(v, dict) else v
        out = {}
        for pair in pairs:
            if not isinstance(pair, (tuple, list)) or len(pair) != 2:
                raise BodyError(f"a {key_tp.__name__}-keyed map entry should be a [key, value] pair, got {pair!r}")
            raw_key, raw_val = pair
            if raw_val is not None:
                out[key_of(raw_key)] = vdec(raw_val) if vdec else raw_val
        return out

    value_schema = _nullable(val.schema)
    schema = {
        "type": ["object", "array"],
        "additionalProperties": value_schema,
        "items": {"type": "array", "minItems": 2, "maxItems": 2, "items": [{}, value_schema]},
    }
    return Converter(dec, _map_enc(venc), schema)


class BodySpec(typing.NamedTuple):
    decode_fields: tuple  # (wire name, attribute name, decoder or None)
    encode_fields: tuple  # (wire name, attribute name, encoder or None), alphabetical by wire name


def body(cls: type) -> type:
    """Give a dataclass ``from_json``/``to_json``/``decode``/``encode`` derived from its annotations."""
    hints = typing.get_type_hints(cls)
    entries = []
    properties = {}
    for f in dataclasses.fields(cls):
        name = f.metadata.get("wire") or camel(f.name)
        conv = converter(hints[f.name])
        entries.append((name, f.name, conv))
        properties[name] = _nullable(conv.schema)
    cls.__body__ = BodySpec(
        tuple((w, a, c.decode) for w, a, c in entries),
        tuple((w, a, c.encode) for w, a, c in sorted(entries, key=lambda e: e[0])),
    )
    cls._schema = {"type": "object", "properties": properties}
    cls._validator = None  # compiled on first use: import stays cheap
    for attr in ("_convert", "from_json", "decode", "to_json", "encode"):
        if attr not in cls.__dict__:
            setattr(cls, attr, _DEFAULTS[attr])
    return cls


def _convert(cls: type, obj: Any) -> Any:
    """A validated JSON object -> instance (no validation: nested values were checked with the root)."""
    kwargs = {}
    for wire_name, attr, dec in cls.__body__.decode_fields:
        value = obj.get(wire_name)
        if value is not None:
            kwargs[attr] = dec(value) if dec else value
    return cls(**kwargs)


def _validate(cls: type, obj: Any) -> None:
    validator = cls._validator
    if validator is None:
        validator = cls._validator = fastjsonschema.compile(cls._schema)
    try:
        validator(obj)
    except fastjsonschema.JsonSchemaException as exc:
        raise BodyError(f"{cls.__name__} body: {exc.message}") from None


def _from_json(cls: type, obj: Any) -> Any:
    """Validate a parsed JSON value against the class's schema and build the instance."""
    _validate(cls, obj)
    try:
        return cls._convert(obj)
    except (ValueError, TypeError, AttributeError) as exc:  # safety net: the schema should have caught it
        raise BodyError(f"{cls.__name__} body: {exc}") from None


def _decode(cls: type, data: bytes | bytearray | memoryview | str) -> Any:
    """Parse fastjson-or-JSON text into an instance; raises BodyError naming what is wrong."""
    if not data:
        raise BodyError(f"{cls.__name__} body is empty")
    return cls.from_json(fastjson.loads(data))


def _to_json(self: Any) -> dict:
    out = {}
    for wire_name, attr, enc in self.__body__.encode_fields:
        value = getattr(self, attr)
        if value is not None:
            out[wire_name] = enc(value) if enc else value
    return out


def _encode(self: Any, standard_json: bool = True) -> bytes:
    """Compact JSON; ``standard_json=False`` writes integer map keys bare, as fastjson's default does."""
    return fastjson.dumps(self.to_json(), quote_int_keys=standard_json)


_DEFAULTS = {
    "_convert": classmethod(_convert),
    "from_json": classmethod(_from_json),
    "decode": classmethod(_decode),
    "to_json": _to_json,
    "encode": _encode,
}
