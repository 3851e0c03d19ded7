"""MQTT 5 properties (spec 2.2.2.2): one table gives each identifier its name, type, packets and values.

:data:`PROPERTIES` is the only place these facts live: the :class:`Properties` dataclass, the encoder,
the decoder's checks and the ``construct`` layout (:mod:`.layouts`) are all derived from it. Names are
the spec's, in snake case. Two properties may occur more than once: *User Property* (anywhere, kept in
order as ``(name, value)`` pairs) and *Subscription Identifier* (several in a PUBLISH, one in a
SUBSCRIBE); both are tuples, every other property is a single value or ``None`` when absent.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from enum import Enum

from .errors import PacketError, malformed, protocol_error
from .fields import (
    MAX_VARINT,
    Reader,
    encode_binary,
    encode_u16,
    encode_u32,
    encode_utf8,
    encode_varint,
)
from .packet import PacketType as P
from .reason_codes import ReasonCode

#: Where a property may appear: a packet type, or the Will Properties of a CONNECT.
WILL = "will"
Where = P | str


class PropertyType(Enum):
    """The data representations properties use (spec 1.5), with their Python type."""

    BYTE = int
    TWO_BYTE_INTEGER = int
    FOUR_BYTE_INTEGER = int
    VARIABLE_BYTE_INTEGER = int
    UTF8_STRING = str
    BINARY_DATA = bytes
    UTF8_STRING_PAIR = tuple

    # Enum members with equal values would be aliases; the name keeps them apart.
    def __new__(cls, python_type):
        member = object.__new__(cls)
        member._value_ = len(cls.__members__)
        member.python_type = python_type
        return member


T = PropertyType
_BOOLEAN = range(2)
_U16_NONZERO = range(1, 0x1_0000)


@dataclass(frozen=True)
class PropertySpec:
    identifier: int
    name: str
    type: PropertyType
    packets: frozenset
    #: The values the spec allows; any other is a *Protocol Error* (``None``: any the type can hold).
    values: range | None = None
    #: Whether it may occur more than once in one packet.
    repeated: bool = False


def _spec(identifier, name, type_, packets, values=None, repeated=False) -> PropertySpec:
    return PropertySpec(identifier, name, type_, frozenset(packets), values, repeated)


_ACKS = (P.PUBACK, P.PUBREC, P.PUBREL, P.PUBCOMP)

#: Every property of MQTT 5 (spec 2.2.2.2, table 2-4).
PROPERTIES: tuple[PropertySpec, ...] = (
    _spec(0x01, "payload_format_indicator", T.BYTE, (P.PUBLISH, WILL), _BOOLEAN),
    _spec(0x02, "message_expiry_interval", T.FOUR_BYTE_INTEGER, (P.PUBLISH, WILL)),
    _spec(0x03, "content_type", T.UTF8_STRING, (P.PUBLISH, WILL)),
    _spec(0x08, "response_topic", T.UTF8_STRING, (P.PUBLISH, WILL)),
    _spec(0x09, "correlation_data", T.BINARY_DATA, (P.PUBLISH, WILL)),
    _spec(0x0B, "subscription_identifier", T.VARIABLE_BYTE_INTEGER, (P.PUBLISH, P.SUBSCRIBE),
          range(1, MAX_VARINT + 1), repeated=True),
    _spec(0x11, "session_expiry_interval", T.FOUR_BYTE_INTEGER, (P.CONNECT, P.CONNACK, P.DISCONNECT)),
    _spec(0x12, "assigned_client_identifier", T.UTF8_STRING, (P.CONNACK,)),
    _spec(0x13, "server_keep_alive", T.TWO_BYTE_INTEGER, (P.CONNACK,)),
    _spec(0x15, "authentication_method", T.UTF8_STRING, (P.CONNECT, P.CONNACK, P.AUTH)),
    _spec(0x16, "authentication_data", T.BINARY_DATA, (P.CONNECT, P.CONNACK, P.AUTH)),
    _spec(0x17, "request_problem_information", T.BYTE, (P.CONNECT,), _BOOLEAN),
    _spec(0x18, "will_delay_interval", T.FOUR_BYTE_INTEGER, (WILL,)),
    _spec(0x19, "request_response_information", T.BYTE, (P.CONNECT,), _BOOLEAN),
    _spec(0x1A, "response_information", T.UTF8_STRING, (P.CONNACK,)),
    _spec(0x1C, "server_reference", T.UTF8_STRING, (P.CONNACK, P.DISCONNECT)),
    _spec(0x1F, "reason_string", T.UTF8_STRING,
          (P.CONNACK, *_ACKS, P.SUBACK, P.UNSUBACK, P.DISCONNECT, P.AUTH)),
    _spec(0x21, "receive_maximum", T.TWO_BYTE_INTEGER, (P.CONNECT, P.CONNACK), _U16_NONZERO),
    _spec(0x22, "topic_alias_maximum", T.TWO_BYTE_INTEGER, (P.CONNECT, P.CONNACK)),
    _spec(0x23, "topic_alias", T.TWO_BYTE_INTEGER, (P.PUBLISH,), _U16_NONZERO),
    _spec(0x24, "maximum_qos", T.BYTE, (P.CONNACK,), _BOOLEAN),
    _spec(0x25, "retain_available", T.BYTE, (P.CONNACK,), _BOOLEAN),
    _spec(0x26, "user_property", T.UTF8_STRING_PAIR,
          (P.CONNECT, P.CONNACK, P.PUBLISH, WILL, *_ACKS, P.SUBSCRIBE, P.SUBACK, P.UNSUBSCRIBE,
           P.UNSUBACK, P.DISCONNECT, P.AUTH), repeated=True),
    _spec(0x27, "maximum_packet_size", T.FOUR_BYTE_INTEGER, (P.CONNECT, P.CONNACK), range(1, 2**32)),
    _spec(0x28, "wildcard_subscription_available", T.BYTE, (P.CONNACK,), _BOOLEAN),
    _spec(0x29, "subscription_identifier_available", T.BYTE, (P.CONNACK,), _BOOLEAN),
    _spec(0x2A, "shared_subscription_available", T.BYTE, (P.CONNACK,), _BOOLEAN),
)

BY_IDENTIFIER = {spec.identifier: spec for spec in PROPERTIES}
BY_NAME = {spec.name: spec for spec in PROPERTIES}

Properties = dataclasses.make_dataclass(
    "Properties",
    [(spec.name, tuple if spec.repeated else spec.type.python_type | None,
      dataclasses.field(default=() if spec.repeated else None)) for spec in PROPERTIES],
    frozen=True,
    slots=True,
)
Properties.__module__ = __name__
Properties.__doc__ = """The MQTT 5 properties of one packet: a field per row of :data:`PROPERTIES`."""
Properties.__repr__ = lambda self: "Properties({})".format(", ".join(  # only the properties present
    f"{spec.name}={getattr(self, spec.name)!r}" for spec in PROPERTIES
    if getattr(self, spec.name) not in (None, ())))

#: The empty set of properties (every MQTT 3.1.1 packet has it).
NO_PROPERTIES = Properties()


def items(props) -> Iterator[tuple[PropertySpec, object]]:
    """``(spec, value)`` in wire order: by identifier, repeated properties one item per occurrence."""
    for spec in PROPERTIES:
        value = getattr(props, spec.name)
        if spec.repeated:
            for one in value:
                yield spec, one
        elif value is not None:
            yield spec, value


def from_items(pairs) -> Properties:
    """The dataclass from ``(spec, value)`` pairs (the inverse of :func:`items`)."""
    fields: dict[str, object] = {}
    for spec, value in pairs:
        if spec.repeated:
            fields[spec.name] = fields.get(spec.name, ()) + (value,)
        else:
            fields[spec.name] = value
    return Properties(**fields)


_ENCODERS = {
    T.BYTE: lambda v: bytes((v,)),
    T.TWO_BYTE_INTEGER: encode_u16,
    T.FOUR_BYTE_INTEGER: encode_u32,
    T.VARIABLE_BYTE_INTEGER: encode_varint,
    T.UTF8_STRING: encode_utf8,
    T.BINARY_DATA: encode_binary,
    T.UTF8_STRING_PAIR: lambda pair: encode_utf8(pair[0]) + encode_utf8(pair[1]),
}

_DECODERS = {
    T.BYTE: Reader.byte,
    T.TWO_BYTE_INTEGER: Reader.u16,
    T.FOUR_BYTE_INTEGER: Reader.u32,
    T.VARIABLE_BYTE_INTEGER: Reader.varint,
    T.UTF8_STRING: Reader.utf8,
    T.BINARY_DATA: Reader.binary,
    T.UTF8_STRING_PAIR: lambda r: (r.utf8(), r.utf8()),
}


def encode(props, where: Where) -> bytes:
    """The Properties field (length + properties) for a packet of kind ``where``.

    A property the packet may not carry is a ``ValueError``: the caller built a packet the spec forbids.
    """
    if props is NO_PROPERTIES:
        return b"\x00"
    if where is P.SUBSCRIBE and len(props.subscription_identifier) > 1:
        raise ValueError("a SUBSCRIBE carries at most one subscription_identifier")
    out = bytearray()
    for spec, value in items(props):
        if where not in spec.packets:
            raise ValueError(f"{spec.name} is not allowed in {getattr(where, 'name', where)}")
        out += encode_varint(spec.identifier)
        out += _ENCODERS[spec.type](value)
    return encode_varint(len(out)) + out


def decode(reader: Reader, where: Where) -> Properties:
    """Read a Properties field, enforcing the table: unknown identifiers are *Malformed Packet*; a property
    out of place, repeated or with a value the spec forbids is a *Protocol Error* (spec 2.2.2.2)."""
    length = reader.varint()
    if length == 0:
        return NO_PROPERTIES
    end = reader.pos + length
    if end > reader.end:
        raise malformed("property length exceeds the packet")
    inner = Reader(reader.data, reader.pos, end)
    fields: dict[str, object] = {}
    while inner.remaining:
        identifier = inner.varint()
        spec = BY_IDENTIFIER.get(identifier)
        if spec is None:
            raise malformed(f"unknown property identifier 0x{identifier:02X}")
        if where not in spec.packets:
            raise protocol_error(f"{spec.name} is not allowed in {getattr(where, 'name', where)}")
        value = _DECODERS[spec.type](inner)
        if spec.values is not None and value not in spec.values:
            if spec.name == "topic_alias":
                raise PacketError(ReasonCode.TOPIC_ALIAS_INVALID, "topic alias 0")
            raise protocol_error(f"{spec.name} {value} is not allowed")
        if spec.repeated:
            fields[spec.name] = fields.get(spec.name, ()) + (value,)
        elif spec.name in fields:
            raise protocol_error(f"{spec.name} appears twice")
        else:
            fields[spec.name] = value
    reader.pos = end
    if where is P.SUBSCRIBE and len(fields.get("subscription_identifier", ())) > 1:
        raise protocol_error("a SUBSCRIBE carries at most one subscription_identifier")
    return Properties(**fields)


__all__ = ["WILL", "PropertyType", "PropertySpec", "PROPERTIES", "BY_IDENTIFIER", "BY_NAME", "Properties",
           "NO_PROPERTIES", "items", "from_items", "encode", "decode"]
