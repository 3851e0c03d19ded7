"""The address this host shows others: advertised by a broker without brokerIP1, in client ids, in UNIQ_KEYs."""

from __future__ import annotations

import socket


def local_ip() -> str:
    """A non-loopback IPv4 address of this host, else 127.0.0.1.

    A UDP socket's connect picks the outbound interface without sending anything.
    """
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.255.255.255", 1))
            ip = s.getsockname()[0]
            if ip and not ip.startswith("127."):
                return ip
    except OSError:
        pass
    return "127.0.0.1"
