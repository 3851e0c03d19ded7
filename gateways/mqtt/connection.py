"""A sans-I/O MQTT decoder for one connection: feed it bytes as they arrive, get packets back.

Like h11 it does no I/O and keeps only what the byte stream itself implies: the protocol level fixed by
the CONNECT, that CONNECT comes first and only once, which side may send which packet, and the limits
the server sets (maximum packet size, checked from the fixed header before the body is buffered,
maximum topic length), and MQTT 5 topic aliases, which belong to the network connection rather than the
session (spec 3.3.2.3.4). The first broken rule ends the stream with a :class:`ProtocolViolation` event
that says how to close; the session state machine (packet identifiers in flight, topic aliases, keep
alive) lives above it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Literal

from .errors import PacketError, protocol_error
from .fields import MAX_FIELD_LENGTH, MAX_VARINT, decode_varint
from .packet import FROM_CLIENT, FROM_SERVER, MQTT_3_1_1, MQTT_5, Packet, PacketType
from .packets import (
    ConnAck,
    Disconnect,
    Publish,
    Subscribe,
    decode_body,
)
from .packets.connect import UnsupportedProtocolLevel
from .reason_codes import ReasonCode, connect_return_code

#: The largest packet MQTT can frame: one type byte, four length bytes, the largest remaining length.
MAX_PACKET_SIZE = 1 + 4 + MAX_VARINT


@dataclass(frozen=True, slots=True)
class ProtocolViolation:
    """The peer broke the protocol: the connection must close, after sending :meth:`reply` if any.

    ``reason_code`` is the MQTT 5 reason code to close with; ``version`` the protocol level in force
    (``None`` when no CONNECT was read, so nothing may be sent); ``in_connect`` that the offending packet
    was the CONNECT itself, which MQTT 5 answers with a CONNACK rather than a DISCONNECT (MQTT-3.2.2-7).
    """

    reason_code: int
    message: str
    version: int | None
    in_connect: bool = False

    def reply(self) -> Packet | None:
        """The packet to send before closing. MQTT 3.1.1 has no DISCONNECT from the server, so there the
        connection just closes, except for a refused CONNECT that has a CONNACK return code."""
        if self.version == MQTT_5:
            return ConnAck(False, self.reason_code) if self.in_connect else Disconnect(self.reason_code)
        if self.version == MQTT_3_1_1 and self.in_connect:
            return_code = connect_return_code(self.reason_code)
            return None if return_code is None else ConnAck(False, return_code)
        return None


Event = Packet | ProtocolViolation


class Decoder:
    """Turns one connection's incoming bytes into packets.

    ``side`` is the side this decoder runs on: a ``"server"`` reads a client's packets and learns the
    protocol level from its CONNECT; a ``"client"`` reads a server's packets and must be given
    ``version``. After a :class:`ProtocolViolation` or a DISCONNECT, further bytes are ignored.

    ``topic_alias_maximum`` is the value this side announces (in CONNACK for a server): a PUBLISH with
    a Topic Alias above it is *Topic Alias invalid*; otherwise the alias is learnt or, with an empty
    topic name, resolved, so every PUBLISH event carries its full topic name.
    ``maximum_topic_length`` counts characters.
    """

    def __init__(self, side: Literal["server", "client"] = "server", *, version: int | None = None,
                 maximum_packet_size: int = MAX_PACKET_SIZE, maximum_topic_length: int = MAX_FIELD_LENGTH,
                 topic_alias_maximum: int = 0):
        if side == "client" and version is None:
            raise ValueError("a client-side decoder needs the protocol level it sent in its CONNECT")
        self.side = side
        self.version = version
        self.maximum_packet_size = maximum_packet_size
        self.maximum_topic_length = maximum_topic_length
        self.topic_alias_maximum = topic_alias_maximum
        self._topic_aliases: dict[int, str] = {}
        self._accepted = FROM_CLIENT if side == "server" else FROM_SERVER
        self._buffer = bytearray()
        self._finished = False

    @property
    def finished(self) -> bool:
        """True once the stream ended (a violation or a DISCONNECT): later bytes are not decoded."""
        return self._finished

    def feed(self, data: bytes) -> list[Event]:
        """The packets completed by ``data``, in order; a violation, if any, is the last event."""
        if self._finished:
            return []
        buffer = self._buffer
        buffer += data
        events: list[Event] = []
        pos = 0
        try:
            while not self._finished:
                header = decode_varint(buffer, pos + 1) if len(buffer) > pos + 1 else None
                if header is None:
                    break
                remaining_length, start = header
                end = start + remaining_length
                if end - pos > self.maximum_packet_size:
                    raise PacketError(ReasonCode.PACKET_TOO_LARGE,
                                      f"packet of {end - pos} bytes exceeds {self.maximum_packet_size}")
                if end > len(buffer):
                    break
                events.append(self._decode(buffer, pos, start, end))
                pos = end
        except PacketError as error:
            events.append(self._violation(error, buffer, pos))
        del buffer[:pos]
        return events

    def _decode(self, buffer: bytearray, pos: int, start: int, end: int) -> Packet:
        first_byte = buffer[pos]
        packet_type = first_byte >> 4
        if self.side == "server":
            if self.version is None and packet_type != PacketType.CONNECT:
                raise protocol_error("the first packet is not a CONNECT")
            if self.version is not None and packet_type == PacketType.CONNECT:
                raise protocol_error("a second CONNECT")
        if packet_type and packet_type not in self._accepted:
            raise protocol_error(f"{PacketType(packet_type).name} may not be sent by the {self._peer}")
        packet = decode_body(first_byte, buffer, start, end, self.version)
        # by type number, not isinstance: the packet classes are ABCs, whose isinstance misses cost a lookup
        if packet_type == PacketType.PUBLISH:
            if len(packet.topic_name) > self.maximum_topic_length:
                raise PacketError(ReasonCode.TOPIC_NAME_INVALID, "topic name longer than the maximum")
            if packet.properties.topic_alias is not None:
                packet = self._resolve_alias(packet)
        elif packet_type == PacketType.SUBSCRIBE or packet_type == PacketType.UNSUBSCRIBE:
            filters = ([s.topic_filter for s in packet.subscriptions] if isinstance(packet, Subscribe)
                       else packet.topic_filters)
            if any(len(f) > self.maximum_topic_length for f in filters):
                raise PacketError(ReasonCode.TOPIC_FILTER_INVALID, "topic filter longer than the maximum")
        elif packet_type == PacketType.CONNECT:
            self.version = packet.protocol_level
        elif packet_type == PacketType.DISCONNECT:
            self._finished = True
        return packet

    def _resolve_alias(self, packet: Publish) -> Publish:
        alias = packet.properties.topic_alias
        if alias > self.topic_alias_maximum:
            raise PacketError(ReasonCode.TOPIC_ALIAS_INVALID,
                              f"topic alias {alias} above the maximum {self.topic_alias_maximum}")
        if packet.topic_name:
            self._topic_aliases[alias] = packet.topic_name
            return packet
        topic_name = self._topic_aliases.get(alias)
        if topic_name is None:
            raise protocol_error(f"topic alias {alias} was never set on this connection")
        return dataclasses.replace(packet, topic_name=topic_name)

    @property
    def _peer(self) -> str:
        return "client" if self.side == "server" else "server"

    def _violation(self, error: PacketError, buffer: bytearray, pos: int) -> ProtocolViolation:
        self._finished = True
        version = self.version
        in_connect = version is None and len(buffer) > pos and buffer[pos] >> 4 == PacketType.CONNECT
        if in_connect:
            if isinstance(error, UnsupportedProtocolLevel):
                # A newer client understands an MQTT 5 CONNACK; an older one (3.1, level 3) a 3.1.1 one.
                version = MQTT_5 if error.level > MQTT_5 else MQTT_3_1_1
            else:
                version = _connect_level(buffer, pos)
        return ProtocolViolation(error.reason_code, str(error), version, in_connect and version is not None)


def _connect_level(buffer: bytearray, pos: int) -> int | None:
    """The protocol level of a CONNECT that failed to decode, if its bytes get that far and name one we
    speak: it decides whether the refusal can be a CONNACK."""
    try:
        header = decode_varint(buffer, pos + 1)
    except PacketError:
        return None
    if header is None:
        return None
    start = header[1]
    if start + 2 > len(buffer):
        return None
    level_at = start + 2 + (buffer[start] << 8 | buffer[start + 1])
    if level_at >= len(buffer) or buffer[level_at] not in (MQTT_3_1_1, MQTT_5):
        return None
    return buffer[level_at]


__all__ = ["MAX_PACKET_SIZE", "ProtocolViolation", "Event", "Decoder"]
