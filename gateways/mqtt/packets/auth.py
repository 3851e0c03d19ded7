"""AUTH (spec 3.15, MQTT 5 only): the steps of an extended authentication exchange, reason code
*Continue authentication* or *Re-authenticate*, the method and data in properties."""

from __future__ import annotations

from ..packet import MQTT_5, PacketType
from .disconnect import _ReasonAndProperties


class Auth(_ReasonAndProperties):
    __slots__ = ()
    TYPE = PacketType.AUTH

    def _encode(self, version: int) -> bytes:
        if version != MQTT_5:
            raise ValueError("AUTH exists in MQTT 5 only")
        return _ReasonAndProperties._encode(self, version)


__all__ = ["Auth"]
