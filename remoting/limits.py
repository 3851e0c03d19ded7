"""What the connection limits refused, by reason: the counts ``/metrics`` reports.

Each reason names the limit an operator would tune (docs/operations.md maps them to config keys). The
counts are plain ints changed on the reactor thread and read there at scrape time.
"""

from __future__ import annotations

#: A connection closed at accept: ``maxConnections`` were already open.
TOO_MANY_CONNECTIONS = "too_many_connections"
#: A connection closed for a length field above ``frameMaxLength``.
FRAME_TOO_LARGE = "frame_too_large"
#: A connection closed for bytes that are no frame (a length below 4, a bad header length or codec).
BAD_FRAME = "bad_frame"
#: A connection closed after ``serverChannelMaxIdleTimeSeconds`` without a byte either way.
IDLE = "idle"
#: A request answered SYSTEM_BUSY: ``maxInFlightRequestsPerConnection`` were already unanswered.
TOO_MANY_IN_FLIGHT = "too_many_in_flight"

REASONS = (TOO_MANY_CONNECTIONS, FRAME_TOO_LARGE, BAD_FRAME, IDLE, TOO_MANY_IN_FLIGHT)

#: Apache's answer to a request its processor's thread pool queue has no room for.
BUSY_REMARK = "[OVERLOAD]system busy, start flow control for a while"


class Refusals:
    """Counts per reason, all present from the start (a counter that appears late hides its zero)."""

    __slots__ = ("counts",)

    def __init__(self) -> None:
        self.counts: dict[str, int] = dict.fromkeys(REASONS, 0)

    def count(self, reason: str) -> None:
        self.counts[reason] += 1
