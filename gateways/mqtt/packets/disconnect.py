"""DISCONNECT (spec 3.14): in 3.1.1 a bare fixed header sent by the client; in MQTT 5 either side sends it
with a reason code and properties, both left out when they are *Normal disconnection* and empty."""

from __future__ import annotations

from dataclasses import dataclass

from .. import properties
from ..errors import checked_reason_code
from ..fields import Reader
from ..packet import MQTT_5, Packet, PacketType, optional_tail
from ..properties import NO_PROPERTIES, Properties
from ..reason_codes import ReasonCode


@dataclass(frozen=True, slots=True)
class _ReasonAndProperties(Packet):
    """A reason code then properties, each optional on the wire (DISCONNECT and AUTH, MQTT 5)."""

    reason_code: int = ReasonCode.SUCCESS
    properties: Properties = NO_PROPERTIES

    def _encode(self, version: int) -> bytes:
        if version != MQTT_5:
            return b""
        with_reason, with_properties = optional_tail(self.reason_code, self.properties != NO_PROPERTIES)
        return ((bytes((self.reason_code,)) if with_reason else b"")
                + (properties.encode(self.properties, self.TYPE) if with_properties else b""))

    @classmethod
    def _decode(cls, flags: int, body: Reader, version: int):
        reason_code = ReasonCode.SUCCESS
        props = NO_PROPERTIES
        if version == MQTT_5 and body.remaining:
            reason_code = checked_reason_code(cls.TYPE, body.byte())
            if body.remaining:
                props = properties.decode(body, cls.TYPE)
        body.expect_end(cls.TYPE.name)
        return cls(reason_code, props)


class Disconnect(_ReasonAndProperties):
    __slots__ = ()
    TYPE = PacketType.DISCONNECT


__all__ = ["Disconnect"]
