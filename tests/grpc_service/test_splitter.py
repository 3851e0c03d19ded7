"""The permissive gRPC port's splitter (:mod:`ferrymq.server.grpc.splitter`) between two stand-ins for grpcio's
inner ports: which port a connection reaches by its first byte, the client's address its inner end is known
by, whole exchanges in both directions, and nothing left open by clients that send garbage, leave early or
stay silent, or by an inner port that refuses."""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time

from ferrymq.server.grpc.splitter import ORIGINS, Splitter, grpc_peer

#: the start of a TLS ClientHello: a handshake record (0x16), TLS 1.0 record version, a length
HELLO = bytes([0x16, 0x03, 0x01, 0x00, 0x05]) + b"hello"
#: the HTTP/2 connection preface every plain gRPC client sends first
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Inner:
    """A stand-in for one of grpcio's inner ports: answers a connection's first bytes with its name before
    them and echoes the rest; ``accepts`` tells whether first bytes are its protocol's (else it closes the
    connection, as grpcio's HTTP/2 or TLS server does)."""

    def __init__(self, name: str, accepts):
        self.name = name
        self.accepts = accepts
        self.peers: list[tuple] = []
        self.open = 0
        self.port = 0
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> Inner:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.open += 1
        self.peers.append(writer.get_extra_info("peername"))
        try:
            first = await reader.read(65536)
            if first and self.accepts(first):
                writer.write(self.name.encode() + b":" + first)
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()
            self.open -= 1

    def close(self) -> None:
        self._server.close()


@contextlib.asynccontextmanager
async def splitting(timeout: float = 30.0, plain_port: int | None = None):
    """A splitter on a free loopback port in front of a plain and a TLS stand-in: (splitter, port, plain, tls)."""
    plain = await Inner("plain", lambda data: PREFACE.startswith(data[:len(PREFACE)])).start()
    tls = await Inner("tls", lambda data: data[0] == 0x16).start()
    splitter = Splitter(plain.port if plain_port is None else plain_port, tls.port, timeout)
    port = await splitter.listen("127.0.0.1", 0)
    try:
        yield splitter, port, plain, tls
    finally:
        await splitter.close()
        plain.close()
        tls.close()


async def until(condition, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "not reached in time"
        await asyncio.sleep(0.01)


async def exchange(port: int, first: bytes) -> bytes:
    """What the port answers a client sending ``first``; empty when it closes the connection."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(first)
    try:
        return await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()


def test_a_tls_hello_reaches_the_tls_port_and_a_plain_preface_the_plain_port():
    async def run():
        async with splitting() as (splitter, port, plain, tls):
            assert await exchange(port, HELLO) == b"tls:" + HELLO
            assert await exchange(port, PREFACE) == b"plain:" + PREFACE
            await until(lambda: not splitter.open and plain.open == tls.open == 0)

    asyncio.run(run())


def test_the_inner_end_is_known_by_the_clients_address_while_open():
    async def run():
        async with splitting() as (splitter, port, plain, _tls):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.write(PREFACE)
            assert await reader.readexactly(len(b"plain:" + PREFACE))
            [inner_end] = plain.peers
            assert ORIGINS[grpc_peer(inner_end)] == grpc_peer(writer.get_extra_info("sockname"))
            writer.close()
            await until(lambda: grpc_peer(inner_end) not in ORIGINS and not splitter.open)

    asyncio.run(run())


def test_a_large_exchange_goes_through_whole_both_ways():
    async def run():
        async with splitting() as (splitter, port, _plain, _tls):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            body = bytes(range(256)) * (16 * 1024)  # 4 MiB, far above the transports' write buffers
            reading = asyncio.ensure_future(reader.readexactly(len(b"plain:") + len(PREFACE) + len(body)))
            writer.write(PREFACE + body)
            await writer.drain()
            assert await asyncio.wait_for(reading, 30) == b"plain:" + PREFACE + body
            writer.close()
            await until(lambda: not splitter.open)

    asyncio.run(run())


def test_garbage_is_refused_by_the_plain_port_and_nothing_stays_open():
    async def run():
        async with splitting() as (splitter, port, plain, tls):
            assert await exchange(port, b"\x00\xffGET / HTTP/1.1\r\n\r\n") == b""
            assert await exchange(port, b"\x16not a handshake") == b"tls:\x16not a handshake"
            await until(lambda: not splitter.open and plain.open == tls.open == 0)
            assert (len(plain.peers), len(tls.peers)) == (1, 1)

    asyncio.run(run())


def test_clients_leaving_early_leave_nothing_open():
    async def run():
        async with splitting() as (splitter, port, plain, tls):
            before = dict(ORIGINS)
            silent = socket.create_connection(("127.0.0.1", port))
            silent.close()  # before any byte
            half = socket.create_connection(("127.0.0.1", port))
            half.sendall(HELLO[:2])  # in the middle of the handshake's first record
            half.close()
            reset = socket.create_connection(("127.0.0.1", port))
            reset.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            reset.sendall(PREFACE)
            reset.close()  # a reset, while the splice is being made or just made
            await until(lambda: not splitter.open and plain.open == tls.open == 0)
            assert ORIGINS == before

    asyncio.run(run())


def test_a_silent_client_is_cut_after_the_timeout():
    async def run():
        async with splitting(timeout=0.2) as (splitter, port, plain, tls):
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            assert await asyncio.wait_for(reader.read(10), 5) == b""
            writer.close()
            await until(lambda: not splitter.open)
            assert plain.peers == tls.peers == []

    asyncio.run(run())


def test_an_inner_port_that_refuses_closes_the_client():
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    refusing = closed.getsockname()[1]  # bound, never listening: connections to it are refused
    try:
        async def run():
            async with splitting(plain_port=refusing) as (splitter, port, _plain, _tls):
                assert await exchange(port, PREFACE) == b""
                await until(lambda: not splitter.open)

        asyncio.run(run())
    finally:
        closed.close()


def test_peers_are_written_as_grpcio_writes_them():
    assert grpc_peer(("10.0.0.1", 5000)) == "ipv4:10.0.0.1:5000"
    assert grpc_peer(("::1", 5000, 0, 0)) == "ipv6:[::1]:5000"
    assert grpc_peer(("::ffff:10.0.0.1", 5000, 0, 0)) == "ipv4:10.0.0.1:5000"


def test_a_proxy_protocol_header_names_the_client_and_is_not_passed_on():
    """A v1 header before a plain preface, a v2 one before a TLS hello (each in two pieces): the inner port
    gets what follows the header, and the client is known by the header's source address."""
    v1 = b"PROXY TCP4 10.20.30.40 192.0.2.1 4567 8081\r\n"
    v2 = (b"\r\n\r\n\x00\r\nQUIT\n\x21\x21\x00\x24" + bytes.fromhex("20010db8000000000000000000000007")
          + bytes(16) + (4569).to_bytes(2, "big") + (8081).to_bytes(2, "big"))

    async def run():
        async with splitting() as (splitter, port, plain, tls):
            for header, first, inner, name, origin in ((v1, PREFACE, plain, b"plain:", "ipv4:10.20.30.40:4567"),
                                                       (v2, HELLO, tls, b"tls:", "ipv6:[2001:db8::7]:4569")):
                reader, writer = await asyncio.open_connection("127.0.0.1", port)
                writer.write(header[:9])
                await writer.drain()
                await asyncio.sleep(0.05)
                writer.write(header[9:] + first)
                assert await asyncio.wait_for(reader.readexactly(len(name + first)), 5) == name + first
                assert ORIGINS[grpc_peer(inner.peers[-1])] == origin
                writer.close()
            await until(lambda: not splitter.open)

    asyncio.run(run())


def test_a_bad_proxy_protocol_header_closes_the_connection_before_any_splice(caplog):
    async def run():
        async with splitting() as (splitter, port, plain, tls):
            assert await exchange(port, b"PROXY TCP4 10.20.30.40 nowhere 4567 8081\r\n" + PREFACE) == b""
            await until(lambda: not splitter.open)
            assert plain.peers == tls.peers == []

    asyncio.run(run())
    assert "bad PROXY protocol v1 header" in caplog.text
