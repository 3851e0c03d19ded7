"""prompt_writer: a connection whose writes are whole answers runs without Nagle's algorithm."""

from __future__ import annotations

import socket

from twisted.internet import protocol

from ferrymq.remoting.twisted_io import prompt_writer


class _Greeter(protocol.Protocol):
    """Writes ``hello`` with the writer prompt_writer gives, and keeps its transport for the test."""

    def connectionMade(self) -> None:
        self.factory.made.append(self.transport)
        prompt_writer(self.transport)(b"hello")


def test_the_connection_gets_tcp_nodelay_and_the_writes_arrive(rt):
    from twisted.internet import reactor

    factory = protocol.Factory.forProtocol(_Greeter)
    factory.made = []
    port = rt.call(reactor.listenTCP, 0, factory, interface="127.0.0.1")
    try:
        with socket.create_connection(("127.0.0.1", port.getHost().port), timeout=5) as sock:
            assert sock.recv(5) == b"hello"
            (transport,) = factory.made
            nodelay = rt.call(lambda: transport.getHandle().getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            assert nodelay != 0
    finally:
        rt.call(port.stopListening)
