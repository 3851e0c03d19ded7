"""The SDK's transport is the server's: one connection pool, the same framing and correlation code.

``RemotingClient().invoke("host:port", cmd, timeout)`` returns a Deferred of the response;
``invoke_oneway`` writes without waiting. Requests the server pushes on these connections go to the
``processor`` given to the client (a table code -> handler(cmd, channel)).
"""

from server.remoting import (
    RemotingClient,
    RemotingClosedError,
    RemotingConnectError,
    RemotingError,
    RemotingTimeoutError,
    TransportOptions,
)

__all__ = [
    "RemotingClient",
    "RemotingClosedError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingTimeoutError",
    "TransportOptions",
]
