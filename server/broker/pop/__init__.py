"""POP consumption (:mod:`.service`) and its saved state (:mod:`.state`)."""

from .service import AckStatus, PopError, PoppedMessage, PopResult, PopService

__all__ = ["AckStatus", "PopError", "PopResult", "PopService", "PoppedMessage"]
