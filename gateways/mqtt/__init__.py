"""MQTT 3.1.1 (protocol level 4) and 5.0 (level 5) for FerryMQ's MQTT gateway.

The codec is sans-I/O: :mod:`.packets` (one module per packet family, :func:`~.packets.encode`,
:func:`~.packets.decode_packet`), :mod:`.connection` (the streaming :class:`~.connection.Decoder` with
the protocol's connection rules and limits), :mod:`.properties` and :mod:`.reason_codes` (MQTT 5 tables),
:mod:`.topics` (filters, matching, shared subscriptions) and :mod:`.layouts` (the ``construct``
specification the hand-written codec is tested against).
"""

from .connection import Decoder, ProtocolViolation
from .errors import PacketError
from .packet import MQTT_3_1_1, MQTT_5, PacketType
from .packets import decode_packet, encode
from .properties import NO_PROPERTIES, Properties
from .reason_codes import ConnectReturnCode, ReasonCode

__all__ = ["Decoder", "ProtocolViolation", "PacketError", "MQTT_3_1_1", "MQTT_5", "PacketType", "encode",
           "decode_packet", "Properties", "NO_PROPERTIES", "ReasonCode", "ConnectReturnCode"]
