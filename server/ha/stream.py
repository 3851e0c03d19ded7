"""The socket side of an HA connection, the same on master and slave."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ferrymq.remoting import twisted_io


def stream_writer(transport: Any) -> Callable[[bytes], None]:
    """Set up a new HA connection; the function to write to it.

    TCP_NODELAY, as Apache sets on both ends: a slave's 8-byte report (what a SYNC_MASTER's senders wait
    for) must not sit behind Nagle's algorithm. The writer sends at once when nothing is queued
    (:func:`ferrymq.remoting.twisted_io.writer`): a transfer frame or a report leaves in the reactor turn
    that made it, not in the next one, and costs no epoll updates."""
    set_no_delay = getattr(transport, "setTcpNoDelay", None)
    if set_no_delay is not None:
        set_no_delay(True)
    return twisted_io.writer(transport)
