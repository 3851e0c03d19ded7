"""What every MQTT control packet shares: its type, the fixed header's flags, and the base class.

Each packet family module (:mod:`.packets.connect`, :mod:`.packets.publish`, ...) defines frozen
dataclasses that derive from :class:`Packet` and implement ``_encode``/``_decode`` for the packet's
body; :mod:`.packets` adds the fixed header and dispatches on the type.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from enum import IntEnum
from typing import TYPE_CHECKING, ClassVar

if TYPE_CHECKING:
    from .fields import Reader

#: Protocol levels (the CONNECT packet's *Protocol Level* byte) this codec speaks.
MQTT_3_1_1 = 4
MQTT_5 = 5
VERSIONS = (MQTT_3_1_1, MQTT_5)


class PacketType(IntEnum):
    """The four high bits of the first byte (spec 2.1.2); 0 is reserved, 15 (AUTH) exists in MQTT 5 only."""

    CONNECT = 1
    CONNACK = 2
    PUBLISH = 3
    PUBACK = 4
    PUBREC = 5
    PUBREL = 6
    PUBCOMP = 7
    SUBSCRIBE = 8
    SUBACK = 9
    UNSUBSCRIBE = 10
    UNSUBACK = 11
    PINGREQ = 12
    PINGRESP = 13
    DISCONNECT = 14
    AUTH = 15


#: The fixed header flags of every type but PUBLISH are fixed by the spec (2.1.3); anything else is
#: *Malformed Packet* (MQTT-2.1.3-1).
FIXED_FLAGS = {t: 0b0010 if t in (PacketType.PUBREL, PacketType.SUBSCRIBE, PacketType.UNSUBSCRIBE) else 0
               for t in PacketType if t is not PacketType.PUBLISH}

#: Which side may send each type (spec 2.1.2): receiving one from the wrong side is a *Protocol Error*.
_BOTH = {PacketType.PUBLISH, PacketType.PUBACK, PacketType.PUBREC, PacketType.PUBREL, PacketType.PUBCOMP,
         PacketType.DISCONNECT, PacketType.AUTH}
FROM_CLIENT = frozenset(_BOTH | {PacketType.CONNECT, PacketType.SUBSCRIBE, PacketType.UNSUBSCRIBE,
                                 PacketType.PINGREQ})
FROM_SERVER = frozenset(_BOTH | {PacketType.CONNACK, PacketType.SUBACK, PacketType.UNSUBACK,
                                 PacketType.PINGRESP})


def optional_tail(reason_code: int, has_properties: bool) -> tuple[bool, bool]:
    """Whether an MQTT 5 acknowledgement, DISCONNECT or AUTH writes its reason code and its properties.

    Both are optional on the wire (a remaining length that ends before them means *Success* and no
    properties, spec 3.4.2.1, 3.14.2.1, 3.15.2.1); they are written only when they say something.
    """
    return reason_code != 0 or has_properties, has_properties


class Packet(ABC):
    """Base of the packet dataclasses; ``TYPE`` names the packet, the two hooks code its body."""

    __slots__ = ()
    TYPE: ClassVar[PacketType]

    def fixed_flags(self) -> int:
        """The four low bits of the first byte."""
        return FIXED_FLAGS[self.TYPE]

    @abstractmethod
    def _encode(self, version: int) -> bytes:
        """The variable header and payload for ``version``."""

    @classmethod
    @abstractmethod
    def _decode(cls, flags: int, body: Reader, version: int) -> Packet:
        """The packet from its fixed header flags and a reader over the rest (already size-checked)."""


__all__ = ["MQTT_3_1_1", "MQTT_5", "VERSIONS", "PacketType", "FIXED_FLAGS", "FROM_CLIENT", "FROM_SERVER",
           "optional_tail", "Packet"]
