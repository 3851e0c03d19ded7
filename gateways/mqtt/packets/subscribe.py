"""SUBSCRIBE, SUBACK, UNSUBSCRIBE and UNSUBACK (spec 3.8 to 3.11).

Each subscription carries an options byte: QoS in both versions; No Local, Retain As Published and
Retain Handling in MQTT 5 only, where 3.1.1 keeps those bits reserved. Whether a filter is acceptable
is the server's decision per subscription (a SUBACK reason code), so the decoder checks only its encoding.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import properties
from ..errors import malformed, protocol_error
from ..fields import Reader, encode_u16, encode_utf8
from ..packet import MQTT_5, Packet, PacketType
from ..properties import NO_PROPERTIES, Properties
from ..reason_codes import ALLOWED
from .publish import read_packet_identifier

_NO_LOCAL = 0x04
_RETAIN_AS_PUBLISHED = 0x08
_RETAIN_HANDLING_SHIFT = 4
#: The SUBACK return codes of MQTT 3.1.1: the granted QoS, or failure.
_SUBACK_RETURN_CODES = frozenset((0x00, 0x01, 0x02, 0x80))


@dataclass(frozen=True, slots=True)
class Subscription:
    """A topic filter and its Subscription Options (spec 3.8.3.1)."""

    topic_filter: str
    qos: int = 0
    no_local: bool = False
    retain_as_published: bool = False
    #: 0 send retained messages on subscribe, 1 only if the subscription is new, 2 never.
    retain_handling: int = 0

    def options(self) -> int:
        return (self.qos | (_NO_LOCAL if self.no_local else 0)
                | (_RETAIN_AS_PUBLISHED if self.retain_as_published else 0)
                | (self.retain_handling << _RETAIN_HANDLING_SHIFT))


def _encode_properties(packet, version: int) -> bytes:
    return properties.encode(packet.properties, packet.TYPE) if version == MQTT_5 else b""


def _decode_properties(cls, body: Reader, version: int) -> Properties:
    return properties.decode(body, cls.TYPE) if version == MQTT_5 else NO_PROPERTIES


def _reason_codes(cls, body: Reader, version: int) -> tuple[int, ...]:
    """The rest of a SUBACK or UNSUBACK: one reason code per filter (3.1.1 SUBACK: 0, 1, 2 or 0x80)."""
    codes = tuple(body.rest())
    allowed = ALLOWED[cls.TYPE] if version == MQTT_5 else _SUBACK_RETURN_CODES
    if not codes:
        raise protocol_error(f"{cls.TYPE.name} without a reason code")
    for code in codes:
        if code not in allowed:
            raise protocol_error(f"reason code 0x{code:02X} is not defined for {cls.TYPE.name}")
    return codes


@dataclass(frozen=True, slots=True)
class Subscribe(Packet):
    TYPE = PacketType.SUBSCRIBE
    packet_identifier: int
    subscriptions: tuple[Subscription, ...]
    properties: Properties = NO_PROPERTIES

    def _encode(self, version: int) -> bytes:
        out = bytearray(encode_u16(self.packet_identifier))
        out += _encode_properties(self, version)
        for subscription in self.subscriptions:
            if subscription.qos not in (0, 1, 2) or subscription.retain_handling not in (0, 1, 2):
                raise ValueError(f"subscription options of {subscription}")
            if version != MQTT_5 and subscription.options() & ~0x03:
                raise ValueError("MQTT 3.1.1 subscriptions carry a QoS only")
            out += encode_utf8(subscription.topic_filter)
            out.append(subscription.options())
        return bytes(out)

    @classmethod
    def _decode(cls, flags: int, body: Reader, version: int) -> Subscribe:
        packet_identifier = read_packet_identifier(body)
        props = _decode_properties(cls, body, version)
        reserved = 0xC0 if version == MQTT_5 else 0xFC
        subscriptions = []
        while body.remaining:
            topic_filter = body.utf8()
            options = body.byte()
            if options & reserved:
                raise malformed("reserved Subscription Options bits are set")
            qos = options & 0x03
            retain_handling = options >> _RETAIN_HANDLING_SHIFT & 0x03
            if qos == 3:
                raise malformed("subscription with QoS 3")
            if retain_handling == 3:
                raise protocol_error("Retain Handling 3")
            subscriptions.append(Subscription(topic_filter, qos, bool(options & _NO_LOCAL),
                                              bool(options & _RETAIN_AS_PUBLISHED), retain_handling))
        if not subscriptions:
            raise protocol_error("SUBSCRIBE without a subscription")
        return cls(packet_identifier, tuple(subscriptions), props)


@dataclass(frozen=True, slots=True)
class SubAck(Packet):
    """One reason code per subscription, in order: the granted QoS or a failure (3.1.1: 0x80)."""

    TYPE = PacketType.SUBACK
    packet_identifier: int
    reason_codes: tuple[int, ...]
    properties: Properties = NO_PROPERTIES

    def _encode(self, version: int) -> bytes:
        return encode_u16(self.packet_identifier) + _encode_properties(self, version) + bytes(self.reason_codes)

    @classmethod
    def _decode(cls, flags: int, body: Reader, version: int) -> SubAck:
        packet_identifier = read_packet_identifier(body)
        props = _decode_properties(cls, body, version)
        return cls(packet_identifier, _reason_codes(cls, body, version), props)


@dataclass(frozen=True, slots=True)
class Unsubscribe(Packet):
    TYPE = PacketType.UNSUBSCRIBE
    packet_identifier: int
    topic_filters: tuple[str, ...]
    properties: Properties = NO_PROPERTIES

    def _encode(self, version: int) -> bytes:
        return (encode_u16(self.packet_identifier) + _encode_properties(self, version)
                + b"".join(encode_utf8(topic_filter) for topic_filter in self.topic_filters))

    @classmethod
    def _decode(cls, flags: int, body: Reader, version: int) -> Unsubscribe:
        packet_identifier = read_packet_identifier(body)
        props = _decode_properties(cls, body, version)
        topic_filters = []
        while body.remaining:
            topic_filters.append(body.utf8())
        if not topic_filters:
            raise protocol_error("UNSUBSCRIBE without a topic filter")
        return cls(packet_identifier, tuple(topic_filters), props)


@dataclass(frozen=True, slots=True)
class UnsubAck(Packet):
    """MQTT 5 has a reason code per topic filter; 3.1.1's UNSUBACK has none (``reason_codes`` is empty)."""

    TYPE = PacketType.UNSUBACK
    packet_identifier: int
    reason_codes: tuple[int, ...] = ()
    properties: Properties = NO_PROPERTIES

    def _encode(self, version: int) -> bytes:
        if version != MQTT_5:
            return encode_u16(self.packet_identifier)
        return encode_u16(self.packet_identifier) + _encode_properties(self, version) + bytes(self.reason_codes)

    @classmethod
    def _decode(cls, flags: int, body: Reader, version: int) -> UnsubAck:
        packet_identifier = read_packet_identifier(body)
        props = _decode_properties(cls, body, version)
        reason_codes = _reason_codes(cls, body, version) if version == MQTT_5 else ()
        body.expect_end("UNSUBACK")
        return cls(packet_identifier, reason_codes, props)


__all__ = ["Subscription", "Subscribe", "SubAck", "Unsubscribe", "UnsubAck"]
