"""Every MQTT packet of both protocol levels as a ``construct`` layout: the readable specification.

The packet modules decode and encode by hand (construct costs tens of microseconds per packet where a
broker has a few); the tests check that both agree byte for byte on generated packets. Parse and build
take the protocol level as a parameter (``PACKET.parse(data, version=5)``), and :data:`PACKET` converts
to and from the packet dataclasses, so ``PACKET.build(packet, version=v) == encode(packet, v)``.
Layouts describe shape only; the checks of content (UTF-8 without U+0000, packet identifier not 0, ...)
are the decoders'.
"""

from __future__ import annotations

from construct import (
    Adapter,
    BitsInteger,
    BitStruct,
    Const,
    ExprAdapter,
    Flag,
    GreedyBytes,
    GreedyRange,
    If,
    Int8ub,
    Int16ub,
    Int32ub,
    Optional,
    Padding,
    PascalString,
    Prefixed,
    Sequence,
    Struct,
    Switch,
    VarInt,
    this,
)

from . import properties as props_table
from .packet import MQTT_5, PacketType, optional_tail
from .packets import (
    PACKET_CLASSES,
    Auth,
    ConnAck,
    Connect,
    Disconnect,
    PubAck,
    PubComp,
    Publish,
    PubRec,
    PubRel,
    SubAck,
    Subscribe,
    Subscription,
    UnsubAck,
    Unsubscribe,
    Will,
)
from .properties import NO_PROPERTIES, PropertyType

# Data representations (spec 1.5). construct's VarInt is MQTT's Variable Byte Integer (seven bits a byte,
# least significant first), without the four-byte limit.
Utf8String = PascalString(Int16ub, "utf8")
BinaryData = Prefixed(Int16ub, GreedyBytes)
Utf8StringPair = ExprAdapter(Sequence(Utf8String, Utf8String), lambda obj, ctx: tuple(obj),
                             lambda obj, ctx: list(obj))

_TYPES = {
    PropertyType.BYTE: Int8ub,
    PropertyType.TWO_BYTE_INTEGER: Int16ub,
    PropertyType.FOUR_BYTE_INTEGER: Int32ub,
    PropertyType.VARIABLE_BYTE_INTEGER: VarInt,
    PropertyType.UTF8_STRING: Utf8String,
    PropertyType.BINARY_DATA: BinaryData,
    PropertyType.UTF8_STRING_PAIR: Utf8StringPair,
}

#: One property: its identifier, then a value of the type the table gives it.
Property = Struct(
    "identifier" / VarInt,
    "value" / Switch(this.identifier, {spec.identifier: _TYPES[spec.type] for spec in props_table.PROPERTIES}),
)


class _PropertiesAdapter(Adapter):
    def _decode(self, obj, context, path):
        return props_table.from_items((props_table.BY_IDENTIFIER[p.identifier], p.value) for p in obj)

    def _encode(self, obj, context, path):
        return [dict(identifier=spec.identifier, value=value) for spec, value in props_table.items(obj)]


#: The Properties field: a Variable Byte Integer length, then properties.
Properties = _PropertiesAdapter(Prefixed(VarInt, GreedyRange(Property)))


def _v5(ctx) -> bool:
    return ctx._params.version == MQTT_5


def V5(subcon):
    """A field MQTT 3.1.1 does not have."""
    return If(_v5, subcon)


ConnectBody = Struct(
    "protocol_name" / Utf8String,
    "protocol_level" / Int8ub,
    "flags" / BitStruct(
        "user_name" / Flag,
        "password" / Flag,
        "will_retain" / Flag,
        "will_qos" / BitsInteger(2),
        "will" / Flag,
        "clean_start" / Flag,
        "reserved" / Const(0, BitsInteger(1)),
    ),
    "keep_alive" / Int16ub,
    "properties" / If(this.protocol_level == MQTT_5, Properties),
    "client_identifier" / Utf8String,
    "will_properties" / If(lambda ctx: ctx.flags.will and ctx.protocol_level == MQTT_5, Properties),
    "will_topic" / If(this.flags.will, Utf8String),
    "will_payload" / If(this.flags.will, BinaryData),
    "user_name" / If(this.flags.user_name, Utf8String),
    "password" / If(this.flags.password, BinaryData),
)

ConnAckBody = Struct(
    "flags" / BitStruct(Padding(7), "session_present" / Flag),
    "reason_code" / Int8ub,
    "properties" / V5(Properties),
)

PublishBody = Struct(
    "topic_name" / Utf8String,
    "packet_identifier" / If(lambda ctx: ctx._.header.qos > 0, Int16ub),
    "properties" / V5(Properties),
    "payload" / GreedyBytes,
)

#: PUBACK, PUBREC, PUBREL, PUBCOMP: reason code and properties may each end the packet early.
AcknowledgementBody = Struct(
    "packet_identifier" / Int16ub,
    "reason_code" / V5(Optional(Int8ub)),
    "properties" / V5(Optional(Properties)),
)

SubscribeBody = Struct(
    "packet_identifier" / Int16ub,
    "properties" / V5(Properties),
    "subscriptions" / GreedyRange(Struct(
        "topic_filter" / Utf8String,
        "options" / BitStruct(
            "reserved" / Const(0, BitsInteger(2)),
            "retain_handling" / BitsInteger(2),  # MQTT 5; reserved (0) in 3.1.1, like the next two
            "retain_as_published" / Flag,
            "no_local" / Flag,
            "qos" / BitsInteger(2),
        ),
    )),
)

SubAckBody = Struct(
    "packet_identifier" / Int16ub,
    "properties" / V5(Properties),
    "reason_codes" / GreedyRange(Int8ub),
)

UnsubscribeBody = Struct(
    "packet_identifier" / Int16ub,
    "properties" / V5(Properties),
    "topic_filters" / GreedyRange(Utf8String),
)

UnsubAckBody = Struct(
    "packet_identifier" / Int16ub,
    "properties" / V5(Properties),
    "reason_codes" / V5(GreedyRange(Int8ub)),
)

Empty = Struct()

#: DISCONNECT and AUTH (AUTH exists in MQTT 5 only).
ReasonBody = Struct(
    "reason_code" / V5(Optional(Int8ub)),
    "properties" / V5(Optional(Properties)),
)

BODIES = {
    PacketType.CONNECT: ConnectBody,
    PacketType.CONNACK: ConnAckBody,
    PacketType.PUBLISH: PublishBody,
    PacketType.PUBACK: AcknowledgementBody,
    PacketType.PUBREC: AcknowledgementBody,
    PacketType.PUBREL: AcknowledgementBody,
    PacketType.PUBCOMP: AcknowledgementBody,
    PacketType.SUBSCRIBE: SubscribeBody,
    PacketType.SUBACK: SubAckBody,
    PacketType.UNSUBSCRIBE: UnsubscribeBody,
    PacketType.UNSUBACK: UnsubAckBody,
    PacketType.PINGREQ: Empty,
    PacketType.PINGRESP: Empty,
    PacketType.DISCONNECT: ReasonBody,
    PacketType.AUTH: ReasonBody,
}

#: A whole packet: the fixed header (flag bits named as PUBLISH uses them; every other type has fixed
#: values, 0010 for PUBREL, SUBSCRIBE and UNSUBSCRIBE, 0000 otherwise), then the remaining length and body.
RawPacket = Struct(
    "header" / BitStruct(
        "type" / BitsInteger(4),
        "dup" / Flag,
        "qos" / BitsInteger(2),
        "retain" / Flag,
    ),
    "body" / Prefixed(VarInt, Switch(this.header.type, BODIES)),
)


def _properties(value):
    return NO_PROPERTIES if value is None else value


class _PacketAdapter(Adapter):
    """Between :data:`RawPacket`'s containers and the packet dataclasses."""

    def _decode(self, obj, context, path):
        header, body = obj.header, obj.body
        packet_type = PacketType(header.type)
        cls = PACKET_CLASSES[packet_type]
        if cls is Connect:
            flags = body.flags
            will = None
            if flags.will:
                will = Will(body.will_topic, body.will_payload, flags.will_qos, flags.will_retain,
                            _properties(body.will_properties))
            return Connect(body.client_identifier, body.protocol_level, flags.clean_start, body.keep_alive, will,
                           body.user_name, body.password, _properties(body.properties), body.protocol_name)
        if cls is ConnAck:
            return ConnAck(body.flags.session_present, body.reason_code, _properties(body.properties))
        if cls is Publish:
            return Publish(body.topic_name, body.payload, header.qos, header.retain, header.dup,
                           body.packet_identifier, _properties(body.properties))
        if cls in (PubAck, PubRec, PubRel, PubComp, Disconnect, Auth):
            reason_code = 0 if body.reason_code is None else body.reason_code
            fields = (reason_code, _properties(body.properties))
            return cls(body.packet_identifier, *fields) if "packet_identifier" in body else cls(*fields)
        if cls is Subscribe:
            return Subscribe(body.packet_identifier, tuple(
                Subscription(s.topic_filter, s.options.qos, s.options.no_local, s.options.retain_as_published,
                             s.options.retain_handling) for s in body.subscriptions), _properties(body.properties))
        if cls is SubAck:
            return SubAck(body.packet_identifier, tuple(body.reason_codes), _properties(body.properties))
        if cls is Unsubscribe:
            return Unsubscribe(body.packet_identifier, tuple(body.topic_filters), _properties(body.properties))
        if cls is UnsubAck:
            return UnsubAck(body.packet_identifier, tuple(body.reason_codes or ()), _properties(body.properties))
        return cls()

    def _encode(self, packet, context, path):
        flags = packet.fixed_flags()
        header = dict(type=packet.TYPE, dup=bool(flags & 8), qos=(flags >> 1) & 3, retain=bool(flags & 1))
        return dict(header=header, body=self._body(packet))

    @staticmethod
    def _body(packet) -> dict:
        if isinstance(packet, Connect):
            will = packet.will
            flags = dict(user_name=packet.user_name is not None, password=packet.password is not None,
                         will_retain=bool(will and will.retain), will_qos=will.qos if will else 0,
                         will=will is not None, clean_start=packet.clean_start)
            return dict(protocol_name=packet.protocol_name, protocol_level=packet.protocol_level, flags=flags,
                        keep_alive=packet.keep_alive, properties=packet.properties,
                        client_identifier=packet.client_identifier,
                        will_properties=will and will.properties, will_topic=will and will.topic,
                        will_payload=will and will.payload, user_name=packet.user_name, password=packet.password)
        if isinstance(packet, ConnAck):
            return dict(flags=dict(session_present=packet.session_present), reason_code=packet.reason_code,
                        properties=packet.properties)
        if isinstance(packet, Publish):
            return dict(topic_name=packet.topic_name, packet_identifier=packet.packet_identifier,
                        properties=packet.properties, payload=packet.payload)
        if isinstance(packet, (PubAck, PubRec, PubRel, PubComp, Disconnect, Auth)):
            with_reason, with_properties = optional_tail(packet.reason_code, packet.properties != NO_PROPERTIES)
            return dict(packet_identifier=getattr(packet, "packet_identifier", None),
                        reason_code=packet.reason_code if with_reason else None,
                        properties=packet.properties if with_properties else None)
        if isinstance(packet, Subscribe):
            return dict(packet_identifier=packet.packet_identifier, properties=packet.properties, subscriptions=[
                dict(topic_filter=s.topic_filter, options=dict(
                    retain_handling=s.retain_handling, retain_as_published=s.retain_as_published,
                    no_local=s.no_local, qos=s.qos)) for s in packet.subscriptions])
        if isinstance(packet, SubAck):
            return dict(packet_identifier=packet.packet_identifier, properties=packet.properties,
                        reason_codes=list(packet.reason_codes))
        if isinstance(packet, Unsubscribe):
            return dict(packet_identifier=packet.packet_identifier, properties=packet.properties,
                        topic_filters=list(packet.topic_filters))
        if isinstance(packet, UnsubAck):
            return dict(packet_identifier=packet.packet_identifier, properties=packet.properties,
                        reason_codes=list(packet.reason_codes))
        return {}


#: Any packet, as a dataclass: ``PACKET.parse(data, version=v)``, ``PACKET.build(packet, version=v)``.
PACKET = _PacketAdapter(RawPacket)

__all__ = ["Utf8String", "BinaryData", "Utf8StringPair", "Property", "Properties", "BODIES", "RawPacket", "PACKET"]
