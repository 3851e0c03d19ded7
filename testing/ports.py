"""Free ports for a server the test is about to start: below the kernel's ephemeral range when there is
room, so that no client's outgoing connection takes one before the server binds it, and never one this
process handed out before: a JVM binds its ports seconds after they are chosen, and a server started
beside it in that time must not be given the same ones."""

from __future__ import annotations

import random
import socket
from pathlib import Path

LOOPBACK = "127.0.0.1"
#: where to look when the ephemeral range leaves no room below it
FALLBACK_RANGE = (20000, 60000)

#: every port free_port returned (with its ``also_free`` neighbours) in this process
_handed_out: set[int] = set()


def free_port(host: str = LOOPBACK, *, also_free: tuple[int, ...] = ()) -> int:
    """A port P bindable on ``host`` ("" or 0.0.0.0: every interface) with P+d bindable too for each d in
    ``also_free`` (a broker also binds listenPort-2, its fast channel; Apache's listenPort+1 for HA), none
    of them returned before."""
    low, high = listen_range()
    rng = random.Random()
    for _ in range(200):
        port = rng.randrange(low, high)
        wanted = {port + d for d in (0, *also_free)}
        if not wanted & _handed_out and all(bindable(p, host) for p in wanted):
            _handed_out.update(wanted)
            return port
    raise RuntimeError(f"no free port (with {also_free} beside it) on {host} found in 200 tries")


def listen_range() -> tuple[int, int]:
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return FALLBACK_RANGE
    return (10000, ephemeral_low - 2) if ephemeral_low - 10000 >= 5000 else FALLBACK_RANGE


def bindable(port: int, host: str = LOOPBACK) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True
