"""The gRPC port's openings, on either ``grpcEventLoop`` (a port alone in a process, :mod:`.port_server`,
serving a service that answers each call with the client's address): a PROXY protocol header (v1, v2) names
the client, TLS and plain clients share a ``permissive`` port, an ``enforcing`` one refuses plain clients, a
``disabled`` one TLS clients, a bad header or a silent client is cut; and on the gRPC thread's port
(:class:`ferrymq.server.grpc.server.GrpcThread`, in this process) stopping lets a call in flight be answered."""

from __future__ import annotations

import contextlib
import socket
import ssl
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("rocketmq.grpc_protocol")

import h2.config  # noqa: E402
import h2.connection  # noqa: E402
import h2.events  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as service  # noqa: E402
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc  # noqa: E402

from ferrymq.server.grpc import framing  # noqa: E402
from ferrymq.server.grpc.server import GrpcThread  # noqa: E402

from .placements import PLACEMENTS  # noqa: E402
from .port_server import PeerService  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PATH = "/apache.rocketmq.v2.MessagingService/QueryRoute"
V1 = b"PROXY TCP4 10.20.30.40 192.0.2.1 4567 8081\r\n"
V2 = (b"\r\n\r\n\x00\r\nQUIT\n\x21\x21\x00\x24" + bytes.fromhex("20010db8000000000000000000000007")
      + bytes(16) + (4569).to_bytes(2, "big") + (8081).to_bytes(2, "big"))


@contextlib.contextmanager
def serving(placement: str, mode: str = "disabled", timeout: float = 120.0):
    """The port of a :mod:`.port_server` process run with ``placement``, ``mode`` and ``timeout``."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.grpc_service.port_server", placement, mode, str(timeout)],
                            cwd=ROOT, stdout=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        assert line.strip().isdigit(), f"the port server did not start: {line!r}"
        yield int(line)
    finally:
        proc.terminate()
        proc.wait(10)


@pytest.fixture(params=sorted(PLACEMENTS))
def placement(request) -> str:
    return request.param


def _tls_client() -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    ctx.set_alpn_protocols(["h2"])
    return ctx


def raw_call(port: int, header: bytes = b"", tls: bool = False) -> str:
    """The status message of a QueryRoute made with ``h2`` after ``header`` (sent in two pieces), in TLS or
    not: the address the server knows the client by."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    with contextlib.closing(sock):
        if header:
            sock.sendall(header[:9])
            time.sleep(0.05)
            sock.sendall(header[9:])
        if tls:
            sock = _tls_client().wrap_socket(sock, server_hostname="localhost")
        client = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        client.initiate_connection()
        stream_id = client.get_next_available_stream_id()
        client.send_headers(stream_id, [(b":method", b"POST"), (b":scheme", b"http"), (b":path", PATH.encode()),
                                        (b":authority", b"test"), (b"content-type", b"application/grpc"),
                                        (b"te", b"trailers")])
        client.send_data(stream_id, framing.frame(service.QueryRouteRequest().SerializeToString()), end_stream=True)
        sock.sendall(client.data_to_send())
        body = b""
        while True:
            data = sock.recv(65536)
            assert data, "the server closed the connection before answering"
            for event in client.receive_data(data):
                if isinstance(event, h2.events.DataReceived):
                    body += event.data
                    client.acknowledge_received_data(event.flow_controlled_length, stream_id)
                elif isinstance(event, h2.events.StreamEnded):
                    return service.QueryRouteResponse.FromString(body[framing.PREFIX_LENGTH:]).status.message
            sock.sendall(client.data_to_send())


def closed_without_answer(port: int, first: bytes, wait: float = 5.0) -> bytes:
    """What the port sends a client that sends ``first`` before it closes or cuts (resets) the connection
    (asserted ended)."""
    with socket.create_connection(("127.0.0.1", port), timeout=wait) as sock:
        if first:
            sock.sendall(first)
        received = b""
        try:
            while data := sock.recv(65536):
                received += data
        except ConnectionResetError:
            pass
        return received


def grpcio_route(port: int, tls: bool) -> str:
    target = f"127.0.0.1:{port}"
    if tls:
        certificate = ssl.get_server_certificate(("127.0.0.1", port))
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(certificate.encode()),
                                      options=[("grpc.ssl_target_name_override", "localhost")])
    else:
        channel = grpc.insecure_channel(target)
    with channel:
        return service_grpc.MessagingServiceStub(channel).QueryRoute(service.QueryRouteRequest(), timeout=10) \
            .status.message


def test_a_proxy_protocol_header_names_the_client_plain_and_in_tls(placement):
    with serving(placement, "permissive") as port:
        assert raw_call(port).startswith("ipv4:127.0.0.1:")
        assert raw_call(port, V1) == "ipv4:10.20.30.40:4567"
        assert raw_call(port, V2, tls=True) == "ipv6:[2001:db8::7]:4569"


def test_a_bad_proxy_protocol_header_closes_the_connection_and_the_port_serves_on(placement):
    with serving(placement) as port:
        assert closed_without_answer(port, b"PROXY TCP4 10.20.30.40 nowhere 4567 8081\r\n") == b""
        assert raw_call(port).startswith("ipv4:")


@pytest.mark.parametrize("mode, plain, tls", [("disabled", True, False), ("permissive", True, True),
                                              ("enforcing", False, True)])
def test_tls_server_mode_decides_which_clients_the_port_serves(placement, mode, plain, tls):
    with serving(placement, mode) as port:
        for in_tls, served in ((False, plain), (True, tls)):
            if served:
                assert grpcio_route(port, in_tls).startswith("ipv4:127.0.0.1:")
            elif in_tls:  # a ClientHello to a plain port: no HTTP/2 preface, the connection ends
                answer = closed_without_answer(port, bytes([0x16, 3, 1, 0, 5]) + b"hello")
                assert answer[:1] != b"\x16"  # no TLS record
            else:
                with pytest.raises(grpc.RpcError) as refused:
                    grpcio_route(port, in_tls)
                assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_silent_client_is_cut_after_the_first_byte_timeout(placement):
    with serving(placement, timeout=0.3) as port:
        started = time.monotonic()
        assert closed_without_answer(port, b"") == b""
        assert 0.25 < time.monotonic() - started < 4


def test_stopping_the_threads_port_answers_the_call_in_flight_and_closes_the_port():
    slow = PeerService()
    slow.delay = 0.5
    server = GrpcThread(slow, "127.0.0.1", 0)
    server.start()
    try:
        answers: list[str] = []
        calling = threading.Thread(target=lambda: answers.append(grpcio_route(server.port, False)))
        calling.start()
        time.sleep(0.2)
        server._stop_thread()
        calling.join(5)
        assert answers and answers[0].startswith("ipv4:")
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", server.port), timeout=2).close()
    finally:
        server._stop_thread()
