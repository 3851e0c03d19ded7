"""Framing the PROXY protocol header at a connection's start (:mod:`ferrymq.server.grpc.proxy_header`): the
headers HAProxy writes (v1 text, v2 binary: IPv4, IPv6, LOCAL, UNKNOWN), found whole however the bytes
arrive, with the client they name; a connection without one left alone; broken ones refused."""

from __future__ import annotations

import pytest

pytest.importorskip("proxyprotocol", reason="the grpc extra is not installed")

from ferrymq.server.grpc.proxy_header import NO_HEADER, BadHeader, Header, read  # noqa: E402

V1 = b"PROXY TCP4 10.20.30.40 192.0.2.1 4567 8081\r\n"
V1_IPV6 = b"PROXY TCP6 2001:db8::7 2001:db8::1 4567 8081\r\n"
SIGNATURE = b"\r\n\r\n\x00\r\nQUIT\n"
#: v2, PROXY command, TCP over IPv4: 10.20.30.41:4568 -> 192.0.2.1:8081
V2 = SIGNATURE + b"\x21\x11\x00\x0c" + bytes([10, 20, 30, 41, 192, 0, 2, 1]) + (4568).to_bytes(2, "big") + \
    (8081).to_bytes(2, "big")
#: v2, PROXY command, TCP over IPv6: [2001:db8::7]:4569 -> [2001:db8::1]:8081
V2_IPV6 = SIGNATURE + b"\x21\x21\x00\x24" + bytes.fromhex("20010db8000000000000000000000007") + \
    bytes.fromhex("20010db8000000000000000000000001") + (4569).to_bytes(2, "big") + (8081).to_bytes(2, "big")
#: v2, LOCAL command (a balancer's own health check), no address
V2_LOCAL = SIGNATURE + b"\x20\x00\x00\x00"
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@pytest.mark.parametrize("header, source", [
    (V1, ("10.20.30.40", 4567)), (V1_IPV6, ("2001:db8::7", 4567)), (V2, ("10.20.30.41", 4568)),
    (V2_IPV6, ("2001:db8::7", 4569)), (V2_LOCAL, None), (b"PROXY UNKNOWN\r\n", None),
])
def test_a_header_is_framed_with_the_client_it_names_whatever_follows(header, source):
    assert read(header + PREFACE) == Header(len(header), source)
    assert read(header) == Header(len(header), source)


@pytest.mark.parametrize("header", [V1, V2, V2_IPV6])
def test_a_header_arriving_in_pieces_is_waited_for(header):
    for cut in range(1, len(header)):
        assert read(header[:cut]) is None, cut


@pytest.mark.parametrize("first", [PREFACE, PREFACE[:1], b"\x16\x03\x01\x00\x05hello", b"GET / HTTP/1.1\r\n"])
def test_a_connection_without_a_header_has_none(first):
    expected = None if first == PREFACE[:1] else NO_HEADER  # "P" may start "PROXY ": more bytes tell
    assert read(first) == expected
    assert read(PREFACE) == NO_HEADER


@pytest.mark.parametrize("bad", [
    b"PROXY TCP4 10.20.30.40 192.0.2.1 4567\r\n",  # a field missing
    b"PROXY TCP4 not-an-ip 192.0.2.1 4567 8081\r\n",
    b"PROXY TCP4 10.20.30.40 192.0.2.1 99999 8081\r\n",
    b"PROXY UDP4 10.20.30.40 192.0.2.1 4567 8081\r\n",
    b"PROXY TCP4 10.20.30.40 192.0.2.1 4567 8081\n" + PREFACE,  # no CR: the line runs into the preface
    b"PROXY " + b"x" * 120,  # no end of line where one must be
    SIGNATURE + b"\x31\x11\x00\x0c" + bytes(12),  # version 3
    SIGNATURE + b"\x2f\x11\x00\x0c" + bytes(12),  # an unknown command
    SIGNATURE + b"\x21\x11\x00\x04" + bytes(4),  # IPv4 with too short an address block
])
def test_a_broken_header_is_refused(bad):
    with pytest.raises(BadHeader):
        read(bad)
