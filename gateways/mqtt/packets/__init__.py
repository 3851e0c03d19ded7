"""Every MQTT control packet, and the fixed header around them (spec 2.1).

:func:`encode` turns a packet into bytes for a protocol level, :func:`decode_packet` reads one whole
packet; the streaming, connection-aware decoder is :class:`~ferrymq.gateways.mqtt.connection.Decoder`.
What MQTT 3.1.1 has no field for (properties; the reason codes of acknowledgements, UNSUBACK and
DISCONNECT) is left out when encoding for 3.1.1, so a server builds one packet for clients of both
versions. What would change the meaning (AUTH, MQTT 5 subscription options) is a ``ValueError``.
"""

from __future__ import annotations

from ..errors import malformed
from ..fields import Reader, decode_varint, encode_varint
from ..packet import FIXED_FLAGS, MQTT_5, Packet, PacketType
from .auth import Auth
from .connect import ConnAck, Connect, UnsupportedProtocolLevel, Will
from .disconnect import Disconnect
from .ping import PingReq, PingResp
from .publish import PubAck, PubComp, Publish, PubRec, PubRel
from .subscribe import SubAck, Subscribe, Subscription, UnsubAck, Unsubscribe

#: The dataclass of each packet type.
PACKET_CLASSES: dict[PacketType, type[Packet]] = {cls.TYPE: cls for cls in (
    Connect, ConnAck, Publish, PubAck, PubRec, PubRel, PubComp, Subscribe, SubAck, Unsubscribe, UnsubAck,
    PingReq, PingResp, Disconnect, Auth)}


def encode(packet: Packet, version: int) -> bytes:
    """The packet's bytes for protocol level ``version`` (4 or 5); ``ValueError`` if it cannot be expressed."""
    body = packet._encode(version)
    first, size = (packet.TYPE << 4) | packet.fixed_flags(), len(body)
    if size < 0x4000:  # a remaining length of one or two bytes, as every packet but a large PUBLISH has
        return (bytes((first, size)) if size < 0x80 else bytes((first, size & 0x7F | 0x80, size >> 7))) + body
    return bytes((first,)) + encode_varint(size) + body


def decode_body(first_byte: int, data, start: int, end: int, version: int) -> Packet:
    """The packet whose fixed header's first byte is ``first_byte`` and whose body is ``data[start:end]``.

    Reserved packet types (0, and 15 before MQTT 5) and fixed header flags other than the spec's are
    *Malformed Packet* (MQTT-2.1.3-1); ``version`` is ignored by CONNECT, which names its own.
    """
    packet_type, flags = first_byte >> 4, first_byte & 0x0F
    if packet_type == 0 or (packet_type == PacketType.AUTH and version != MQTT_5):
        raise malformed(f"reserved packet type {packet_type}")
    # the tables are keyed by PacketType, an IntEnum: the plain int finds the same entries
    if packet_type != PacketType.PUBLISH and flags != FIXED_FLAGS[packet_type]:
        raise malformed(f"reserved fixed header flags {flags:04b} on {PacketType(packet_type).name}")
    return PACKET_CLASSES[packet_type]._decode(flags, Reader(data, start, end), version)


def decode_packet(data: bytes, version: int) -> Packet:
    """Exactly one whole packet (fixed header included); anything short or left over is *Malformed Packet*."""
    if not data:
        raise malformed("empty packet")
    header = decode_varint(data, 1)
    if header is None:
        raise malformed("packet ends inside the remaining length")
    remaining_length, start = header
    if start + remaining_length != len(data):
        raise malformed(f"remaining length {remaining_length} but {len(data) - start} bytes follow")
    return decode_body(data[0], data, start, len(data), version)


__all__ = [
    "PACKET_CLASSES", "encode", "decode_body", "decode_packet", "Packet", "PacketType",
    "Connect", "ConnAck", "Will", "UnsupportedProtocolLevel", "Publish", "PubAck", "PubRec", "PubRel",
    "PubComp", "Subscribe", "SubAck", "Subscription", "Unsubscribe", "UnsubAck", "PingReq", "PingResp",
    "Disconnect", "Auth",
]
