"""The Twisted transport: the only place that turns sockets into decoded commands and back."""

from .channel import DEFAULT_REQUEST_TIMEOUT, Channel, format_address
from .client import RemotingClient, split_address
from .dispatch import Handler, Processor, Route, dispatch, handles, not_supported, routes
from .errors import RemotingClosedError, RemotingConnectError, RemotingError, RemotingTimeoutError, ResponseCodeError
from .options import TransportOptions
from .protocol import RemotingProtocol
from .server import RemotingServer

__all__ = [
    "Channel",
    "DEFAULT_REQUEST_TIMEOUT",
    "Handler",
    "Processor",
    "RemotingClient",
    "RemotingClosedError",
    "RemotingConnectError",
    "RemotingError",
    "RemotingProtocol",
    "RemotingServer",
    "RemotingTimeoutError",
    "Route",
    "ResponseCodeError",
    "TransportOptions",
    "dispatch",
    "format_address",
    "handles",
    "not_supported",
    "routes",
    "split_address",
]
