"""The one exception the decoders raise: a packet that breaks the protocol, with the reason code to close with."""

from __future__ import annotations

from .reason_codes import ALLOWED, ReasonCode


class PacketError(ValueError):
    """Raised when received bytes break the protocol.

    ``reason_code`` is the MQTT 5 reason code the server closes the connection with (spec 4.13): mostly
    *Malformed Packet* (bytes that cannot be parsed as the spec says) or *Protocol Error* (bytes that parse
    but break a rule), sometimes a more precise code such as *Topic Name invalid*.
    """

    def __init__(self, reason_code: ReasonCode, message: str):
        super().__init__(message)
        self.reason_code = reason_code


def malformed(message: str) -> PacketError:
    return PacketError(ReasonCode.MALFORMED_PACKET, message)


def protocol_error(message: str) -> PacketError:
    return PacketError(ReasonCode.PROTOCOL_ERROR, message)


def checked_reason_code(packet_type, reason_code: int) -> int:
    """``reason_code`` if an MQTT 5 ``packet_type`` may carry it (:data:`~.reason_codes.ALLOWED`), else a
    *Protocol Error*: a code the spec does not define for the packet has no meaning to act on."""
    if reason_code not in ALLOWED[packet_type]:
        raise protocol_error(f"reason code 0x{reason_code:02X} is not defined for {packet_type.name}")
    return reason_code


__all__ = ["PacketError", "malformed", "protocol_error", "checked_reason_code"]
