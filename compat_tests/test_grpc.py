"""Issue 27: the RocketMQ 5 gRPC protocol. The official gRPC client (rocketmq-client-java) sends through
Apache's proxy in local mode (its broker in the proxy's JVM) and through FerryMQ's grpcListenPort, and a
remoting Java 5.5.0 push consumer reads the messages from the same broker (cross-protocol). Malformed
requests, sent with the v2 stubs Apache generates (rocketmq-python-client), get the same status codes.

One gRPC producer run and one consumer run per server carry every message kind (a MIXED topic accepts
them all: Apache's broker with enableMixedMessageType, which FerryMQ's accepts as it is); the tests then
check one behaviour each on what both saw.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from . import toolchain
from .harness import ScenarioResult, _run
from .test_official_clients import WAIT

grpc = pytest.importorskip("grpc", reason="the grpc extra is not installed")
pytest.importorskip("rocketmq.grpc_protocol", reason="the grpc extra is not installed")

from google.protobuf.duration_pb2 import Duration  # noqa: E402
from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as service  # noqa: E402
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc  # noqa: E402

from ferrymq.sdk.blocking_clients import BlockingMQAdmin  # noqa: E402

#: the delayed message's delivery time after its send (ms)
DELAY_MS = 2000
#: each message the gRPC producer sends: (spec line fields, whether a consumer gets it)
MESSAGES = [
    ({"body": "plain-0", "tag": "TagA", "keys": "k1,k2", "prop.color": "blue"}, True),
    ({"body": "plain-1", "tag": "TagA", "keys": "k3", "prop.color": "red"}, True),
    *(({"body": f"fifo-{i}", "group": "order-42"}, True) for i in range(3)),
    ({"body": "delayed", "delayMs": str(DELAY_MS)}, True),
    ({"body": "committed", "txn": "commit"}, True),
    ({"body": "rolled-back", "txn": "rollback"}, False),
    ({"body": "checked-back", "txn": "open"}, True),
]
#: both servers check a half message back after 2 s, every second (Apache's broker keys)
TRANSACTION_CHECKS = {"transactionTimeOut": 2000, "transactionCheckInterval": 1000}
#: how long the producer stays up for the check-back (ms)
LINGER_MS = 5000
#: the proxy's keys of what clients are told in their settings, away from their defaults (rmq-proxy.json on
#: Apache, the config file on FerryMQ)
CLIENT_SETTINGS = {"grpcClientProducerMaxAttempts": 4, "grpcClientProducerBackoffInitialMillis": 20,
                   "grpcClientProducerBackoffMaxMillis": 3000, "grpcClientProducerBackoffMultiplier": 3,
                   "grpcClientConsumerLongPollingBatchSize": 24, "grpcClientConsumerMaxLongPollingTimeoutMillis": 15000}


@dataclass
class GrpcServer:
    kind: str
    namesrv_addr: str
    grpc_endpoint: str

    def create_topic(self, message_type: str) -> str:
        topic = f"CompatGrpc{message_type.title()}_{uuid.uuid4().hex[:8]}"
        with BlockingMQAdmin(self.namesrv_addr) as admin:
            admin.create_topic(topic, 4, attributes={"message.type": message_type})
            admin.wait_for_route(topic)
        return topic


@pytest.fixture(scope="module", params=["apache", "ferrymq"])
def grpc_server(request, compat_home):
    """Apache 5.5.0's name server and proxy (local mode) booted side by side, then ``ferrymq standalone``
    with grpcListenPort."""
    if request.param == "apache":
        from .apache import ApacheNamesrv, ApacheProxy
        from .conftest import _need

        _need("java", "mvn")
        home = compat_home / "apache-grpc"
        ns = ApacheNamesrv.launch(home / "namesrv")
        proxy = ApacheProxy.launch(home / "proxy", ns.addr,
                                   extra={"enableMixedMessageType": "true", **TRANSACTION_CHECKS},
                                   proxy_extra=CLIENT_SETTINGS)
        try:
            ns.wait_ready()
            proxy.wait_ready()
            yield GrpcServer("apache", ns.addr, proxy.grpc_endpoint)
        finally:
            proxy.stop()
            ns.stop()
        return
    from ferrymq.testing import FerryMQServer

    with FerryMQServer(compat_home / "ferrymq-grpc", {**TRANSACTION_CHECKS, **CLIENT_SETTINGS}, grpc=True) as server:
        yield GrpcServer("ferrymq", server.namesrv_addr, server.grpc_endpoint)


def grpc_java_runner(home: Path):
    """``run(*args, timeout=60) -> ScenarioResult``: GrpcScenarios (rocketmq-client-java) with ``args``."""
    from .conftest import _need

    _need("java", "javac", "mvn")
    clients = toolchain.grpc_java_client()

    def run(*args: str, timeout: float = 60) -> ScenarioResult:
        argv = clients.command("ferrymq.compat.grpc.GrpcScenarios", list(args), home=home)
        proc = _run(argv, timeout)
        return ScenarioResult(argv, proc.returncode, proc.stdout, proc.stderr)

    return run


@pytest.fixture(scope="module")
def grpc_java(compat_home):
    return grpc_java_runner(compat_home / "grpc-java")


@dataclass
class Exchange:
    sent: ScenarioResult
    received: ScenarioResult

    def got(self, body: str) -> dict:
        """The first delivery of ``body`` (a transaction checked back twice may be committed twice: at least
        once, as Apache's broker does when the second check comes before the first answer)."""
        return next(e for e in self.received.of("received") if e["body"] == body)

    def sent_id(self, body: str) -> str:
        index = [fields["body"] for fields, _ in MESSAGES].index(body)
        return self.sent.of("sent")[index]["msgId"]

    def sent_at(self, body: str) -> int:
        index = [fields["body"] for fields, _ in MESSAGES].index(body)
        return self.sent.of("sent")[index]["sentAt"]


@pytest.fixture(scope="module")
def exchange(grpc_server, grpc_java, java5, tmp_path_factory) -> Exchange:
    """:data:`MESSAGES` sent by the gRPC producer to a MIXED topic, then consumed by a remoting push consumer."""
    topic = grpc_server.create_topic("MIXED")
    spec = tmp_path_factory.mktemp("grpc-spec") / "messages.tsv"
    spec.write_text("".join("\t".join(f"{k}={v}" for k, v in fields.items()) + "\n" for fields, _ in MESSAGES))
    sent = grpc_java("send", "-endpoint", grpc_server.grpc_endpoint, "-t", topic, "-spec", str(spec),
                     "-linger", str(LINGER_MS)).check()
    expected = sum(delivered for _, delivered in MESSAGES)
    received = java5("consume", "-n", grpc_server.namesrv_addr, "-t", topic, "-g", f"grpc_check_{uuid.uuid4().hex[:8]}",
                     "-count", str(expected), "-timeout", str(WAIT * 1000), "-linger", "500").check()
    return Exchange(sent, received)


def test_grpc_sends_reach_a_remoting_consumer_with_tag_keys_properties_and_message_id(exchange):
    for body, keys, color in (("plain-0", "k1 k2", "blue"), ("plain-1", "k3", "red")):
        got = exchange.got(body)
        assert (got["tags"], got["keys"], got["properties"]["color"]) == ("TagA", keys, color), exchange.received.explain()
        assert got["msgId"] == exchange.sent_id(body)


def test_a_message_group_stays_on_one_queue_in_order(exchange):
    fifo = sorted((e for e in exchange.received.of("received") if e["body"].startswith("fifo-")),
                  key=lambda e: e["queueOffset"])
    assert [e["body"] for e in fifo] == ["fifo-0", "fifo-1", "fifo-2"], exchange.received.explain()
    assert len({e["queueId"] for e in fifo}) == 1
    assert {e["properties"]["__SHARDINGKEY"] for e in fifo} == {"order-42"}


def test_a_delivery_timestamp_delays_the_message(exchange):
    got = exchange.got("delayed")
    assert got["storeTimestamp"] - exchange.sent_at("delayed") >= DELAY_MS - 500, exchange.received.explain()
    assert "TIMER_DELIVER_MS" in got["properties"]


def test_only_the_committed_transaction_is_delivered(exchange):
    bodies = {e["body"] for e in exchange.received.of("received")}
    assert bodies == {fields["body"] for fields, delivered in MESSAGES if delivered}, exchange.received.explain()
    assert exchange.got("committed")["msgId"] == exchange.sent_id("committed")


# ---------------------------------------------------------------------- malformed requests

CLIENT = (("x-mq-client-id", "compat-grpc@1"), ("x-mq-language", "PYTHON"), ("x-mq-protocol", "v2"))


@pytest.fixture(scope="module")
def stub(grpc_server):
    with grpc.insecure_channel(grpc_server.grpc_endpoint) as channel:
        yield service_grpc.MessagingServiceStub(channel)


@pytest.fixture(scope="module")
def normal_topic(grpc_server) -> str:
    return grpc_server.create_topic("NORMAL")


def _message(topic: str, body: bytes = b"x", **system) -> pb.Message:
    system.setdefault("message_id", uuid.uuid4().hex.upper())
    system.setdefault("message_type", pb.NORMAL)
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(**system))


def _with_property(topic: str, key: str, value: str) -> pb.Message:
    message = _message(topic)
    message.user_properties[key] = value
    return message


BAD_SENDS = {
    "empty body": (lambda topic: _message(topic, b""), pb.MESSAGE_BODY_EMPTY),
    "too-large body": (lambda topic: _message(topic, b"x" * (4 * 1024 * 1024 + 1)), pb.MESSAGE_BODY_TOO_LARGE),
    "no message id": (lambda topic: _message(topic, message_id=""), pb.ILLEGAL_MESSAGE_ID),
    "tag with |": (lambda topic: _message(topic, tag="a|b"), pb.ILLEGAL_MESSAGE_TAG),
    "tag with a tab": (lambda topic: _message(topic, tag="a\tb"), pb.ILLEGAL_MESSAGE_TAG),
    "key with a DEL": (lambda topic: _message(topic, keys=["k\x7f"]), pb.ILLEGAL_MESSAGE_KEY),
    "property with a newline": (lambda topic: _with_property(topic, "color", "blue\n"), pb.ILLEGAL_MESSAGE_PROPERTY_KEY),
    "FIFO on a NORMAL topic": (lambda topic: _message(topic, message_group="g", message_type=pb.FIFO),
                               pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
    "unknown topic": (lambda topic: _message("CompatGrpcNoSuchTopic"), pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
}


@pytest.mark.parametrize("case", BAD_SENDS)
def test_bad_sends_get_the_proxys_status_codes(stub, normal_topic, case):
    build, code = BAD_SENDS[case]
    answer = stub.SendMessage(service.SendMessageRequest(messages=[build(normal_topic)]), metadata=CLIENT)
    assert pb.Code.Name(answer.status.code) == pb.Code.Name(code), answer.status.message


def test_bad_routes_and_unknown_clients_get_the_proxys_status_codes(grpc_server, stub, normal_topic):
    host, port = grpc_server.grpc_endpoint.rsplit(":", 1)
    endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))])

    def route(topic: str) -> int:
        return stub.QueryRoute(service.QueryRouteRequest(topic=pb.Resource(name=topic), endpoints=endpoints),
                               metadata=CLIENT).status.code

    assert route("CompatGrpcNoSuchTopic") == pb.TOPIC_NOT_FOUND
    assert route("TBW102") == pb.ILLEGAL_TOPIC
    assert route("bad topic!") == pb.ILLEGAL_TOPIC
    no_client = stub.SendMessage(service.SendMessageRequest(messages=[_message(normal_topic)]))
    assert no_client.status.code == pb.CLIENT_ID_REQUIRED
    unknown = (("x-mq-client-id", f"compat-grpc-{uuid.uuid4().hex}"),)
    heartbeat = stub.Heartbeat(service.HeartbeatRequest(client_type=pb.PRODUCER), metadata=unknown)
    assert heartbeat.status.code == pb.UNRECOGNIZED_CLIENT_TYPE
    ended = stub.EndTransaction(service.EndTransactionRequest(
        topic=pb.Resource(name=normal_topic), message_id="X", transaction_id="no-such-transaction",
        resolution=pb.COMMIT, source=pb.SOURCE_CLIENT), metadata=CLIENT)
    assert ended.status.code == pb.INTERNAL_SERVER_ERROR  # the proxy's TRANSACTION_DATA_NOT_FOUND


# ---------------------------------------------------------------------- oversized request metadata

#: the largest header list a call may send: grpc-java's default (the proxy sets no other), advertised in the
#: server's SETTINGS_MAX_HEADER_LIST_SIZE
MAX_HEADER_LIST_SIZE = 8192
#: each case's request header list: (its size as HTTP/2 counts it, the alphabet of the padding header's value,
#: how the call ends: (``:status``, ``grpc-status``, the frames of its stream, how the connection ended))
REFUSED_FRAMES = ["HEADERS END_STREAM", "RST_STREAM PROTOCOL_ERROR", "RST_STREAM STREAM_CLOSED"]
OVERSIZED_METADATA = {
    "at the limit": (MAX_HEADER_LIST_SIZE, "mixed", (b"200", b"0", ["HEADERS", "DATA", "HEADERS END_STREAM"], None)),
    "a byte over the limit": (MAX_HEADER_LIST_SIZE + 1, "mixed", (b"431", None, REFUSED_FRAMES, None)),
    "12 KiB, 7.5 KiB encoded": (12 * 1024, "a", (b"431", None, REFUSED_FRAMES, None)),
    "20 KiB": (20 * 1024, "mixed", (None, None, [], "PROTOCOL_ERROR")),
}


def _pad(size: int, alphabet: str) -> tuple[bytes, bytes]:
    """A custom header of ``size`` bytes as HTTP/2 counts it, its value random letters of ``alphabet`` (or
    ``"mixed"``: letters and digits, which Huffman-code to about 6 bits each)."""
    import random
    import string

    from .h2_client import HEADER_OVERHEAD

    name = b"x-compat-pad"
    letters = string.ascii_letters + string.digits if alphabet == "mixed" else alphabet
    return name, "".join(random.Random(27).choices(letters, k=size - len(name) - HEADER_OVERHEAD)).encode()


def _route_call(grpc_server: GrpcServer, topic: str, size: int, alphabet: str) -> tuple[list, bytes]:
    """A QueryRoute call's headers, padded by one custom header to ``size`` bytes of header list, and its
    request message."""
    from .h2_client import header_list_size

    headers = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/apache.rocketmq.v2.MessagingService/QueryRoute"),
               (b":authority", b"ferrymq-compat"), (b"content-type", b"application/grpc"), (b"te", b"trailers"),
               *((name.encode(), value.encode()) for name, value in CLIENT)]
    headers.append(_pad(size - header_list_size(headers), alphabet))
    assert header_list_size(headers) == size
    host, port = grpc_server.grpc_endpoint.rsplit(":", 1)
    request = service.QueryRouteRequest(topic=pb.Resource(name=topic), endpoints=pb.Endpoints(
        scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))]))
    return headers, request.SerializeToString()


@pytest.mark.parametrize("case", OVERSIZED_METADATA)
def test_request_metadata_above_the_limit_is_refused_as_the_proxy_refuses_it(grpc_server, normal_topic, case):
    """A call whose request headers exceed the limit the server advertises (8 KiB, grpc-java's default) is
    answered HTTP 431 and reset, while a call open beside it and the next call on the same connection are
    served; a header block too long to decode (more than 1.25 times the limit, encoded) ends the connection
    with GOAWAY PROTOCOL_ERROR, as Netty's HTTP/2 decoder ends it."""
    from .h2_client import H2Client

    size, alphabet, expected = OVERSIZED_METADATA[case]
    normal_headers, message = _route_call(grpc_server, normal_topic, 1024, "mixed")
    with H2Client(grpc_server.grpc_endpoint) as client:
        assert client.max_header_list_size == MAX_HEADER_LIST_SIZE
        beside = client.start(normal_headers)
        oversized = client.answer(client.call(*_route_call(grpc_server, normal_topic, size, alphabet)))
        assert (oversized.http_status, oversized.grpc_status, oversized.frames, oversized.connection_ended) == expected
        if oversized.connection_ended is None:
            _beside_and_after_are_served(client, beside, normal_headers, message)


#: how grpc-java, behind the proxy, answers request trailers it reads: as the headers of a new call on the
#: stream, refused for what they lack (no ``:path``: 404 UNIMPLEMENTED; no ``content-type``: 415 INTERNAL) in
#: a HEADERS and a DATA ending the stream, then RST_STREAM CANCEL; the half-close the trailers carry is the
#: call's, whose method runs, its answer a second CANCEL
READ_AS_A_NEW_CALL = ["HEADERS", "DATA END_STREAM", "RST_STREAM CANCEL", "RST_STREAM CANCEL"]
#: the frames of a call whose request trailers are above the limit: the 431, then the reset, though the
#: trailers ended the stream
REFUSED_TRAILERS = ["HEADERS END_STREAM", "RST_STREAM PROTOCOL_ERROR"]
#: each case's request trailers (a header block after the call's message, ending its stream): (their size as
#: HTTP/2 counts it, the padding's alphabet, how the call ends as in OVERSIZED_METADATA)
OVERSIZED_TRAILERS = {
    "at the limit": (MAX_HEADER_LIST_SIZE, "mixed", (b"404", b"12", READ_AS_A_NEW_CALL, None)),
    "a byte over the limit": (MAX_HEADER_LIST_SIZE + 1, "mixed", (b"431", None, REFUSED_TRAILERS, None)),
    "12 KiB, 7.5 KiB encoded": (12 * 1024, "a", (b"431", None, REFUSED_TRAILERS, None)),
    "20 KiB": (20 * 1024, "mixed", (None, None, [], "PROTOCOL_ERROR")),
}


def _beside_and_after_are_served(client, beside: int, headers: list, message: bytes) -> None:
    """The call left open beside a refused one, then a new call on the same connection, are answered OK."""
    client.send(beside, message)
    for answer in (client.answer(beside), client.answer(client.call(headers, message))):
        assert (answer.http_status, answer.grpc_status, answer.connection_ended) == (b"200", b"0", None)
        assert service.QueryRouteResponse.FromString(answer.message()).status.code == pb.OK


def _ends_as(client, call: int, expected: tuple, beside: int, headers: list, message: bytes) -> None:
    """The call whose trailers were sent ends as ``expected`` (as in OVERSIZED_METADATA); the call beside it
    and a new one are served while the connection lasts."""
    answer = client.answer(call)
    if "RST_STREAM CANCEL" in expected[2]:
        client.settle()  # for the call's own answer
    assert (answer.http_status, answer.grpc_status, answer.frames, answer.connection_ended) == expected
    if answer.connection_ended is None:
        _beside_and_after_are_served(client, beside, headers, message)


@pytest.mark.parametrize("case", OVERSIZED_TRAILERS)
def test_request_trailers_above_the_limit_are_refused_as_the_proxy_refuses_them(grpc_server, normal_topic, case):
    """Request trailers (a header block after the call's message, ending its stream) count against the header
    list limit as request headers do: above it the call is answered HTTP 431 and reset; a block too long to
    decode ends the connection. Calls beside and after are served."""
    from .h2_client import H2Client

    size, alphabet, expected = OVERSIZED_TRAILERS[case]
    normal_headers, message = _route_call(grpc_server, normal_topic, 1024, "mixed")
    with H2Client(grpc_server.grpc_endpoint) as client:
        beside = client.start(normal_headers)
        call = client.start(normal_headers)
        client.send(call, message, end_stream=False)
        client.send_trailers(call, [_pad(size, alphabet)])
        _ends_as(client, call, expected, beside, normal_headers, message)


#: request trailers of other shapes: (the trailers (None: the call's own headers again), whether they end the
#: stream, whether the service answered the call before them (an unknown method: answered UNIMPLEMENTED at
#: once), how the call ends as above: its frames after the answer it had before the trailers)
ODD_TRAILERS = {
    "small, a pseudo-header in them": ([(b":path", b"/apache.rocketmq.v2.MessagingService/QueryRoute")], True, False,
                                       (b"415", b"13", READ_AS_A_NEW_CALL, None)),
    "a whole call's headers": (None, True, False, (b"200", b"13", ["HEADERS END_STREAM"], None)),
    "small, a connection header": ([(b"connection", b"close")], True, False,
                                   (None, None, ["RST_STREAM PROTOCOL_ERROR", "RST_STREAM CANCEL", "RST_STREAM CANCEL"],
                                    None)),
    "small, an empty path": ([(b":path", b"")], True, False, (None, None, ["RST_STREAM INTERNAL_ERROR"], None)),
    "small, two hosts": ([(b"host", b"a"), (b"host", b"b")], True, False, (b"400", b"13", READ_AS_A_NEW_CALL, None)),
    "small, without END_STREAM": ([(b"x-compat-trailer", b"1")], False, False,
                                  (None, None, ["RST_STREAM PROTOCOL_ERROR", "RST_STREAM STREAM_CLOSED"], None)),
    "above the limit, without END_STREAM": ([_pad(MAX_HEADER_LIST_SIZE + 1, "mixed")], False, False,
                                            (b"431", None, [*REFUSED_TRAILERS, "RST_STREAM STREAM_CLOSED"], None)),
    "small, the call answered": ([(b"x-compat-trailer", b"1")], True, True,
                                 (b"200", b"12", ["HEADERS END_STREAM"], "INTERNAL_ERROR")),
    "above the limit, the call answered": ([_pad(MAX_HEADER_LIST_SIZE + 1, "mixed")], True, True,
                                           (b"200", b"12", ["HEADERS END_STREAM", "RST_STREAM PROTOCOL_ERROR"],
                                            None)),
}


@pytest.mark.parametrize("case", ODD_TRAILERS)
def test_odd_request_trailers_get_the_proxys_answer(grpc_server, normal_topic, case):
    """Trailers that do not end the stream reset the call alone (RST_STREAM PROTOCOL_ERROR, after the 431 when
    they are above the limit; the client's END_STREAM after them is answered STREAM_CLOSED); trailers above the limit after the call's answer get the
    reset alone, the 431 being too late; small trailers carrying a pseudo-header are read as a new call's
    headers, as any trailers within the limit are (a whole call's headers start that call, which takes the
    half-close; a connection-specific header resets the stream, an empty path too, ending the call unrun);
    small trailers after the call's answer ended the stream end
    the connection (GOAWAY INTERNAL_ERROR). Calls beside and after are served while the connection lasts."""
    from .h2_client import H2Client

    trailers, end_stream, answered, expected = ODD_TRAILERS[case]
    normal_headers, message = _route_call(grpc_server, normal_topic, 1024, "mixed")
    with H2Client(grpc_server.grpc_endpoint) as client:
        beside = client.start(normal_headers)
        if answered:
            unknown = [(name, value.replace(b"/QueryRoute", b"/NoSuchMethod")) for name, value in normal_headers]
            call = client.start(unknown)
            assert client.answer(call).frames == ["HEADERS END_STREAM"]
        else:
            call = client.start(normal_headers)
            client.send(call, message, end_stream=False)
        client.send_trailers(call, normal_headers if trailers is None else trailers, end_stream=end_stream)
        if not end_stream:
            client.conn.send_data(call, b"", end_stream=True)
            client.flush()
        _ends_as(client, call, expected, beside, normal_headers, message)


def test_a_send_whose_trailers_end_its_stream_is_answered_as_a_new_call_yet_stores_its_message(grpc_server):
    """A SendMessage call whose message is followed by small request trailers ending the stream: the trailers
    are read as a new call's headers (no ``:path``: 404 UNIMPLEMENTED, its reason as text), yet the half-close
    they carry is the send's: the message is stored, the send's answer a RST_STREAM CANCEL."""
    from .h2_client import H2Client

    topic = grpc_server.create_topic("NORMAL")
    headers, _ = _route_call(grpc_server, topic, 1024, "mixed")
    headers = [(name, value.replace(b"/QueryRoute", b"/SendMessage")) for name, value in headers]
    message = service.SendMessageRequest(messages=[_message(topic)]).SerializeToString()
    with H2Client(grpc_server.grpc_endpoint) as client:
        call = client.start(headers)
        client.send(call, message, end_stream=False)
        client.send_trailers(call, [(b"x-compat-trailer", b"1")])
        answer = client.answer(call)
        client.settle()
        assert (answer.http_status, answer.grpc_status, answer.frames) == (b"404", b"12", READ_AS_A_NEW_CALL)
        assert answer.headers[b"content-type"] == b"text/plain; charset=utf-8"
        assert answer.headers[b"grpc-message"] == b"Expected path but is missing"
        assert bytes(answer.data) == b"Expected path but is missing"
        sent = client.answer(client.call(headers, message))
        assert service.SendMessageResponse.FromString(sent.message()).status.code == pb.OK
    with BlockingMQAdmin(grpc_server.namesrv_addr) as admin:
        stored = sum(offsets.max_offset for offsets in admin.topic_stats(topic).offset_table.values())
    assert stored == 2  # the trailed send's message and the next


def test_grpcio_sending_oversized_metadata_gets_the_proxys_status(grpc_server, normal_topic):
    """grpcio's client sends metadata above the advertised limit (it does not check it): a call over the limit
    fails UNKNOWN (the HTTP 431) and the channel's next call is served; a header block too long to decode
    (grpcio does not Huffman-code the values) fails UNAVAILABLE, its connection ended, and the channel
    connects again."""
    request = service.QueryRouteRequest(topic=pb.Resource(name=normal_topic))

    def route(pad: int) -> tuple:
        metadata = (*CLIENT, ("x-compat-pad", "a" * pad)) if pad else CLIENT
        try:
            return pb.Code.Name(stub.QueryRoute(request, metadata=metadata, timeout=15).status.code), ""
        except grpc.RpcError as failed:
            return failed.code(), failed.details()

    with grpc.insecure_channel(grpc_server.grpc_endpoint) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        assert route(0) == ("OK", "")
        assert route(MAX_HEADER_LIST_SIZE) == (grpc.StatusCode.UNKNOWN, "Received http2 header with status: 431")
        assert route(0) == ("OK", "")
        code, details = route(2 * MAX_HEADER_LIST_SIZE)
        assert code == grpc.StatusCode.UNAVAILABLE and "GOAWAY" in details, details
        assert route(0) == ("OK", "")

def test_an_open_transaction_is_checked_back_over_telemetry_and_committed(exchange):
    checked = exchange.sent.of("checked")
    assert {e["body"] for e in checked} == {"checked-back"}, exchange.sent.explain()
    assert {e["msgId"] for e in checked} == {exchange.sent_id("checked-back")}
    assert exchange.got("checked-back")["msgId"] == exchange.sent_id("checked-back")


# ---------------------------------------------------------------------- consuming over gRPC (POP)


#: a consumer group's retry policy: every redelivery 1 s after the failure (Apache's JSON)
RETRY_AFTER_A_SECOND = {"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000] * 4}}


def create_group(grpc_server: GrpcServer, **config) -> str:
    """A new consumer group on every broker of the cluster, with ``config`` (SubscriptionGroupConfig's fields)."""
    from ferrymq.wire.bodies import SubscriptionGroupConfig

    group = f"grpc_pop_{uuid.uuid4().hex[:8]}"
    with BlockingMQAdmin(grpc_server.namesrv_addr) as admin:
        for addr in admin.master_addrs():
            admin.api.create_subscription_group(addr, SubscriptionGroupConfig(group_name=group, **config))
    return group


def dlq_messages(grpc_server: GrpcServer, group: str, wait: float = 10.0) -> list:
    """What the brokers hold in ``%DLQ%group``, read from the brokers themselves (the name server learns of
    a DLQ topic with the broker's next registration)."""
    from ferrymq.remoting.errors import ResponseCodeError
    from ferrymq.wire.codes import PullSysFlag
    from ferrymq.wire.headers import PullMessageRequestHeader

    header = PullMessageRequestHeader(consumer_group=f"dlq_check_{uuid.uuid4().hex[:8]}", topic=f"%DLQ%{group}",
                                      queue_id=0, queue_offset=0, max_msg_nums=32, sys_flag=int(PullSysFlag.SUBSCRIPTION), commit_offset=0,
                                      suspend_timeout_millis=0, sub_version=0, subscription="*",
                                      expression_type="TAG")
    deadline = time.monotonic() + wait
    with BlockingMQAdmin(grpc_server.namesrv_addr) as admin:
        addrs = admin.master_addrs()
        while True:
            messages = []
            for addr in addrs:
                try:
                    messages += admin.api.pull_message(addr, header, 5.0).messages
                except ResponseCodeError:  # no such topic yet
                    pass
            if messages or time.monotonic() > deadline:
                return messages
            time.sleep(0.2)


#: what a remoting producer sends for the gRPC consumers: the SimpleConsumer takes TagA, the PushConsumer all
CONSUMED = [{"body": "s-0", "tag": "TagA"}, {"body": "s-skip", "tag": "TagB"}, {"body": "s-1", "tag": "TagA"},
            {"body": "s-renew", "tag": "TagA"}, {"body": "p-ok"}, {"body": "p-fail"}]
FIFO_BODIES = [f"f-{i}" for i in range(4)]


@dataclass
class Consumption:
    """One run of the Java gRPC consumers at once: ``simple`` (scenario 0), ``fifo`` (1), ``push`` (2)."""

    result: ScenarioResult
    sent: ScenarioResult
    push_group: str

    def of(self, scenario: int, event: str) -> list[dict]:
        return [e for e in self.result.of(event) if e.get("scenario") == scenario]


@pytest.fixture(scope="module")
def consumption(grpc_server, grpc_java, java5, stub, tmp_path_factory) -> Consumption:
    """A remoting producer's messages on a NORMAL topic, taken by a SimpleConsumer (TAG filter, one message
    renewed instead of acked) and a PushConsumer (one message failing), and a message group on a FIFO topic
    taken by a SimpleConsumer of an orderly group: the three consumers in one JVM, at once."""
    from .test_official_clients import write_spec

    topic, fifo_topic = grpc_server.create_topic("NORMAL"), grpc_server.create_topic("FIFO")
    for body in FIFO_BODIES:
        answer = stub.SendMessage(service.SendMessageRequest(messages=[_message(
            fifo_topic, body.encode(), message_group="order-7", message_type=pb.FIFO)]), metadata=CLIENT)
        assert answer.status.code == pb.OK, answer.status.message
    push_group = create_group(grpc_server, retry_max_times=1, group_retry_policy=RETRY_AFTER_A_SECOND)
    endpoint = grpc_server.grpc_endpoint
    spec = write_spec(tmp_path_factory.mktemp("grpc-consume"), CONSUMED)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:  # the remoting producer sends as the consumers start
        sending = pool.submit(lambda: java5("send", "-n", grpc_server.namesrv_addr, "-t", topic, "-timeout", "10000",
                                            "-spec", spec).check())
        result = grpc_java(
            "simple", "-endpoint", endpoint, "-t", topic, "-g", create_group(grpc_server), "-count", "3",
            "-expr", "TagA", "-renew", "s-renew", "-timeout", "30000", "--",
            "simple", "-endpoint", endpoint, "-t", fifo_topic, "-g",
            create_group(grpc_server, consume_message_orderly=True), "-count", str(len(FIFO_BODIES)),
            "-timeout", "30000", "--",
            "push", "-endpoint", endpoint, "-t", topic, "-g", push_group, "-count", str(len(CONSUMED)),
            "-fail", "p-fail", "-attempts", "2", "-timeout", "30000", "-linger", "3000").check()
        sent = sending.result()
    return Consumption(result, sent, push_group)


def test_simple_consumer_receives_remoting_sends_by_tag_and_a_renewed_message_comes_back(consumption):
    """Messages a remoting producer sent, received over gRPC with a TAG filter and acked; one has its
    invisible duration changed to 1 s instead, and is delivered again as attempt 2."""
    received = consumption.of(0, "received")
    explain = consumption.result.explain()
    assert {e["body"] for e in received} == {"s-0", "s-1", "s-renew"}, explain
    sent_ids = {e["msgId"] for e in consumption.sent.of("sent")}
    assert {e["msgId"] for e in received} <= sent_ids
    assert {e["tag"] for e in received} == {"TagA"}
    renewed = [e for e in received if e["body"] == "s-renew"]
    assert [e["attempt"] for e in renewed] == [1, 2], explain
    assert renewed[1]["msgId"] == renewed[0]["msgId"]
    assert renewed[1]["at"] - renewed[0]["at"] >= 900  # not before its 1 s of invisibility


def test_push_consumer_retries_a_failure_then_it_goes_to_the_dlq(grpc_server, consumption):
    """A PushConsumer's FAILURE is delivered again after the group's backoff (groupRetryPolicy), as often as
    the group's attempts (retryMaxTimes + 1); out of attempts the message goes to %DLQ%group. SUCCESS is
    consumed once."""
    consumed = consumption.of(2, "consumed")
    explain = consumption.result.explain()
    assert [e["attempt"] for e in consumed if e["body"] == "p-fail"] == [1, 2], explain
    assert {e["body"]: e["attempt"] for e in consumed if e["body"] != "p-fail"} == {
        m["body"]: 1 for m in CONSUMED if m["body"] != "p-fail"}, explain
    failed = [e["at"] for e in consumed if e["body"] == "p-fail"]
    assert failed[1] - failed[0] >= 900  # the group's backoff
    assert [m.body for m in dlq_messages(grpc_server, consumption.push_group)] == [b"p-fail"]


def test_a_fifo_group_receives_a_message_group_in_order(consumption):
    """A message group on a FIFO topic, received in order by a SimpleConsumer of an orderly group."""
    received = consumption.of(1, "received")
    assert [e["body"] for e in received] == FIFO_BODIES, consumption.result.explain()
    assert {e["messageGroup"] for e in received} == {"order-7"}


def test_bad_receipt_handles_and_consumer_resources_get_the_proxys_status_codes(grpc_server, stub, normal_topic):
    """As a consumer whose settings the server has (the proxy fails on renewals of clients without)."""
    group = pb.Resource(name=create_group(grpc_server))
    topic = pb.Resource(name=normal_topic)
    client = (("x-mq-client-id", f"compat-grpc-consumer-{uuid.uuid4().hex}"), ("x-mq-language", "PYTHON"))
    commands, stream = _consumer_telemetry(stub, group, topic, client)
    try:
        assert next(stream).status.code == pb.OK
        answers = _consumer_refusals(grpc_server, stub, normal_topic, group, topic, client)
    finally:
        commands.put(None)
    got = {case: (pb.Code.Name(answer.code), answer.message) for case, answer in answers.items()}
    assert {case: code for case, (code, _) in got.items()} == {
        "ack": "MULTIPLE_RESULTS", "ack expired": "INVALID_RECEIPT_HANDLE", "ack malformed": "INTERNAL_SERVER_ERROR",
        "renew expired": "INVALID_RECEIPT_HANDLE", "forward without commit offset": "INVALID_RECEIPT_HANDLE",
        "assign": "OK", "assign unknown topic": "TOPIC_NOT_FOUND", "assign bad group": "ILLEGAL_CONSUMER_GROUP",
        "assign system group": "ILLEGAL_CONSUMER_GROUP"}, got
    assert got["ack expired"][1].endswith("receipt handle is expired")
    assert got["renew expired"][1].endswith("receipt handle is expired")
    assert got["forward without commit offset"][1].endswith("commit log offset is empty")


def _consumer_telemetry(stub, group: pb.Resource, topic: pb.Resource, client: tuple):
    """A consumer's Telemetry stream, opened with its settings; ``put(None)`` on the queue closes it."""
    import queue

    commands: queue.Queue = queue.Queue()
    commands.put(service.TelemetryCommand(settings=pb.Settings(
        client_type=pb.SIMPLE_CONSUMER, request_timeout=Duration(seconds=3), subscription=pb.Subscription(
            group=group, subscriptions=[pb.SubscriptionEntry(topic=topic, expression=pb.FilterExpression(
                type=pb.TAG, expression="*"))]))))
    return commands, stub.Telemetry(iter(commands.get, None), metadata=client, timeout=60)


def test_clients_are_told_the_retry_and_receive_settings_of_the_servers_keys(grpc_server, stub, normal_topic):
    """The Telemetry settings a producer and a consumer get back carry the proxy's keys (:data:`CLIENT_SETTINGS`):
    the producer's attempts and backoff, the largest body and the type check; the consumer's receive batch
    and long-polling time, with its group's attempts (retryMaxTimes + 1) and the proxy's default backoff."""
    import queue

    topic = pb.Resource(name=normal_topic)
    client = (("x-mq-client-id", f"compat-grpc-settings-{uuid.uuid4().hex}"), ("x-mq-language", "PYTHON"))
    commands: queue.Queue = queue.Queue()
    commands.put(service.TelemetryCommand(settings=pb.Settings(
        client_type=pb.PRODUCER, request_timeout=Duration(seconds=3), publishing=pb.Publishing(topics=[topic]))))
    stream = stub.Telemetry(iter(commands.get, None), metadata=client, timeout=30)
    try:
        producer = next(stream)
    finally:
        commands.put(None)
    group = pb.Resource(name=create_group(grpc_server, retry_max_times=5))
    consumer_client = (("x-mq-client-id", f"compat-grpc-settings-{uuid.uuid4().hex}"), ("x-mq-language", "PYTHON"))
    consumer_commands, consumer_stream = _consumer_telemetry(stub, group, topic, consumer_client)
    try:
        consumer = next(consumer_stream)
    finally:
        consumer_commands.put(None)
    assert producer.status.code == consumer.status.code == pb.OK
    backoff = producer.settings.backoff_policy
    exponential = backoff.exponential_backoff
    assert (backoff.max_attempts, exponential.initial.ToMilliseconds(), exponential.max.ToMilliseconds(),
            exponential.multiplier) == (4, 20, 3000, 3)
    publishing = producer.settings.publishing
    assert (publishing.max_body_size, publishing.validate_message_type) == (4 * 1024 * 1024, True)
    subscription = consumer.settings.subscription
    assert (subscription.receive_batch_size, subscription.long_polling_timeout.ToMilliseconds(),
            subscription.fifo) == (24, 15000, False)
    assert consumer.settings.backoff_policy.max_attempts == 6
    assert [d.ToMilliseconds() for d in consumer.settings.backoff_policy.customized_backoff.next][:4] == [
        1000, 5000, 10000, 30000]


def test_a_consumer_of_a_group_the_broker_lacks_is_refused(stub, normal_topic):
    """Whatever autoCreateSubscriptionGroup says: the Telemetry stream ends INVALID_ARGUMENT."""
    client = (("x-mq-client-id", f"compat-grpc-consumer-{uuid.uuid4().hex}"), ("x-mq-language", "PYTHON"))
    commands, stream = _consumer_telemetry(stub, pb.Resource(name=f"grpc_pop_none_{uuid.uuid4().hex[:8]}"),
                                           pb.Resource(name=normal_topic), client)
    try:
        with pytest.raises(grpc.RpcError) as refused:
            next(stream)
    finally:
        commands.put(None)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "group not found" in refused.value.details()


def _consumer_refusals(grpc_server, stub, normal_topic: str, group: pb.Resource, topic: pb.Resource,
                       client: tuple) -> dict:
    expired = "0 1000 1000 0 0 broker-a 0 0 0"  # visible again long ago
    answers = {}
    acked = stub.AckMessage(service.AckMessageRequest(group=group, topic=topic, entries=[
        service.AckMessageEntry(message_id="A", receipt_handle=expired),
        service.AckMessageEntry(message_id="B", receipt_handle="not-a-handle")]), metadata=client)
    answers["ack"] = acked.status
    answers["ack expired"], answers["ack malformed"] = (e.status for e in acked.entries)
    answers["renew expired"] = stub.ChangeInvisibleDuration(service.ChangeInvisibleDurationRequest(
        group=group, topic=topic, receipt_handle=expired, invisible_duration=Duration(seconds=5), message_id="A"),
        metadata=client).status
    answers["forward without commit offset"] = stub.ForwardMessageToDeadLetterQueue(
        service.ForwardMessageToDeadLetterQueueRequest(group=group, topic=topic, message_id="A",
                                                       receipt_handle=expired.rsplit(" ", 1)[0]), metadata=client).status
    host, port = grpc_server.grpc_endpoint.rsplit(":", 1)
    endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))])
    for case, (topic_name, group_name) in {"assign": (normal_topic, group.name),
                                           "assign unknown topic": ("CompatGrpcNoSuchTopic", group.name),
                                           "assign bad group": (normal_topic, "bad group!"),
                                           "assign system group": (normal_topic, "CID_RMQ_SYS_TRANS")}.items():
        answers[case] = stub.QueryAssignment(service.QueryAssignmentRequest(
            topic=pb.Resource(name=topic_name), group=pb.Resource(name=group_name), endpoints=endpoints),
            metadata=client).status
    return answers


def _received_one(consumer, not_ready: type[Exception], within: float = 30.0):
    """The one message the Python SDK's SimpleConsumer receives next, its long polls repeated until it comes.
    ``not_ready``: what the SDK raises until its settings reach the server (its start does not wait for
    that). A message made visible again comes back once the server's revive has run: on a loaded machine
    Apache's POP revive can take longer than one poll."""
    deadline = time.monotonic() + within
    while True:
        try:
            received = consumer.receive(16, 10)
        except not_ready:
            received = None
            time.sleep(0.1)
        if received:
            [message] = received
            return message
        assert time.monotonic() < deadline, f"nothing received within {within:g} s"


def test_apaches_python_sdk_simple_consumer_receives_renews_and_acks(grpc_server, stub):
    """rocketmq-python-client's SimpleConsumer: a message it renews for 1 s instead of acking comes back as
    attempt 2, then is acked."""
    from rocketmq.v5.client import ClientConfiguration, Credentials
    from rocketmq.v5.consumer.simple.simple_consumer import SimpleConsumer
    from rocketmq.v5.exception.client_exception import InternalErrorException
    from rocketmq.v5.model import FilterExpression

    topic = grpc_server.create_topic("NORMAL")
    answer = stub.SendMessage(service.SendMessageRequest(messages=[_message(topic, b"py-one", tag="TagPy")]),
                              metadata=CLIENT)
    assert answer.status.code == pb.OK, answer.status.message
    consumer = SimpleConsumer(ClientConfiguration(grpc_server.grpc_endpoint, Credentials()), create_group(grpc_server),
                              {topic: FilterExpression("TagPy")}, await_duration=5)
    consumer.startup()
    try:
        first = _received_one(consumer, InternalErrorException)
        assert (first.body, first.tag, first.delivery_attempt) == (b"py-one", "TagPy", 1)
        consumer.change_invisible_duration(first, 1)
        again = _received_one(consumer, InternalErrorException)
        assert (again.body, again.delivery_attempt, again.message_id) == (b"py-one", 2, first.message_id)
        consumer.ack(again)
    finally:
        consumer.shutdown()


# ---------------------------------------------------------------------- the Go v5, Node.js and Python SDKs

#: what the Go v5 Producer sends to a MIXED topic; each reaches its SimpleConsumer and a remoting consumer
GO5_MESSAGES = [
    {"body": "go-plain", "tag": "TagGo", "keys": "gk1,gk2", "prop.color": "blue"},
    *({"body": f"go-fifo-{i}", "group": "go-order"} for i in range(3)),
    {"body": "go-committed", "txn": "commit"},
    {"body": "go-delayed", "delayMs": str(DELAY_MS)},
    {"body": "go-checked", "txn": "open"},
]


@dataclass
class GoExchange:
    """The Go v5 harness's run (``sent`` and ``received`` by its SimpleConsumer) and a remoting consumer's."""

    go: ScenarioResult
    remoting: ScenarioResult

    def explain(self) -> str:
        return self.go.explain() + "\n" + self.remoting.explain()

    def sent(self, body: str) -> dict:
        index = [fields["body"] for fields in GO5_MESSAGES].index(body)
        return self.go.of("sent")[index]

    def got(self, body: str) -> dict:
        return next(e for e in self.go.of("received") if e["body"] == body)

    def remoting_got(self, body: str) -> dict:
        return next(e for e in self.remoting.of("received") if e["body"] == body)


@pytest.fixture(scope="module")
def go5_exchange(grpc_server, compat_home, go_harness, tmp_path_factory) -> GoExchange:
    """:data:`GO5_MESSAGES` sent by the Go v5 Producer, then received and acked by its SimpleConsumer, while
    the Go remoting push consumer (rocketmq-client-go v2) reads the topic from its first offset."""
    from . import grpc_sdks
    from .conftest import _need

    _need("go")
    go5 = grpc_sdks.go5(toolchain.go5_harness(), compat_home / f"go5-{grpc_server.kind}")
    topic = grpc_server.create_topic("MIXED")
    spec = tmp_path_factory.mktemp("go5-spec") / "messages.tsv"
    spec.write_text("".join("\t".join(f"{k}={v}" for k, v in fields.items()) + "\n" for fields in GO5_MESSAGES))
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        remoting = pool.submit(go_harness, "consume", "-n", grpc_server.namesrv_addr, "-t", topic,
                               "-g", f"go5_check_{uuid.uuid4().hex[:8]}", "-count", str(len(GO5_MESSAGES)),
                               "-timeout", f"{WAIT}s")
        go = go5("exchange", "-endpoint", grpc_server.grpc_endpoint, "-t", topic, "-g", create_group(grpc_server),
                 "-spec", str(spec), "-timeout", f"{WAIT}s", timeout=WAIT + 30)
        exchanged = GoExchange(go, remoting.result())
    assert go.returncode == 0 and exchanged.remoting.returncode == 0, exchanged.explain()
    return exchanged


def test_go5_sends_reach_its_simple_consumer_and_a_remoting_consumer(go5_exchange):
    """Every message, with its tag, keys and properties and the message id the send reported, received
    over gRPC (and acked) and over remoting."""
    bodies = {fields["body"] for fields in GO5_MESSAGES}
    explain = go5_exchange.explain()
    assert {e["body"] for e in go5_exchange.go.of("received")} == bodies, explain
    assert {e["body"] for e in go5_exchange.remoting.of("received")} == bodies, explain
    plain, remote = go5_exchange.got("go-plain"), go5_exchange.remoting_got("go-plain")
    assert (plain["tag"], sorted(plain["keys"]), plain["properties"]["color"]) == ("TagGo", ["gk1", "gk2"], "blue"), explain
    assert (remote["tags"], remote["keys"], remote["properties"]["color"]) == ("TagGo", "gk1 gk2", "blue"), explain
    for body in bodies:
        assert go5_exchange.got(body)["msgId"] == go5_exchange.remoting_got(body)["msgId"] == go5_exchange.sent(body)["msgId"]


def test_go5_message_group_stays_on_one_queue_in_order(go5_exchange):
    fifo = sorted((e for e in go5_exchange.remoting.of("received") if e["body"].startswith("go-fifo-")),
                  key=lambda e: e["queueOffset"])
    assert [e["body"] for e in fifo] == ["go-fifo-0", "go-fifo-1", "go-fifo-2"], go5_exchange.explain()
    assert len({e["queueId"] for e in fifo}) == 1
    assert {go5_exchange.got(e["body"])["messageGroup"] for e in fifo} == {"go-order"}


def test_go5_received_user_properties_are_the_proxys(go5_exchange):
    """What the SimpleConsumer gets as user properties: the sender's, and the broker's names that Apache's
    proxy does not reserve (a message group's sharding key, a transaction's id)."""
    explain = go5_exchange.explain()
    assert go5_exchange.got("go-plain")["properties"] == {"color": "blue"}, explain
    for body in ("go-fifo-0", "go-fifo-1", "go-fifo-2"):
        assert go5_exchange.got(body)["properties"] == {"__SHARDINGKEY": "go-order"}, explain
    assert go5_exchange.got("go-committed")["properties"] == {
        "__transactionId__": go5_exchange.sent("go-committed")["msgId"]}, explain


def test_go5_committed_transaction_and_delayed_message(go5_exchange):
    """The committed half message is delivered; the delayed one not before its delivery time."""
    assert go5_exchange.remoting_got("go-committed")["properties"].get("TRAN_MSG") == "true", go5_exchange.explain()
    assert not {"REAL_TOPIC", "REAL_QID"} & set(go5_exchange.remoting_got("go-committed")["properties"])
    delayed = go5_exchange.remoting_got("go-delayed")
    assert delayed["storeTimestamp"] - go5_exchange.sent("go-delayed")["sentAt"] >= DELAY_MS - 500, go5_exchange.explain()
    assert go5_exchange.got("go-delayed")["at"] - go5_exchange.sent("go-delayed")["sentAt"] >= DELAY_MS - 500


def test_go5_open_transaction_is_checked_back_and_committed(go5_exchange):
    """The producer's checker is asked about the half message it left open (with the user properties the
    proxy gives it) and commits it: both consumers get it."""
    checks = go5_exchange.go.of("checked")  # a second check may come before the first answer is in
    sent_id = go5_exchange.sent("go-checked")["msgId"]
    assert {(e["body"], e["msgId"]) for e in checks} == {("go-checked", sent_id)}, go5_exchange.explain()
    assert checks[0]["properties"] == {"TRANSACTION_CHECK_TIMES": "1", "__transactionId__": sent_id}
    assert go5_exchange.got("go-checked")["msgId"] == go5_exchange.remoting_got("go-checked")["msgId"] == sent_id


def test_nodejs_sdk_sends_commits_a_transaction_and_its_simple_consumer_acks(grpc_server, compat_home):
    """rocketmq-client-nodejs: a message with tag, keys and a property and a committed transaction, both
    received and acked by its SimpleConsumer."""
    from . import grpc_sdks
    from .conftest import _need

    _need("node", "npm")
    node = grpc_sdks.node(toolchain.node_modules(), compat_home / f"node-{grpc_server.kind}")
    topic = grpc_server.create_topic("MIXED")
    run = node("exchange", grpc_server.grpc_endpoint, topic, create_group(grpc_server), timeout=WAIT + 30).check()
    sent = {e["body"]: e["msgId"] for e in run.of("sent")}
    received = {e["body"]: e for e in run.of("received")}
    assert set(received) == set(sent) == {"node-plain", "node-committed"}, run.explain()
    plain = received["node-plain"]
    assert (plain["tag"], sorted(plain["keys"]), plain["properties"]["color"]) == ("TagNode", ["nk1", "nk2"], "green")
    assert {body: e["msgId"] for body, e in received.items()} == sent


def test_apaches_python_sdk_producer_sends_and_commits_a_transaction(grpc_server):
    """rocketmq-python-client's Producer: a message with tag, keys and a property, and one in a transaction
    it commits, received by its SimpleConsumer."""
    from rocketmq.v5.client import ClientConfiguration, Credentials
    from rocketmq.v5.consumer.simple.simple_consumer import SimpleConsumer
    from rocketmq.v5.exception.client_exception import InternalErrorException
    from rocketmq.v5.model import FilterExpression, Message
    from rocketmq.v5.producer import Producer, TransactionChecker

    class Commit(TransactionChecker):
        def check(self, message):
            from rocketmq.grpc_protocol import TransactionResolution

            return TransactionResolution.COMMIT

    def message(body: bytes) -> Message:
        msg = Message()
        msg.topic, msg.body, msg.tag = topic, body, "TagPy"
        return msg

    topic = grpc_server.create_topic("MIXED")
    configuration = ClientConfiguration(grpc_server.grpc_endpoint, Credentials())
    producer = Producer(configuration, (topic,), Commit())
    producer.startup()
    try:
        plain = message(b"py-plain")
        plain.keys = "pk1"
        plain.add_property("color", "yellow")
        sent = {b"py-plain": producer.send(plain).message_id}
        transaction = producer.begin_transaction()
        sent[b"py-committed"] = producer.send(message(b"py-committed"), transaction).message_id
        transaction.commit()
    finally:
        producer.shutdown()
    consumer = SimpleConsumer(configuration, create_group(grpc_server), {topic: FilterExpression("TagPy")},
                              await_duration=5)
    consumer.startup()
    received = {}
    try:
        deadline = time.monotonic() + WAIT
        while len(received) < len(sent) and time.monotonic() < deadline:
            try:
                views = consumer.receive(16, 15)
            except InternalErrorException:  # the SDK's start does not wait for its settings to reach the server
                time.sleep(0.1)
                continue
            for view in views:
                consumer.ack(view)
                received[view.body] = view
    finally:
        consumer.shutdown()
    assert {body: view.message_id for body, view in received.items()} == sent
    plain = received[b"py-plain"]
    assert (plain.tag, set(plain.keys), plain.properties["color"]) == ("TagPy", {"pk1"}, "yellow")


# ---------------------------------------------------------------------- the rest of MessagingService (issue 27)


def test_the_pull_consumer_methods_are_not_served(grpc_server, stub, normal_topic):
    """Apache 5.5.0's proxy serves no PullMessage, QueryOffset, GetOffset or UpdateOffset (its
    GrpcMessagingApplication leaves them to the generated base): UNIMPLEMENTED, as FerryMQ answers them."""
    group, topic = pb.Resource(name=create_group(grpc_server)), pb.Resource(name=normal_topic)
    queue = pb.MessageQueue(topic=topic, id=0, broker=pb.Broker(name="any"))
    calls = {
        "QueryOffset": (stub.QueryOffset, service.QueryOffsetRequest(message_queue=queue,
                                                                      query_offset_policy=pb.BEGINNING)),
        "GetOffset": (stub.GetOffset, service.GetOffsetRequest(group=group, message_queue=queue)),
        "UpdateOffset": (stub.UpdateOffset, service.UpdateOffsetRequest(group=group, message_queue=queue, offset=1)),
        "PullMessage": (lambda request, **kw: list(stub.PullMessage(request, **kw)), service.PullMessageRequest(
            group=group, message_queue=queue, offset=0, batch_size=1,
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"))),
    }
    codes = {}
    for name, (call, request) in calls.items():
        with pytest.raises(grpc.RpcError) as refused:
            call(request, metadata=CLIENT, timeout=10)
        codes[name] = refused.value.code()
    assert codes == dict.fromkeys(calls, grpc.StatusCode.UNIMPLEMENTED)


def _receive(stub, client: tuple, group: pb.Resource, topic: pb.Resource, wait: float, **extra) -> list[pb.Message]:
    """The messages of ReceiveMessage calls (long polling 5 s each) until some come or ``wait`` s pass."""
    deadline = time.monotonic() + wait
    while True:
        request = service.ReceiveMessageRequest(
            group=group, message_queue=pb.MessageQueue(topic=topic, id=-1), batch_size=16,
            filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
            long_polling_timeout=Duration(seconds=5), **extra)
        got = [r.message for r in stub.ReceiveMessage(request, metadata=client, timeout=15)
               if r.WhichOneof("content") == "message"]
        if got or time.monotonic() > deadline:
            return got


def test_a_terminated_clients_auto_renewed_messages_come_back_at_once(grpc_server, stub):
    """A message received with auto_renew is held invisible for its client (60 s, renewed while it is
    there); once the client says it terminates, the message is visible again within seconds
    (invisibleTimeMillisWhenClear) and another client of the group gets it as attempt 2. A termination
    from a client the server has no settings of is refused UNRECOGNIZED_CLIENT_TYPE."""
    topic, group = pb.Resource(name=grpc_server.create_topic("NORMAL")), pb.Resource(name=create_group(grpc_server))
    answer = stub.SendMessage(service.SendMessageRequest(messages=[_message(topic.name, b"held")]), metadata=CLIENT)
    assert answer.status.code == pb.OK, answer.status.message
    clients, streams = [], []  # each client's Telemetry stream stays open, as the SDKs keep it
    for _ in range(2):
        client = (("x-mq-client-id", f"compat-grpc-renew-{uuid.uuid4().hex}"), ("x-mq-language", "PYTHON"))
        commands, stream = _consumer_telemetry(stub, group, topic, client)
        streams.append((commands, stream))
        assert next(stream).status.code == pb.OK
        heartbeat = stub.Heartbeat(service.HeartbeatRequest(group=group, client_type=pb.SIMPLE_CONSUMER),
                                   metadata=client)
        assert heartbeat.status.code == pb.OK, heartbeat.status.message
        clients.append(client)
    try:
        [first] = _receive(stub, clients[0], group, topic, 10, auto_renew=True)
        gone = time.monotonic()
        ended = stub.NotifyClientTermination(service.NotifyClientTerminationRequest(group=group), metadata=clients[0])
        assert ended.status.code == pb.OK, ended.status.message
        [again] = _receive(stub, clients[1], group, topic, 15, invisible_duration=Duration(seconds=10))
        back_after = time.monotonic() - gone
        acked = stub.AckMessage(service.AckMessageRequest(group=group, topic=topic, entries=[service.AckMessageEntry(
            message_id=again.system_properties.message_id, receipt_handle=again.system_properties.receipt_handle)]),
            metadata=clients[1])
    finally:
        for commands, _stream in streams:
            commands.put(None)
    assert (first.body, first.system_properties.delivery_attempt) == (b"held", 1)
    assert (again.body, again.system_properties.delivery_attempt) == (b"held", 2)
    assert again.system_properties.message_id == first.system_properties.message_id
    assert back_after < 10, back_after  # not after the 60 s it was received invisible for
    assert acked.status.code == pb.OK, acked.status.message
    unknown = (("x-mq-client-id", f"compat-grpc-{uuid.uuid4().hex}"), ("x-mq-language", "PYTHON"))
    assert stub.NotifyClientTermination(service.NotifyClientTerminationRequest(group=group),
                                        metadata=unknown).status.code == pb.UNRECOGNIZED_CLIENT_TYPE


SECOND_BROKER = "grpc-broker-b"


@contextlib.contextmanager
def second_broker(grpc_server: GrpcServer, home, topic: str, queues: int):
    """A second master joining the server's name server for the test's time, with ``topic``; its address.
    FerryMQ's is ``ferrymq broker``. Apache's is its registration alone (REGISTER_BROKER on a connection
    kept open, with the topic): the proxy knows the other brokers from the name server's routes only, and
    a broker JVM costs 20 to 50 s to boot here. It leaves the routes when it stops (the connection
    closes), so later tests see one broker again."""
    from .apache import _routes_to
    from .processes import LOOPBACK, Child, free_port
    from .socket_client import Connection, TopicSpec, register_broker_request

    if grpc_server.kind == "apache":
        addr = f"{LOOPBACK}:{free_port()}"
        registration = Connection(grpc_server.namesrv_addr)
        # more than one topic: Apache's name server takes a single-topic update from a broker it knows only
        reply = registration.call(register_broker_request("CompatCluster", SECOND_BROKER, addr, [
            TopicSpec(topic, queues, queues), TopicSpec(f"{topic}_other", 1, 1)]))
        assert reply.code == 0, reply.remark
        stop = registration.close
    else:
        import os
        import sys

        from ferrymq.testing.server import SMALL_STORE

        home.mkdir(parents=True, exist_ok=True)
        port = free_port(also_free=(-2, 1))
        addr = f"{LOOPBACK}:{port}"
        conf = home / "broker.conf"
        conf.write_text("".join(f"{key}={value}\n" for key, value in {
            **SMALL_STORE, "brokerName": SECOND_BROKER, "namesrvAddr": grpc_server.namesrv_addr, "listenPort": port,
            "bindAddress": LOOPBACK, "brokerIP1": LOOPBACK, "storePathRootDir": home / "store",
            "grpcListenPort": 0, "httpListenPort": 0, "mqttListenPort": 0}.items()))
        child = Child("FerryMQ broker", [sys.executable, "-m", "ferrymq.testing.child", str(os.getpid()), "broker",
                                         "-c", str(conf)], home / "broker.out").start()
        stop = child.stop
        try:
            child.wait_until(lambda: _routes_to(grpc_server.namesrv_addr, "TBW102", SECOND_BROKER),
                             "registered with the name server", 30)
            with BlockingMQAdmin(grpc_server.namesrv_addr) as admin:
                admin.create_topic(topic, queues, broker_addr=addr, attributes={"message.type": "NORMAL"})
        except BaseException:
            child.kill()
            raise
    try:
        yield addr
    finally:
        stop()
        deadline = time.monotonic() + 10
        while _routes_to(grpc_server.namesrv_addr, "TBW102", SECOND_BROKER) and time.monotonic() < deadline:
            time.sleep(0.1)


def test_route_and_assignment_list_every_broker_and_a_send_to_either_is_served(grpc_server, stub, tmp_path):
    """With a second broker in the cluster, QueryRoute lists the queues of both (queue ids from 0 on each,
    every broker at the endpoint the client asked with: this server serves them all, as the proxy's local
    mode) and QueryAssignment a queue -1 on each; a send aimed at either broker's endpoint is stored by
    this server's own broker, where a receive naming the other broker finds it."""
    host, port = grpc_server.grpc_endpoint.rsplit(":", 1)
    endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))])
    topic = pb.Resource(name=grpc_server.create_topic("NORMAL"))
    group = pb.Resource(name=create_group(grpc_server))
    with second_broker(grpc_server, tmp_path / "broker-b", topic.name, 4) as second_addr:
        with BlockingMQAdmin(grpc_server.namesrv_addr) as admin:
            deadline = time.monotonic() + 20
            while len(admin.wait_for_route(topic.name).queue_datas) < 2 and time.monotonic() < deadline:
                time.sleep(0.1)
        routed = stub.QueryRoute(service.QueryRouteRequest(topic=topic, endpoints=endpoints), metadata=CLIENT)
        assert routed.status.code == pb.OK, routed.status.message
        brokers = {q.broker.name for q in routed.message_queues}
        assert len(brokers) == 2 and SECOND_BROKER in brokers
        assert sorted((q.broker.name, q.broker.id, q.id, q.permission) for q in routed.message_queues) == sorted(
            (name, 0, queue_id, pb.READ_WRITE) for name in brokers for queue_id in range(4))
        assert all(q.broker.endpoints == endpoints and list(q.accept_message_types) == [pb.NORMAL]
                   for q in routed.message_queues)
        client = (("x-mq-client-id", f"compat-grpc-two-{uuid.uuid4().hex}"), ("x-mq-language", "PYTHON"))
        commands, stream = _consumer_telemetry(stub, group, topic, client)
        try:
            assert next(stream).status.code == pb.OK
            assigned = stub.QueryAssignment(service.QueryAssignmentRequest(topic=topic, group=group,
                                                                           endpoints=endpoints), metadata=client)
            for name in sorted(brokers):  # the SDK sends to the endpoints of the queue it picked
                sent = stub.SendMessage(service.SendMessageRequest(messages=[_message(topic.name, name.encode())]),
                                        metadata=CLIENT)
                assert sent.status.code == pb.OK, sent.status.message
            received = []
            deadline = time.monotonic() + 15
            while len(received) < 2 and time.monotonic() < deadline:
                request = service.ReceiveMessageRequest(
                    group=group, message_queue=pb.MessageQueue(topic=topic, id=-1, broker=pb.Broker(name=SECOND_BROKER)),
                    batch_size=16, filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"),
                    invisible_duration=Duration(seconds=10), long_polling_timeout=Duration(seconds=5))
                received += [r.message for r in stub.ReceiveMessage(request, metadata=client, timeout=15)
                             if r.WhichOneof("content") == "message"]
        finally:
            commands.put(None)
    assert assigned.status.code == pb.OK, assigned.status.message
    assert sorted((a.message_queue.broker.name, a.message_queue.id, a.message_queue.permission)
                  for a in assigned.assignments) == sorted((name, -1, pb.READ_WRITE) for name in brokers)
    assert sorted(m.body for m in received) == sorted(name.encode() for name in brokers)
    stored_at = {m.system_properties.store_host for m in received}
    assert len(stored_at) == 1 and second_addr not in stored_at, stored_at


def test_an_admins_verify_request_reaches_a_grpc_consumer_over_telemetry(grpc_server, stub):
    """A gRPC consumer is in the broker's consumer table (mqadmin consumerConnection lists it), and
    mqadmin's consumeMessage (CONSUME_MESSAGE_DIRECTLY, sent here as mqadmin sends it) reaches it over its
    Telemetry stream as a VerifyMessageCommand with the stored message; its answer comes back as
    CR_SUCCESS. (consumerStatus -s, a PrintThreadStackTraceCommand, is relayed the same way by FerryMQ:
    Apache's local mode never asks the client, its broker forwarding the request without the decoded
    header the proxy reads jstackEnable from, so mqadmin times out there.)"""
    from ferrymq.sdk.blocking_clients import BlockingProducer
    from ferrymq.sdk.message import Message
    from ferrymq.wire.bodies import ConsumeMessageDirectlyResult
    from ferrymq.wire.codes import RequestCode, ResponseCode
    from ferrymq.wire.command import request
    from ferrymq.wire.headers import ConsumeMessageDirectlyResultRequestHeader

    from .socket_client import call

    topic, group = pb.Resource(name=grpc_server.create_topic("NORMAL")), pb.Resource(name=create_group(grpc_server))
    producer = BlockingProducer(f"compat_grpc_{uuid.uuid4().hex[:8]}", grpc_server.namesrv_addr, send_msg_timeout=15)
    producer.start()
    try:
        sent = producer.send(Message(topic.name, b"to-verify", tags="TagV"))
    finally:
        producer.shutdown()
    client_id = f"compat-grpc-admin-{uuid.uuid4().hex}"
    client = (("x-mq-client-id", client_id), ("x-mq-language", "JAVA"))
    commands, stream = _consumer_telemetry(stub, group, topic, client)
    with BlockingMQAdmin(grpc_server.namesrv_addr, timeout=10) as admin, \
            concurrent.futures.ThreadPoolExecutor(1) as pool:
        [broker_addr] = admin.master_addrs()
        try:
            assert next(stream).status.code == pb.OK
            heartbeat = stub.Heartbeat(service.HeartbeatRequest(group=group, client_type=pb.SIMPLE_CONSUMER),
                                       metadata=client)
            assert heartbeat.status.code == pb.OK, heartbeat.status.message
            listed = admin.api.get_consumer_connections(broker_addr, group.name)
            header = ConsumeMessageDirectlyResultRequestHeader(group.name, client_id, sent.offset_msg_id, topic=topic.name)
            verifying = pool.submit(call, broker_addr, request(RequestCode.CONSUME_MESSAGE_DIRECTLY, header.to_ext()), 10)
            verify = next(stream).verify_message_command
            commands.put(service.TelemetryCommand(status=pb.Status(code=pb.OK), verify_message_result=service.VerifyMessageResult(
                nonce=verify.nonce)))
            verified = verifying.result(15)
        finally:
            commands.put(None)
    assert client_id in {c.client_id for c in listed.connection_set}
    assert verify.nonce
    assert (verify.message.body, verify.message.system_properties.tag) == (b"to-verify", "TagV")
    assert verified.code == ResponseCode.SUCCESS, verified.remark
    assert ConsumeMessageDirectlyResult.decode(verified.body).consume_result == "CR_SUCCESS"


# ---------------------------------------------------------------------- the PROXY protocol

#: each relay's PROXY protocol header: (version, the client it names, or None for v2's LOCAL command)
PROXIED = {
    "v1": (1, ("10.20.30.40", 4567)),
    "v2": (2, ("10.20.30.41", 4568)),
    "v2-local": (2, None),
}


def _send_proxied(grpc_server: GrpcServer, topic: str, headers: dict[str, bytes]) -> dict[str, pb.Status]:
    """A message (its body the header's name) sent through a relay writing each of ``headers`` first: the
    send's status by name."""
    from .proxy_relay import relay

    statuses = {}
    for name, first in headers.items():
        with relay(grpc_server.grpc_endpoint, first) as endpoint, grpc.insecure_channel(endpoint) as channel:
            statuses[name] = service_grpc.MessagingServiceStub(channel).SendMessage(service.SendMessageRequest(
                messages=[_message(topic, name.encode())]), metadata=CLIENT, timeout=15).status
    return statuses


def _born_hosts(grpc_server: GrpcServer, stub, topic: pb.Resource, count: int) -> dict[str, str]:
    """The born host of each message of ``topic`` (``count`` expected), by body, as a new group receives them."""
    group = pb.Resource(name=create_group(grpc_server))
    client = (("x-mq-client-id", f"compat-grpc-proxied-{uuid.uuid4().hex}"), ("x-mq-language", "PYTHON"))
    commands, stream = _consumer_telemetry(stub, group, topic, client)
    received: list[pb.Message] = []
    try:
        assert next(stream).status.code == pb.OK
        deadline = time.monotonic() + 20
        while len(received) < count and time.monotonic() < deadline:
            received += _receive(stub, client, group, topic, 5, invisible_duration=Duration(seconds=30))
    finally:
        commands.put(None)
    return {m.body.decode(): m.system_properties.born_host for m in received}


def test_a_proxy_protocol_header_names_the_client_a_message_is_born_at(grpc_server, stub):
    """A load balancer's PROXY protocol header ahead of a plain gRPC client (v1, v2): the message the client
    sends is born at the address the header names; v2's LOCAL command (the balancer's own connection) leaves
    the connection's address."""
    from .proxy_relay import header

    topic = pb.Resource(name=grpc_server.create_topic("NORMAL"))
    sent = _send_proxied(grpc_server, topic.name, {name: header(*spec) for name, spec in PROXIED.items()})
    assert {name: status.code for name, status in sent.items()} == dict.fromkeys(PROXIED, pb.OK), sent
    born = _born_hosts(grpc_server, stub, topic, len(PROXIED))
    assert set(born) == set(PROXIED), born
    assert (born["v1"], born["v2"]) == ("10.20.30.40:4567", "10.20.30.41:4568"), born
    assert born["v2-local"].startswith("127.0.0.1:"), born


def test_a_proxy_protocol_header_naming_an_ipv6_client(request, grpc_server, stub):
    """A v2 header naming an IPv6 client: FerryMQ stores the message born at ``[2001:db8::7]:4569``."""
    from .proxy_relay import header

    if grpc_server.kind == "apache":
        request.applymarker(pytest.mark.xfail(strict=True, reason=(
            "Apache 5.5.0's proxy refuses the send INTERNAL_SERVER_ERROR: its born host, written 2001:db8::7:4569, "
            "does not parse back (NullPointerException in CommitLog.asyncPutMessage)")))
    topic = pb.Resource(name=grpc_server.create_topic("NORMAL"))
    sent = _send_proxied(grpc_server, topic.name, {"v2-ipv6": header(2, ("2001:db8::7", 4569))})
    assert sent["v2-ipv6"].code == pb.OK, sent
    assert _born_hosts(grpc_server, stub, topic, 1) == {"v2-ipv6": "[2001:db8::7]:4569"}


BAD_PROXY_HEADERS = {
    "v1 bad address": b"PROXY TCP4 10.20.30.40 nowhere 4567 8081\r\n",
    "v1 too long": b"PROXY TCP4 " + b"1" * 200 + b"\r\n",
    "v2 version 3": b"\r\n\r\n\x00\r\nQUIT\n\x31\x11\x00\x0c" + bytes(12),
}
#: the HTTP/2 connection preface every plain gRPC client sends first
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


@pytest.mark.parametrize("case", BAD_PROXY_HEADERS)
def test_a_bad_proxy_protocol_header_closes_the_connection(grpc_server, case):
    """Whatever follows a header that does not parse (here a plain client's preface) is not served: the
    server closes the connection without a word."""
    import socket

    host, port = grpc_server.grpc_endpoint.rsplit(":", 1)
    answered = b""
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(BAD_PROXY_HEADERS[case] + PREFACE)
        try:
            while chunk := sock.recv(65536):
                answered += chunk
        except ConnectionResetError:
            pass
    assert answered == b""


# ---------------------------------------------------------------------- the end of a client


def _connected_client_ids(grpc_server: GrpcServer, group: str) -> set[str]:
    """The clients the broker's consumer table holds under ``group`` (mqadmin consumerConnection); none when
    the broker answers that the group has no consumer online."""
    from ferrymq.remoting.errors import ResponseCodeError

    with BlockingMQAdmin(grpc_server.namesrv_addr, timeout=10) as admin:
        [broker_addr] = admin.master_addrs()
        try:
            return {c.client_id for c in admin.api.get_consumer_connections(broker_addr, group).connection_set}
        except ResponseCodeError:
            return set()


def test_a_client_whose_telemetry_stream_ends_is_known_until_it_terminates(grpc_server, stub, normal_topic):
    """A consumer whose Telemetry stream ends (the SDKs open a new one when theirs breaks) keeps its settings
    and its place in the broker's consumer table, as on Apache's proxy, which forgets a client only when
    it says it terminates or its heartbeats stop: its heartbeat is answered OK and mqadmin lists it. After
    NotifyClientTermination it is forgotten: its heartbeat is answered UNRECOGNIZED_CLIENT_TYPE and the
    consumer table no longer holds it."""
    topic, group = pb.Resource(name=normal_topic), pb.Resource(name=create_group(grpc_server))
    client_id = f"compat-grpc-end-{uuid.uuid4().hex}"
    client = (("x-mq-client-id", client_id), ("x-mq-language", "PYTHON"))
    commands, stream = _consumer_telemetry(stub, group, topic, client)

    def heartbeat() -> int:
        return stub.Heartbeat(service.HeartbeatRequest(group=group, client_type=pb.SIMPLE_CONSUMER),
                              metadata=client, timeout=10).status.code

    try:
        assert next(stream).status.code == pb.OK
        assert heartbeat() == pb.OK
        listed_while_open = _connected_client_ids(grpc_server, group.name)
    finally:
        commands.put(None)
    assert list(stream) == []  # the server ends its side of the stream with the client's
    after_stream = heartbeat()
    listed_after_stream = _connected_client_ids(grpc_server, group.name)
    ended = stub.NotifyClientTermination(service.NotifyClientTerminationRequest(group=group), metadata=client,
                                         timeout=10)
    after_termination = heartbeat()
    listed_after_termination = _connected_client_ids(grpc_server, group.name)
    assert client_id in listed_while_open
    assert (after_stream, client_id in listed_after_stream) == (pb.OK, True)
    assert ended.status.code == pb.OK, ended.status.message
    assert (after_termination, client_id in listed_after_termination) == (pb.UNRECOGNIZED_CLIENT_TYPE, False)


# ---------------------------------------------------------------------- recalling a delayed message


def test_a_recall_is_refused_as_apaches_broker_refuses_it_by_default(grpc_server, stub):
    """A delayed message's send is answered with its recall handle (``v1 <topic> <broker> <due ms> <message
    id>`` in URL-safe Base64). Apache's broker recalls only with ``recallMessageEnable`` (false by default,
    the one value FerryMQ takes): RecallMessage with the handle is refused INTERNAL_SERVER_ERROR and the
    message is delivered on time; a handle that does not decode is refused INTERNAL_SERVER_ERROR too, a recall
    on a topic of another type MESSAGE_PROPERTY_CONFLICT_WITH_TYPE."""
    import base64

    from google.protobuf.timestamp_pb2 import Timestamp

    topic = pb.Resource(name=grpc_server.create_topic("DELAY"))
    due = Timestamp()
    due.FromMilliseconds(int(time.time() * 1000) + 3000)
    sent = stub.SendMessage(service.SendMessageRequest(messages=[_message(
        topic.name, b"not recalled", message_type=pb.DELAY, delivery_timestamp=due)]), metadata=CLIENT, timeout=15)
    assert sent.status.code == pb.OK, sent.status.message
    entry = sent.entries[0]
    handle = base64.urlsafe_b64decode(entry.recall_handle).decode().split(" ")
    recalled = stub.RecallMessage(service.RecallMessageRequest(topic=topic, recall_handle=entry.recall_handle),
                                  metadata=CLIENT, timeout=15)
    garbled = stub.RecallMessage(service.RecallMessageRequest(topic=topic, recall_handle="not a handle"),
                                 metadata=CLIENT, timeout=15)
    normal = stub.RecallMessage(service.RecallMessageRequest(
        topic=pb.Resource(name=grpc_server.create_topic("NORMAL")), recall_handle=entry.recall_handle),
        metadata=CLIENT, timeout=15)
    delivered = _born_hosts(grpc_server, stub, topic, 1)
    assert (handle[0], handle[1], handle[4]) == ("v1", topic.name, entry.message_id), handle
    assert abs(int(handle[3]) - due.ToMilliseconds()) <= 1000, (handle, due.ToMilliseconds())
    assert pb.Code.Name(recalled.status.code) == "INTERNAL_SERVER_ERROR", recalled.status.message
    assert recalled.status.message.endswith("recall failed, operation is forbidden"), recalled.status.message
    assert pb.Code.Name(garbled.status.code) == "INTERNAL_SERVER_ERROR", garbled.status.message
    assert pb.Code.Name(normal.status.code) == "MESSAGE_PROPERTY_CONFLICT_WITH_TYPE", normal.status.message
    assert list(delivered) == ["not recalled"]
