"""A load balancer's part in the PROXY protocol, for the tests: a loopback port relaying each connection to a
server, byte for byte, after writing a PROXY protocol header first (as HAProxy's ``send-proxy`` and
``send-proxy-v2`` do). The header is built by the ``proxy-protocol`` library from the client address it is
to name."""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from ipaddress import ip_address

from proxyprotocol.result import ProxyResult, ProxyResultIPv4, ProxyResultIPv6, ProxyResultLocal
from proxyprotocol.v1 import ProxyProtocolV1
from proxyprotocol.v2 import ProxyProtocolV2

LOOPBACK = "127.0.0.1"


def header(version: int, source: tuple[str, int] | None, dest: tuple[str, int] = ("192.0.2.1", 8081)) -> bytes:
    """A PROXY protocol ``version`` (1 or 2) header naming ``source`` as the client; None: v2's LOCAL command
    (a connection of the balancer's own)."""
    result: ProxyResult
    if source is None:
        result = ProxyResultLocal()
    else:
        host = ip_address(source[0])
        kind = ProxyResultIPv4 if host.version == 4 else ProxyResultIPv6
        dest_host = ip_address(dest[0]) if ip_address(dest[0]).version == host.version else ip_address("::1")
        result = kind((host, source[1]), (dest_host, dest[1]), protocol=socket.SOCK_STREAM)
    return (ProxyProtocolV1() if version == 1 else ProxyProtocolV2()).pack(result)


@contextlib.contextmanager
def relay(target: str, first: bytes) -> Iterator[str]:
    """A loopback port that sends ``first`` then relays each connection to ``target`` (``host:port``); its
    ``host:port``. Connections still open are cut when the block ends."""
    host, port = target.rsplit(":", 1)
    listener = socket.create_server((LOOPBACK, 0))
    sockets: list[socket.socket] = [listener]
    stopping = threading.Event()

    def pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (source, sink):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def accept() -> None:
        while not stopping.is_set():
            try:
                client, _ = listener.accept()
            except OSError:
                return
            server = socket.create_connection((host, int(port)))
            sockets.extend((client, server))
            server.sendall(first)
            threading.Thread(target=pump, args=(client, server), daemon=True).start()
            threading.Thread(target=pump, args=(server, client), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()
    try:
        yield f"{LOOPBACK}:{listener.getsockname()[1]}"
    finally:
        stopping.set()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
