"""The one place that reaches into Twisted's private transport state: a write that skips the reactor turn.

``transport.write`` always buffers: it appends to the transport's list, registers the socket for
writability and sends on the next reactor turn, which costs two epoll updates and a turn of latency
per answer. When nothing is queued before our bytes, sending them on the socket at once is what that
turn would do anyway. Knowing that nothing is queued means reading ``FileDescriptor.dataBuffer``,
``offset`` and ``_tempDataBuffer``, which are private; so this module checks at import that the
installed Twisted is a release it was verified against and has them, and otherwise every write goes
through the public ``transport.write``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import twisted
from twisted.internet import abstract, tcp

log = logging.getLogger("ferrymq.remoting")

#: Twisted major versions (calendar years) whose FileDescriptor write buffering is as this module relies
#: on: ``dataBuffer[offset:]`` then ``_tempDataBuffer`` hold what is still unsent, in that order (read in
#: 23.10, the dependency's floor, and 26.10). A newer release runs the public path until checked.
VERIFIED_TWISTED = range(23, 27)

_PRIVATE = ("dataBuffer", "offset", "_tempDataBuffer", "_tempDataLen")


class _NoReactor:
    """Lets the probe build a FileDescriptor without importing (and so installing) the global reactor."""


def _probe() -> str | None:
    """Why the direct write cannot be used with the installed Twisted, or None when it can."""
    if twisted.version.major not in VERIFIED_TWISTED:
        return (f"Twisted {twisted.__version__} is not a release the direct write was verified against "
                f"({VERIFIED_TWISTED.start}.x to {VERIFIED_TWISTED.stop - 1}.x)")
    probe = abstract.FileDescriptor(reactor=_NoReactor())
    missing = [name for name in _PRIVATE if not hasattr(probe, name)]
    if missing:
        return f"Twisted {twisted.__version__}'s FileDescriptor has no {', '.join(missing)}"
    if not issubclass(tcp.Connection, abstract.FileDescriptor):
        return f"Twisted {twisted.__version__}'s tcp.Connection is no FileDescriptor"
    return None


#: None when the direct write is in use; otherwise why not (every write then uses ``transport.write``).
DIRECT_WRITE_UNAVAILABLE = _probe()
if DIRECT_WRITE_UNAVAILABLE is not None:
    log.info("remoting writes go through transport.write: %s", DIRECT_WRITE_UNAVAILABLE)


def writer(transport: Any) -> Callable[[bytes], None]:
    """The function to write ``transport``'s bytes with: ``transport.write``, or for a TCP transport of a
    verified Twisted, one that first tries ``socket.send`` when the transport has nothing queued."""
    if DIRECT_WRITE_UNAVAILABLE is not None or not isinstance(transport, tcp.Connection):
        return transport.write
    t = transport
    sock = t.socket

    def write(data: bytes) -> None:
        if not t._tempDataBuffer and t.offset >= len(t.dataBuffer) and t.connected and not t.disconnecting:
            try:
                sent = sock.send(data)
            except OSError:  # EAGAIN, or a broken connection: the transport's own write finds out and reports it
                sent = 0
            if sent >= len(data):
                return
            data = data[sent:]
        t.write(data)

    return write


def prompt_writer(transport: Any) -> Callable[[bytes], None]:
    """:func:`writer` for a connection whose every write is a whole answer (or a turn's answers gathered):
    with TCP_NODELAY set first, so a small write does not wait for the peer to acknowledge the one before
    (Nagle), which a peer that only reads acknowledges after its delayed-ACK time. Apache's Netty ends set
    it on every connection."""
    set_no_delay = getattr(transport, "setTcpNoDelay", None)
    if set_no_delay is not None:
        try:
            set_no_delay(True)
        except OSError:  # the connection is gone already: its first write finds out
            pass
    return writer(transport)
