"""CONNECT and CONNACK (spec 3.1, 3.2): opening a connection, in both protocol levels.

The CONNECT carries its own protocol level, so it is decoded before the connection's version is known;
the packet's ``protocol_level`` then fixes the version for everything after it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .. import properties
from ..errors import PacketError, checked_reason_code, malformed, protocol_error
from ..fields import Reader, encode_binary, encode_u16, encode_utf8
from ..packet import MQTT_3_1_1, MQTT_5, VERSIONS, Packet, PacketType
from ..properties import NO_PROPERTIES, WILL, Properties
from ..reason_codes import ReasonCode

PROTOCOL_NAME = "MQTT"

# Connect Flags (spec 3.1.2.3), bit 0 reserved.
_USER_NAME = 0x80
_PASSWORD = 0x40
_WILL_RETAIN = 0x20
_WILL_QOS_SHIFT = 3
_WILL = 0x04
_CLEAN_START = 0x02
_RESERVED = 0x01


@dataclass(frozen=True, slots=True)
class Will:
    """The Will Message of a CONNECT: the fields the Will Flag brings into the packet."""

    topic: str
    payload: bytes = b""
    qos: int = 0
    retain: bool = False
    properties: Properties = NO_PROPERTIES


@dataclass(frozen=True, slots=True)
class Connect(Packet):
    """``clean_start`` is MQTT 5's *Clean Start*, 3.1.1's *Clean Session* (same bit)."""

    TYPE = PacketType.CONNECT
    client_identifier: str
    protocol_level: int = MQTT_5
    clean_start: bool = True
    keep_alive: int = 60
    will: Will | None = None
    user_name: str | None = None
    password: bytes | None = None
    properties: Properties = NO_PROPERTIES
    protocol_name: str = PROTOCOL_NAME

    def _encode(self, version: int) -> bytes:
        if version != self.protocol_level:
            raise ValueError(f"a CONNECT of level {self.protocol_level} cannot be encoded as version {version}")
        if version == MQTT_3_1_1 and self.password is not None and self.user_name is None:
            raise ValueError("MQTT 3.1.1 allows a password only with a user name")
        flags = ((_USER_NAME if self.user_name is not None else 0)
                 | (_PASSWORD if self.password is not None else 0)
                 | (_CLEAN_START if self.clean_start else 0))
        will = self.will
        if will is not None:
            if will.qos not in (0, 1, 2):
                raise ValueError(f"Will QoS {will.qos}")
            flags |= _WILL | (will.qos << _WILL_QOS_SHIFT) | (_WILL_RETAIN if will.retain else 0)
        out = bytearray(encode_utf8(self.protocol_name))
        out.append(self.protocol_level)
        out.append(flags)
        out += encode_u16(self.keep_alive)
        if version == MQTT_5:
            out += properties.encode(self.properties, PacketType.CONNECT)
        out += encode_utf8(self.client_identifier)
        if will is not None:
            if version == MQTT_5:
                out += properties.encode(will.properties, WILL)
            out += encode_utf8(will.topic)
            out += encode_binary(will.payload)
        if self.user_name is not None:
            out += encode_utf8(self.user_name)
        if self.password is not None:
            out += encode_binary(self.password)
        return bytes(out)

    @classmethod
    def _decode(cls, flags: int, body: Reader, version: int | None) -> Connect:
        protocol_name = body.utf8()
        level = body.byte()
        if level not in VERSIONS:
            raise UnsupportedProtocolLevel(level)
        if protocol_name != PROTOCOL_NAME:
            raise protocol_error(f"protocol name {protocol_name!r} is not 'MQTT'")
        connect_flags = body.byte()
        if connect_flags & _RESERVED:
            raise malformed("reserved Connect Flags bit is set")
        will_qos = (connect_flags >> _WILL_QOS_SHIFT) & 0x03
        has_will = bool(connect_flags & _WILL)
        if will_qos == 3:
            raise malformed("Will QoS 3")
        if not has_will and (will_qos or connect_flags & _WILL_RETAIN):
            raise malformed("Will QoS or Will Retain set without the Will Flag")
        if level == MQTT_3_1_1 and connect_flags & _PASSWORD and not connect_flags & _USER_NAME:
            raise malformed("Password Flag set without the User Name Flag")
        keep_alive = body.u16()
        props = properties.decode(body, PacketType.CONNECT) if level == MQTT_5 else NO_PROPERTIES
        client_identifier = body.utf8()
        will = None
        if has_will:
            will_props = properties.decode(body, WILL) if level == MQTT_5 else NO_PROPERTIES
            will = Will(body.utf8(), body.binary(), will_qos, bool(connect_flags & _WILL_RETAIN), will_props)
        user_name = body.utf8() if connect_flags & _USER_NAME else None
        password = body.binary() if connect_flags & _PASSWORD else None
        body.expect_end("CONNECT payload")
        return cls(client_identifier, level, bool(connect_flags & _CLEAN_START), keep_alive, will, user_name,
                   password, props, protocol_name)


class UnsupportedProtocolLevel(PacketError):
    """A CONNECT of a protocol level this server does not speak: MQTT 5 answers CONNACK 0x84, 3.1.1
    CONNACK return code 0x01 (MQTT-3.1.2-2); ``level`` tells which one the client understands."""

    def __init__(self, level: int):
        super().__init__(ReasonCode.UNSUPPORTED_PROTOCOL_VERSION, f"unsupported protocol level {level}")
        self.level = level


@dataclass(frozen=True, slots=True)
class ConnAck(Packet):
    """``reason_code`` is MQTT 5's *Connect Reason Code*, 3.1.1's *Connect Return code*
    (:class:`~..reason_codes.ConnectReturnCode`)."""

    TYPE = PacketType.CONNACK
    session_present: bool = False
    reason_code: int = ReasonCode.SUCCESS
    properties: Properties = field(default=NO_PROPERTIES)

    def _encode(self, version: int) -> bytes:
        head = bytes((1 if self.session_present else 0, self.reason_code))
        if version == MQTT_5:
            return head + properties.encode(self.properties, PacketType.CONNACK)
        return head

    @classmethod
    def _decode(cls, flags: int, body: Reader, version: int) -> ConnAck:
        acknowledge_flags = body.byte()
        if acknowledge_flags & 0xFE:
            raise malformed("reserved Connect Acknowledge Flags bits are set")
        reason_code = body.byte()
        props = NO_PROPERTIES
        if version == MQTT_5:
            checked_reason_code(PacketType.CONNACK, reason_code)
            props = properties.decode(body, PacketType.CONNACK)
        body.expect_end("CONNACK")
        return cls(bool(acknowledge_flags), reason_code, props)


__all__ = ["PROTOCOL_NAME", "Will", "Connect", "ConnAck", "UnsupportedProtocolLevel"]
