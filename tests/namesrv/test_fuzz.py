"""Random and mutated frames against a live name server: it never crashes or hangs, each bad connection
ends (closed by the server, or answered when the mutation still decodes), and a good client connected
the whole time keeps getting correct answers."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.remoting.helpers import RawClient
from ferrymq.wire.bodies import ClusterInfo, RegisterBrokerBody, TopicConfig, TopicConfigSerializeWrapper
from ferrymq.wire.codes import RequestCode, ResponseCode, SerializeType
from ferrymq.wire.command import request
from ferrymq.wire.frame import FrameDecoder, encode

PROBE_OPAQUE = 0x7FFF0001

_register_body = RegisterBrokerBody(
    TopicConfigSerializeWrapper({"TopicTest": TopicConfig("TopicTest", 4, 4, 6), "T2": TopicConfig("T2", 1, 1, 6)})
).encode()
_register_ext = {
    "brokerName": "fuzz-b",
    "brokerAddr": "127.0.0.1:1",
    "clusterName": "FuzzCluster",
    "haServerAddr": "",
    "brokerId": "0",
    "compressed": "false",
    "bodyCrc32": "0",
}

SEEDS = [
    encode(request(code, ext, body, serialize_type=stype, opaque=7))
    for stype in (SerializeType.JSON, SerializeType.ROCKETMQ)
    for code, ext, body in [
        (RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, b""),
        (RequestCode.REGISTER_BROKER, _register_ext, _register_body),
        (RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"}, b""),
        (RequestCode.REGISTER_TOPIC_IN_NAMESRV, {"topic": "X"}, b'{"queueDatas":[]}'),
        (RequestCode.QUERY_DATA_VERSION, {"brokerName": "b", "brokerAddr": "a", "clusterName": "c", "brokerId": "0"}, b"{}"),
        (RequestCode.UPDATE_NAMESRV_CONFIG, {}, b"enableTopicList=true\n"),
    ]
]


@st.composite
def mutated_frame(draw) -> bytes:
    """A complete frame (length prefix consistent) whose header-length word, header or body is damaged."""
    frame = bytearray(draw(st.sampled_from(SEEDS)))
    payload = frame[4:]
    for _ in range(draw(st.integers(1, 8))):
        kind = draw(st.sampled_from(["flip", "set", "cut", "insert"]))
        pos = draw(st.integers(0, max(0, len(payload) - 1)))
        if kind == "flip" and payload:
            payload[pos] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set" and payload:
            payload[pos] = draw(st.integers(0, 255))
        elif kind == "cut":
            del payload[pos : pos + draw(st.integers(1, 16))]
        else:
            payload[pos:pos] = draw(st.binary(min_size=1, max_size=16))
    return struct.pack(">i", len(payload)) + bytes(payload)


@pytest.fixture
def live(namesrv):
    """The name server with one broker registered, and a good client that stays connected throughout."""
    good = RawClient(("127.0.0.1", namesrv.port))
    good.send(request(RequestCode.REGISTER_BROKER, dict(_register_ext, brokerName="good-b", brokerAddr="127.0.0.1:2"), _register_body, opaque=1))
    assert good.recv().code == ResponseCode.SUCCESS
    yield namesrv, good
    good.close()


def check_good_client(good: RawClient, opaque: int) -> None:
    # A mutated frame may still be a valid request that changes state (unregister, delete topic...), so
    # the check is that the good client is answered correctly, not what the registry holds.
    good.send(request(RequestCode.GET_BROKER_CLUSTER_INFO, opaque=opaque))
    resp = good.recv(timeout=3)
    assert resp.opaque == opaque and resp.code == ResponseCode.SUCCESS
    assert isinstance(ClusterInfo.decode(resp.body).cluster_addr_table, dict)


def read_until_probe_or_close(sock: socket.socket, timeout: float = 3.0) -> str:
    decoder = FrameDecoder()
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        try:
            data = sock.recv(65536)
        except socket.timeout:
            break
        except (ConnectionResetError, BrokenPipeError):
            return "closed"
        if not data:
            return "closed"
        for cmd in decoder.feed(data):  # whatever the server writes must itself be well-formed frames
            if cmd.opaque == PROBE_OPAQUE and cmd.is_response:
                return "answered"
    return "hung"


_counter = iter(range(1000, 10**9))
FUZZ = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@FUZZ
@given(frame=mutated_frame())
def test_mutated_frames(live, frame):
    namesrv, good = live
    with socket.create_connection(("127.0.0.1", namesrv.port), timeout=3) as sock:
        try:
            sock.sendall(frame + encode(request(RequestCode.GET_BROKER_CLUSTER_INFO, opaque=PROBE_OPAQUE)))
        except OSError:
            pass  # already closed by the server: fine
        outcome = read_until_probe_or_close(sock)
    assert outcome != "hung", f"server neither answered nor closed after {frame[:64]!r}"
    check_good_client(good, next(_counter))


@FUZZ
@given(data=st.binary(min_size=1, max_size=512))
def test_random_bytes(live, data):
    namesrv, good = live
    with socket.create_connection(("127.0.0.1", namesrv.port), timeout=3) as sock:
        try:
            sock.sendall(data)
            sock.shutdown(socket.SHUT_WR)
        except OSError:
            pass  # already closed by the server: fine
        outcome = read_until_probe_or_close(sock)
    assert outcome == "closed"
    check_good_client(good, next(_counter))
