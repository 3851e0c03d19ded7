"""PUBLISH and its acknowledgements PUBACK, PUBREC, PUBREL, PUBCOMP (spec 3.3 to 3.7).

PUBLISH is the one packet whose fixed header flags carry data (DUP, QoS, RETAIN). The four
acknowledgements share a layout: a Packet Identifier, then in MQTT 5 a reason code and properties that
the sender leaves out when they are *Success* and empty (spec 3.4.2.1), which is how they are encoded here.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import properties
from ..errors import PacketError, checked_reason_code, malformed, protocol_error
from ..fields import Reader, encode_u16, encode_utf8
from ..packet import MQTT_5, Packet, PacketType, optional_tail
from ..properties import NO_PROPERTIES, Properties
from ..reason_codes import ReasonCode
from ..topics import has_wildcard

_DUP = 0x08
_RETAIN = 0x01


def read_packet_identifier(body: Reader) -> int:
    """A Packet Identifier, which is never 0 (MQTT-2.2.1-3): 0 is a *Protocol Error*."""
    identifier = body.u16()
    if identifier == 0:
        raise protocol_error("packet identifier 0")
    return identifier


@dataclass(frozen=True, slots=True)
class Publish(Packet):
    """``packet_identifier`` is present exactly when ``qos`` > 0. An empty ``topic_name`` with a
    ``topic_alias`` property is MQTT 5's aliased form; resolving aliases is connection state."""

    TYPE = PacketType.PUBLISH
    topic_name: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    dup: bool = False
    packet_identifier: int | None = None
    properties: Properties = NO_PROPERTIES

    def fixed_flags(self) -> int:
        return (_DUP if self.dup else 0) | (self.qos << 1) | (_RETAIN if self.retain else 0)

    def _encode(self, version: int) -> bytes:
        if self.qos not in (0, 1, 2):
            raise ValueError(f"QoS {self.qos}")
        if (self.packet_identifier is None) != (self.qos == 0):
            raise ValueError("a PUBLISH has a packet identifier exactly when its QoS is above 0")
        head = encode_utf8(self.topic_name)
        if self.packet_identifier is not None:
            head += encode_u16(self.packet_identifier)
        if version == MQTT_5:
            head += properties.encode(self.properties, PacketType.PUBLISH)
        return head + self.payload

    @classmethod
    def _decode(cls, flags: int, body: Reader, version: int) -> Publish:
        qos = (flags >> 1) & 0x03
        if qos == 3:
            raise malformed("PUBLISH with QoS 3")
        dup = bool(flags & _DUP)
        if dup and qos == 0:
            raise protocol_error("DUP set on a QoS 0 PUBLISH")
        topic_name = body.utf8()
        if has_wildcard(topic_name):
            raise PacketError(ReasonCode.TOPIC_NAME_INVALID, f"wildcard in topic name {topic_name!r}")
        packet_identifier = read_packet_identifier(body) if qos else None
        props = properties.decode(body, PacketType.PUBLISH) if version == MQTT_5 else NO_PROPERTIES
        if not topic_name and props.topic_alias is None:
            raise protocol_error("empty topic name without a topic alias")
        return cls(topic_name, body.rest(), qos, bool(flags & _RETAIN), dup, packet_identifier, props)


@dataclass(frozen=True, slots=True)
class _Acknowledgement(Packet):
    """Packet Identifier, then (MQTT 5) reason code and properties, both optional on the wire."""

    packet_identifier: int
    reason_code: int = ReasonCode.SUCCESS
    properties: Properties = NO_PROPERTIES

    def _encode(self, version: int) -> bytes:
        head = encode_u16(self.packet_identifier)
        if version != MQTT_5:
            return head
        with_reason, with_properties = optional_tail(self.reason_code, self.properties != NO_PROPERTIES)
        if with_reason:
            head += bytes((self.reason_code,))
        if with_properties:
            head += properties.encode(self.properties, self.TYPE)
        return head

    @classmethod
    def _decode(cls, flags: int, body: Reader, version: int) -> _Acknowledgement:
        packet_identifier = read_packet_identifier(body)
        reason_code = ReasonCode.SUCCESS
        props = NO_PROPERTIES
        if version == MQTT_5 and body.remaining:
            reason_code = checked_reason_code(cls.TYPE, body.byte())
            if body.remaining:
                props = properties.decode(body, cls.TYPE)
        body.expect_end(cls.TYPE.name)
        return cls(packet_identifier, reason_code, props)


class PubAck(_Acknowledgement):
    """QoS 1 delivered."""

    __slots__ = ()
    TYPE = PacketType.PUBACK


class PubRec(_Acknowledgement):
    """QoS 2, part 1: received."""

    __slots__ = ()
    TYPE = PacketType.PUBREC


class PubRel(_Acknowledgement):
    """QoS 2, part 2: released."""

    __slots__ = ()
    TYPE = PacketType.PUBREL


class PubComp(_Acknowledgement):
    """QoS 2, part 3: complete."""

    __slots__ = ()
    TYPE = PacketType.PUBCOMP


__all__ = ["Publish", "PubAck", "PubRec", "PubRel", "PubComp", "read_packet_identifier"]
