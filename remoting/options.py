"""Connection-level settings shared by the server and the client side of the transport."""

from __future__ import annotations

from dataclasses import dataclass

from ferrymq.wire.frame import DEFAULT_MAX_FRAME_SIZE


@dataclass(slots=True)
class TransportOptions:
    """Limits applied to every connection.

    Defaults follow Apache's Netty settings: 16 MiB frames (``com.rocketmq.remoting.frameMaxLength``),
    120 s idle close (``serverChannelMaxIdleTimeSeconds``), and Netty's 64 KiB write-buffer high-water mark
    (Apache leaves ``writeBufferHighWaterMark`` at 0 = Netty's default). The connection and in-flight
    limits Apache does not have are off (0) here; the server configs set them.
    """

    max_frame_size: int = DEFAULT_MAX_FRAME_SIZE
    #: Close a connection with no read or write for this many seconds; 0 disables.
    idle_timeout: float = 120.0
    #: Stop reading a connection once this many bytes wait unsent to it; resume when drained.
    write_high_water: int = 64 * 1024
    #: How long a graceful shutdown waits for in-flight requests before closing anyway.
    shutdown_grace: float = 30.0
    #: Close connections accepted while this many are open (server side only); 0 = no limit.
    max_connections: int = 0
    #: Answer SYSTEM_BUSY to a request arriving while this many requests of its connection are
    #: unanswered (a held long-poll pull counts); 0 = no limit.
    max_inflight_per_connection: int = 0
