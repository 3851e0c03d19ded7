"""MQTT 5 reason codes (spec 2.4) and the MQTT 3.1.1 CONNACK return codes (3.1.1 spec 3.2.2.3).

MQTT 5 gives one byte a different name depending on the packet it is in (0x00 is *Success*,
*Normal disconnection* and *Granted QoS 0*); :class:`ReasonCode` keeps every name, the first one being
the canonical member and the others aliases. Packet fields hold plain ``int`` so that a code this table
does not know still round-trips; compare them with these enums.
"""

from __future__ import annotations

from enum import IntEnum

from .packet import PacketType


class ReasonCode(IntEnum):
    SUCCESS = 0x00
    NORMAL_DISCONNECTION = 0x00
    GRANTED_QOS_0 = 0x00
    GRANTED_QOS_1 = 0x01
    GRANTED_QOS_2 = 0x02
    DISCONNECT_WITH_WILL_MESSAGE = 0x04
    NO_MATCHING_SUBSCRIBERS = 0x10
    NO_SUBSCRIPTION_EXISTED = 0x11
    CONTINUE_AUTHENTICATION = 0x18
    RE_AUTHENTICATE = 0x19
    UNSPECIFIED_ERROR = 0x80
    MALFORMED_PACKET = 0x81
    PROTOCOL_ERROR = 0x82
    IMPLEMENTATION_SPECIFIC_ERROR = 0x83
    UNSUPPORTED_PROTOCOL_VERSION = 0x84
    CLIENT_IDENTIFIER_NOT_VALID = 0x85
    BAD_USER_NAME_OR_PASSWORD = 0x86
    NOT_AUTHORIZED = 0x87
    SERVER_UNAVAILABLE = 0x88
    SERVER_BUSY = 0x89
    BANNED = 0x8A
    SERVER_SHUTTING_DOWN = 0x8B
    BAD_AUTHENTICATION_METHOD = 0x8C
    KEEP_ALIVE_TIMEOUT = 0x8D
    SESSION_TAKEN_OVER = 0x8E
    TOPIC_FILTER_INVALID = 0x8F
    TOPIC_NAME_INVALID = 0x90
    PACKET_IDENTIFIER_IN_USE = 0x91
    PACKET_IDENTIFIER_NOT_FOUND = 0x92
    RECEIVE_MAXIMUM_EXCEEDED = 0x93
    TOPIC_ALIAS_INVALID = 0x94
    PACKET_TOO_LARGE = 0x95
    MESSAGE_RATE_TOO_HIGH = 0x96
    QUOTA_EXCEEDED = 0x97
    ADMINISTRATIVE_ACTION = 0x98
    PAYLOAD_FORMAT_INVALID = 0x99
    RETAIN_NOT_SUPPORTED = 0x9A
    QOS_NOT_SUPPORTED = 0x9B
    USE_ANOTHER_SERVER = 0x9C
    SERVER_MOVED = 0x9D
    SHARED_SUBSCRIPTIONS_NOT_SUPPORTED = 0x9E
    CONNECTION_RATE_EXCEEDED = 0x9F
    MAXIMUM_CONNECT_TIME = 0xA0
    SUBSCRIPTION_IDENTIFIERS_NOT_SUPPORTED = 0xA1
    WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED = 0xA2

    @property
    def is_error(self) -> bool:
        """Codes of 0x80 and above report a failure (spec 2.4)."""
        return self >= 0x80


#: The reason codes each MQTT 5 packet may carry (spec 2.4, table 2-6); SUBACK's 0x01 and 0x02 are the
#: granted QoS 1 and 2.
ALLOWED = {
    PacketType.CONNACK: frozenset((0x00, 0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, 0x89, 0x8A, 0x8C,
                                   0x90, 0x95, 0x97, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9F)),
    PacketType.PUBACK: frozenset((0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)),
    PacketType.PUBREC: frozenset((0x00, 0x10, 0x80, 0x83, 0x87, 0x90, 0x91, 0x97, 0x99)),
    PacketType.PUBREL: frozenset((0x00, 0x92)),
    PacketType.PUBCOMP: frozenset((0x00, 0x92)),
    PacketType.SUBACK: frozenset((0x00, 0x01, 0x02, 0x80, 0x83, 0x87, 0x8F, 0x91, 0x97, 0x9E, 0xA1, 0xA2)),
    PacketType.UNSUBACK: frozenset((0x00, 0x11, 0x80, 0x83, 0x87, 0x8F, 0x91)),
    PacketType.DISCONNECT: frozenset((0x00, 0x04, 0x80, 0x81, 0x82, 0x83, 0x87, 0x89, 0x8B, 0x8D, 0x8E, 0x8F, 0x90,
                                      0x93, 0x94, 0x95, 0x96, 0x97, 0x98, 0x99, 0x9A, 0x9B, 0x9C, 0x9D, 0x9E, 0x9F,
                                      0xA0, 0xA1, 0xA2)),
    PacketType.AUTH: frozenset((0x00, 0x18, 0x19)),
}


class ConnectReturnCode(IntEnum):
    """The CONNACK return codes of MQTT 3.1.1; 3.1.1 has no other reason codes."""

    ACCEPTED = 0x00
    UNACCEPTABLE_PROTOCOL_VERSION = 0x01
    IDENTIFIER_REJECTED = 0x02
    SERVER_UNAVAILABLE = 0x03
    BAD_USER_NAME_OR_PASSWORD = 0x04
    NOT_AUTHORIZED = 0x05


#: The 3.1.1 return code a server sends for an MQTT 5 CONNACK reason code, so that one decision serves
#: both versions. Codes 3.1.1 cannot express map to ``None``: the server then closes without a CONNACK.
_CONNECT_RETURN_CODES = {
    ReasonCode.SUCCESS: ConnectReturnCode.ACCEPTED,
    ReasonCode.UNSUPPORTED_PROTOCOL_VERSION: ConnectReturnCode.UNACCEPTABLE_PROTOCOL_VERSION,
    ReasonCode.CLIENT_IDENTIFIER_NOT_VALID: ConnectReturnCode.IDENTIFIER_REJECTED,
    ReasonCode.SERVER_UNAVAILABLE: ConnectReturnCode.SERVER_UNAVAILABLE,
    ReasonCode.SERVER_BUSY: ConnectReturnCode.SERVER_UNAVAILABLE,
    ReasonCode.USE_ANOTHER_SERVER: ConnectReturnCode.SERVER_UNAVAILABLE,
    ReasonCode.SERVER_MOVED: ConnectReturnCode.SERVER_UNAVAILABLE,
    ReasonCode.BAD_USER_NAME_OR_PASSWORD: ConnectReturnCode.BAD_USER_NAME_OR_PASSWORD,
    ReasonCode.NOT_AUTHORIZED: ConnectReturnCode.NOT_AUTHORIZED,
    ReasonCode.BANNED: ConnectReturnCode.NOT_AUTHORIZED,
    ReasonCode.BAD_AUTHENTICATION_METHOD: ConnectReturnCode.NOT_AUTHORIZED,
}


def connect_return_code(reason_code: int) -> ConnectReturnCode | None:
    """The 3.1.1 CONNACK return code for an MQTT 5 CONNACK reason code (``None``: close without CONNACK)."""
    return _CONNECT_RETURN_CODES.get(reason_code)


__all__ = ["ReasonCode", "ALLOWED", "ConnectReturnCode", "connect_return_code"]
