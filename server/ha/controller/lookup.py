"""The controllers a broker talks to, from controllerAddr as Apache's broker reads it.

Without fetchControllerAddrByDnsLookup the key lists the controllers, ``host:port;host:port``. With it the
key is one domain name and a port, ``name:port``: each IPv4 address the name resolves to (each A record) is
one controller at that port. Apache's broker resolves the name when it starts and every two minutes after
(:data:`LOOKUP_PERIOD_MS`), so a controller added to or removed from the name's records is picked up
without a restart; a lookup that fails or finds nothing keeps the controllers already known.
"""

from __future__ import annotations

import socket

#: how often the name is resolved again (Apache's broker: every 2 minutes)
LOOKUP_PERIOD_MS = 120_000


class ControllerLookupError(Exception):
    """controllerAddr's name does not resolve to any IPv4 address."""


def listed(controller_addr: str) -> list[str]:
    """The controllers a ``host:port;host:port`` list names."""
    return [a.strip() for a in controller_addr.split(";") if a.strip()]


def resolve(controller_addr: str) -> list[str]:
    """``ip:port`` for each IPv4 address ``name:port`` resolves to, in the resolver's order. Blocks: call it
    off the reactor thread."""
    host, _, port = controller_addr.strip().rpartition(":")
    try:
        found = socket.getaddrinfo(host, int(port), socket.AF_INET, socket.SOCK_STREAM)
    except (OSError, UnicodeError) as exc:
        why = getattr(exc, "strerror", None) or str(exc)
        raise ControllerLookupError(f"controllerAddr {controller_addr!r}: the name {host!r} does not resolve "
                                    f"({why}); fetchControllerAddrByDnsLookup=true takes a domain name whose "
                                    "A records are the controllers") from None
    addrs = list(dict.fromkeys(f"{info[4][0]}:{port}" for info in found))
    if not addrs:
        raise ControllerLookupError(f"controllerAddr {controller_addr!r}: the name {host!r} has no IPv4 address")
    return addrs
