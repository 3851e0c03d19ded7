"""The direct write: Twisted's private buffer state read in one place, checked at import, order kept.

A real ``tcp.Connection`` over a socket pair, driven by hand (``doWrite``) instead of by a reactor.
"""

from __future__ import annotations

import socket

import pytest
import twisted
from incremental import Version
from twisted.internet import abstract, tcp
from twisted.internet.protocol import Protocol
from twisted.internet.testing import StringTransport

from ferrymq.remoting import twisted_io


class HandDrivenReactor:
    """The IReactorFDSet part a transport's write buffering calls; the test runs doWrite() itself."""

    def __init__(self):
        self.writing: set = set()

    def addWriter(self, fd):  # noqa: N802 - Twisted's interface
        self.writing.add(fd)

    def removeWriter(self, fd):  # noqa: N802
        self.writing.discard(fd)


@pytest.fixture
def pair():
    ours, peer = socket.socketpair()
    peer.setblocking(False)
    reactor = HandDrivenReactor()
    transport = tcp.Connection(ours, Protocol(), reactor)
    transport.connected = 1
    yield transport, peer, reactor
    ours.close()
    peer.close()


def received(peer: socket.socket) -> bytes:
    chunks = []
    while True:
        try:
            chunk = peer.recv(1 << 20)
        except BlockingIOError:
            return b"".join(chunks)
        chunks.append(chunk)


def test_the_direct_write_is_in_use_with_the_installed_twisted():
    # Fails after a Twisted upgrade beyond VERIFIED_TWISTED: read FileDescriptor's buffering, then extend it.
    assert twisted_io.DIRECT_WRITE_UNAVAILABLE is None


def test_an_unverified_twisted_release_gets_the_public_write(monkeypatch):
    monkeypatch.setattr(twisted, "version", Version("Twisted", twisted_io.VERIFIED_TWISTED.stop, 1, 0))
    assert "is not a release the direct write was verified against" in twisted_io._probe()


def test_a_twisted_without_the_private_buffer_state_gets_the_public_write(monkeypatch):
    monkeypatch.delattr(abstract.FileDescriptor, "offset")
    assert "FileDescriptor has no offset" in twisted_io._probe()


def test_without_the_direct_write_every_transport_writes_publicly(monkeypatch, pair):
    transport, _peer, _reactor = pair
    monkeypatch.setattr(twisted_io, "DIRECT_WRITE_UNAVAILABLE", "test")
    assert twisted_io.writer(transport) == transport.write


def test_a_transport_that_is_not_tcp_gets_its_own_write():
    transport = StringTransport()
    write = twisted_io.writer(transport)
    assert write == transport.write
    write(b"abc")
    assert transport.value() == b"abc"


def test_with_nothing_queued_bytes_go_out_at_once(pair):
    transport, peer, reactor = pair
    twisted_io.writer(transport)(b"frame")
    assert received(peer) == b"frame"
    assert not transport._tempDataBuffer and not reactor.writing  # no reactor turn needed


def test_bytes_already_queued_in_the_transport_go_first(pair):
    transport, peer, reactor = pair
    transport.write(b"first-")  # buffered until the reactor reports writability
    twisted_io.writer(transport)(b"second")
    assert received(peer) == b""
    transport.doWrite()
    assert received(peer) == b"first-second"


def test_what_the_socket_does_not_take_is_queued_behind_in_order(pair):
    transport, peer, reactor = pair
    transport.socket.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    data = bytes(range(256)) * 16384  # 4 MiB: more than the socket buffers hold
    twisted_io.writer(transport)(data)
    assert transport._tempDataBuffer and reactor.writing  # the rest waits in the transport
    got = bytearray(received(peer))
    assert 0 < len(got) < len(data)
    while len(got) < len(data):
        transport.doWrite()
        got += received(peer)
    assert bytes(got) == data


def test_a_disconnecting_transport_is_left_to_its_own_write(pair):
    transport, peer, _reactor = pair
    transport.disconnecting = True
    twisted_io.writer(transport)(b"late")
    assert received(peer) == b"" and transport._tempDataBuffer == [b"late"]
