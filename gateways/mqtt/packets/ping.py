"""PINGREQ and PINGRESP (spec 3.12, 3.13): keep-alive, a fixed header and nothing else."""

from __future__ import annotations

from dataclasses import dataclass

from ..fields import Reader
from ..packet import Packet, PacketType


@dataclass(frozen=True, slots=True)
class _Empty(Packet):
    def _encode(self, version: int) -> bytes:
        return b""

    @classmethod
    def _decode(cls, flags: int, body: Reader, version: int):
        body.expect_end(cls.TYPE.name)
        return cls()


class PingReq(_Empty):
    __slots__ = ()
    TYPE = PacketType.PINGREQ


class PingResp(_Empty):
    __slots__ = ()
    TYPE = PacketType.PINGRESP


__all__ = ["PingReq", "PingResp"]
