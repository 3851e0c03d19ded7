"""The gRPC MessagingService of ``ferrymq standalone`` (grpcListenPort), driven with the v2 stubs Apache
generates (rocketmq-python-client): routes, telemetry settings, heartbeats, sends and transactions,
each message checked as a remoting consumer pulls it from the same broker."""

from __future__ import annotations

import queue
import ssl
import time
import uuid
import zlib

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("rocketmq.grpc_protocol")

from google.protobuf.duration_pb2 import Duration  # noqa: E402
from google.protobuf.timestamp_pb2 import Timestamp  # noqa: E402
from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as service  # noqa: E402
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc  # noqa: E402

from ferrymq.sdk.blocking_clients import BlockingMQAdmin, BlockingPullConsumer  # noqa: E402
from ferrymq.sdk.message import PullStatus  # noqa: E402
from ferrymq.testing.server import FerryMQServer  # noqa: E402

from .placements import PLACEMENTS  # noqa: E402

CLIENT = (("x-mq-client-id", "grpc-test@1"),)




@pytest.fixture(scope="module", params=sorted(PLACEMENTS))
def server(request, tmp_path_factory):
    # half messages are checked back after 1 s, every 0.5 s
    conf = {"transactionTimeOut": 1000, "transactionCheckInterval": 500, "grpcEventLoop": request.param}
    with FerryMQServer(tmp_path_factory.mktemp("grpc"), conf, grpc=True) as running:
        yield running


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        yield service_grpc.MessagingServiceStub(channel)


@pytest.fixture(scope="module")
def topics(server):
    """``topics(kind)``: a new topic of message type ``kind`` (NORMAL, FIFO, DELAY, TRANSACTION), 4 queues."""
    with BlockingMQAdmin(server.namesrv_addr) as admin:
        def make(kind: str = "NORMAL") -> str:
            name = f"Grpc{kind.title()}{uuid.uuid4().hex[:8]}"
            admin.create_topic(name, 4, broker_addr=server.broker_addr, attributes={"message.type": kind})
            return name

        yield make


def endpoints(server) -> pb.Endpoints:
    host, port = server.grpc_endpoint.rsplit(":", 1)
    return pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))])


def message(topic: str, body: bytes = b"hello", **system) -> pb.Message:
    system.setdefault("message_id", uuid.uuid4().hex.upper())
    system.setdefault("message_type", pb.NORMAL)
    return pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(**system))


def send(stub, *messages: pb.Message, metadata=CLIENT) -> service.SendMessageResponse:
    return stub.SendMessage(service.SendMessageRequest(messages=messages), metadata=metadata)


def pull_all(server, topic: str, wait: float = 0.0) -> list:
    """Every message of ``topic`` a remoting pull consumer reads, waiting up to ``wait`` s for the first."""
    deadline = time.monotonic() + wait
    with BlockingPullConsumer(f"check_{uuid.uuid4().hex[:8]}", server.namesrv_addr) as consumer:
        while True:
            out = []
            for mq in consumer.fetch_subscribe_queues(topic):
                offset = 0
                while (result := consumer.pull(mq, "*", offset, 32)).status is PullStatus.FOUND:
                    out += result.messages
                    offset = result.next_begin_offset
            if out or time.monotonic() >= deadline:
                return out
            time.sleep(0.2)


def test_the_service_runs_where_grpc_event_loop_says(server, stub):
    stub.QueryRoute(service.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopic")), metadata=CLIENT, timeout=10)
    assert f"to TLS and plain clients, {PLACEMENTS[server.conf['grpcEventLoop']]}" in server.log


def test_route_lists_read_write_queues_at_the_endpoints_asked_with_the_topic_type(server, stub, topics):
    topic = topics("FIFO")
    answer = stub.QueryRoute(service.QueryRouteRequest(topic=pb.Resource(name=topic), endpoints=endpoints(server)),
                             metadata=CLIENT)
    assert answer.status.code == pb.OK
    assert [q.id for q in answer.message_queues] == [0, 1, 2, 3]
    assert {q.permission for q in answer.message_queues} == {pb.READ_WRITE}
    assert {tuple(q.accept_message_types) for q in answer.message_queues} == {(pb.FIFO,)}
    assert {(q.broker.name, q.broker.id) for q in answer.message_queues} == {(server.broker_name, 0)}
    assert answer.message_queues[0].broker.endpoints == endpoints(server)


def test_the_port_serves_a_tls_client_beside_the_plain_ones(server, stub, topics):
    """tls.server.mode=permissive, the default: a TLS client is served on the port the plain clients use, with
    the self-signed certificate of tls.test.mode.enable (Apache's defaults)."""
    host, port = server.grpc_endpoint.rsplit(":", 1)
    certificate = ssl.get_server_certificate((host, int(port)))  # a handshake on the port, checking nothing
    credentials = grpc.ssl_channel_credentials(root_certificates=certificate.encode())
    request = service.QueryRouteRequest(topic=pb.Resource(name=topics()), endpoints=endpoints(server))
    with grpc.secure_channel(server.grpc_endpoint, credentials,
                             options=[("grpc.ssl_target_name_override", "localhost")]) as channel:
        assert service_grpc.MessagingServiceStub(channel).QueryRoute(request, metadata=CLIENT,
                                                                     timeout=10).status.code == pb.OK
    assert stub.QueryRoute(request, metadata=CLIENT).status.code == pb.OK


@pytest.mark.parametrize(("topic", "code"), [("NoSuchTopic", pb.TOPIC_NOT_FOUND), ("TBW102", pb.ILLEGAL_TOPIC),
                                             ("bad topic!", pb.ILLEGAL_TOPIC)])
def test_route_of_an_unknown_or_illegal_topic_is_refused(server, stub, topic, code):
    answer = stub.QueryRoute(service.QueryRouteRequest(topic=pb.Resource(name=topic), endpoints=endpoints(server)),
                             metadata=CLIENT)
    assert answer.status.code == code and not answer.message_queues


def test_settings_are_answered_with_the_servers_and_heartbeats_need_them(server, stub, topics):
    topic = topics()
    who = (("x-mq-client-id", f"telemetry-{uuid.uuid4().hex}"),)
    heartbeat = service.HeartbeatRequest(client_type=pb.PRODUCER)
    assert stub.Heartbeat(heartbeat, metadata=who).status.code == pb.UNRECOGNIZED_CLIENT_TYPE
    settings = pb.Settings(client_type=pb.PRODUCER, access_point=endpoints(server),
                           request_timeout=Duration(seconds=3),
                           publishing=pb.Publishing(topics=[pb.Resource(name=topic)]))
    commands: queue.Queue = queue.Queue()
    commands.put(service.TelemetryCommand(settings=settings))
    stream = stub.Telemetry(iter(commands.get, None), metadata=who, timeout=30)  # open, as the SDKs keep it
    first = next(stream)
    assert first.status.code == pb.OK
    answered = first.settings
    assert answered.publishing.max_body_size == 4 * 1024 * 1024
    assert answered.publishing.validate_message_type
    assert answered.backoff_policy.max_attempts == 3
    assert answered.backoff_policy.exponential_backoff.max.seconds == 1
    assert answered.request_timeout.seconds == 3  # the client's own, kept
    assert stub.Heartbeat(heartbeat, metadata=who).status.code == pb.OK
    assert stub.NotifyClientTermination(service.NotifyClientTerminationRequest(), metadata=who).status.code == pb.OK
    assert stub.Heartbeat(heartbeat, metadata=who).status.code == pb.UNRECOGNIZED_CLIENT_TYPE
    commands.put(None)


def test_a_send_is_stored_as_a_remoting_message_with_tag_keys_and_properties(server, stub, topics):
    topic = topics()
    born = Timestamp()
    born.FromMilliseconds(1_700_000_000_123)
    sent = send(stub, message(topic, b"grpc body", tag="TagA", keys=["k1", "k2"], born_timestamp=born,
                              born_host="10.1.2.3", trace_context="00-trace"),
                )
    assert sent.status.code == pb.OK, sent
    [entry] = sent.entries
    [got] = pull_all(server, topic)
    assert got.body == b"grpc body"
    assert (got.tags, got.keys, got.msg_id) == ("TagA", ["k1", "k2"], entry.message_id)
    assert got.properties["PGROUP"] == topic  # the proxy's producer group: the topic
    assert got.properties["__BORNHOST"] == "10.1.2.3" and got.properties["TRACE_CONTEXT"] == "00-trace"
    assert got.properties["BORN_TIMESTAMP"] == "1700000000123"
    assert got.queue_offset == entry.offset
    # the record's own born host is the client's socket, as a remoting send's
    assert got.born_host[0] == "127.0.0.1" and got.born_host[1] > 0


def test_user_properties_travel_and_system_names_are_refused(server, stub, topics):
    topic = topics()
    msg = message(topic)
    msg.user_properties.update({"color": "blue", "n": "1"})
    assert send(stub, msg).status.code == pb.OK
    [got] = pull_all(server, topic)
    assert (got.properties["color"], got.properties["n"]) == ("blue", "1")
    bad = message(topic)
    bad.user_properties["TAGS"] = "sneaky"
    assert send(stub, bad).status.code == pb.ILLEGAL_MESSAGE_PROPERTY_KEY


def test_a_message_group_keeps_its_messages_on_one_queue(server, stub, topics):
    topic = topics("FIFO")
    for group in ("g-1", "g-2", "g-3"):
        for i in range(3):
            assert send(stub, message(topic, f"{group}/{i}".encode(), message_group=group,
                                      message_type=pb.FIFO)).status.code == pb.OK
    got = pull_all(server, topic)
    for group in ("g-1", "g-2", "g-3"):
        mine = [m for m in got if m.properties["__SHARDINGKEY"] == group]
        assert len({m.queue_id for m in mine}) == 1
        assert [m.body for m in sorted(mine, key=lambda m: m.queue_offset)] == [f"{group}/{i}".encode() for i in range(3)]


def test_a_delivery_timestamp_delays_the_message_on_the_timer(server, stub, topics):
    topic = topics("DELAY")
    deliver = Timestamp()
    deliver.FromMilliseconds(int(time.time() * 1000) + 1500)
    started = time.monotonic()
    assert send(stub, message(topic, b"later", delivery_timestamp=deliver, message_type=pb.DELAY)).status.code == pb.OK
    assert pull_all(server, topic) == []
    [got] = pull_all(server, topic, wait=10)
    assert got.body == b"later" and time.monotonic() - started >= 1.0
    assert got.properties["TIMER_DELIVER_MS"] == str(deliver.ToMilliseconds())


@pytest.mark.parametrize(("kind", "system", "body", "code"), [
    ("NORMAL", {}, b"", pb.MESSAGE_BODY_EMPTY),
    ("NORMAL", {}, b"x" * (4 * 1024 * 1024 + 1), pb.MESSAGE_BODY_TOO_LARGE),
    ("NORMAL", {"message_id": ""}, b"x", pb.ILLEGAL_MESSAGE_ID),
    ("NORMAL", {"tag": "a|b"}, b"x", pb.ILLEGAL_MESSAGE_TAG),
    ("NORMAL", {"tag": "a\tb"}, b"x", pb.ILLEGAL_MESSAGE_TAG),
    ("NORMAL", {"keys": ["k\x7f"]}, b"x", pb.ILLEGAL_MESSAGE_KEY),
    ("NORMAL", {"message_group": "g", "message_type": pb.FIFO}, b"x", pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
    ("FIFO", {}, b"x", pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE),
])
def test_bad_sends_are_answered_with_the_proxys_codes(server, stub, topics, kind, system, body, code):
    topic = topics(kind)
    answer = send(stub, message(topic, body, **system))
    assert answer.status.code == code, answer.status
    assert pull_all(server, topic) == []


def test_sends_need_a_client_id_and_a_known_topic(server, stub, topics):
    assert send(stub, message(topics()), metadata=()).status.code == pb.CLIENT_ID_REQUIRED
    # the proxy's type check comes first: an unknown topic's type is UNSPECIFIED
    assert send(stub, message("NoSuchTopic")).status.code == pb.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE
    assert send(stub).status.code == pb.MESSAGE_CORRUPTED


@pytest.mark.parametrize(("resolution", "delivered"), [(pb.COMMIT, True), (pb.ROLLBACK, False)])
def test_a_half_message_is_delivered_once_committed(server, stub, topics, resolution, delivered):
    topic = topics("TRANSACTION")
    sent = send(stub, message(topic, b"in a transaction", message_type=pb.TRANSACTION))
    assert sent.status.code == pb.OK, sent
    [entry] = sent.entries
    assert entry.transaction_id
    assert pull_all(server, topic) == []
    ended = stub.EndTransaction(service.EndTransactionRequest(
        topic=pb.Resource(name=topic), message_id=entry.message_id, transaction_id=entry.transaction_id,
        resolution=resolution, source=pb.SOURCE_CLIENT), metadata=CLIENT)
    assert ended.status.code == pb.OK, ended
    got = pull_all(server, topic, wait=3 if delivered else 0.5)
    assert [m.body for m in got] == ([b"in a transaction"] if delivered else [])


def test_ending_an_unknown_transaction_is_refused_as_the_proxy_does(server, stub, topics):
    ended = stub.EndTransaction(service.EndTransactionRequest(
        topic=pb.Resource(name=topics("TRANSACTION")), message_id="X", transaction_id="nope",
        resolution=pb.COMMIT, source=pb.SOURCE_CLIENT), metadata=CLIENT)
    assert ended.status.code == pb.INTERNAL_SERVER_ERROR


def test_an_open_transaction_is_checked_back_over_the_producers_telemetry_stream(server, stub, topics):
    topic = topics("TRANSACTION")
    who = (("x-mq-client-id", f"checked-{uuid.uuid4().hex}"),)
    commands: queue.Queue = queue.Queue()
    commands.put(service.TelemetryCommand(settings=pb.Settings(
        client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=topic)]))))
    stream = stub.Telemetry(iter(commands.get, None), metadata=who, timeout=30)
    try:
        assert next(stream).status.code == pb.OK
        born = message(topic, b"left open", tag="TagT", message_type=pb.TRANSACTION)
        born.user_properties["order"] = "7"
        [entry] = send(stub, born, metadata=who).entries
        check = next(stream).recover_orphaned_transaction_command  # the broker asks after transactionTimeOut
        assert check.transaction_id == entry.transaction_id
        asked = check.message
        assert (asked.topic.name, asked.body, asked.system_properties.message_id) == (topic, b"left open",
                                                                                     entry.message_id)
        # with the broker's names the proxy does not reserve (compat_tests/test_grpc.py: Apache's are these)
        assert asked.system_properties.tag == "TagT" and dict(asked.user_properties) == {
            "order": "7", "TRANSACTION_CHECK_TIMES": "1", "__transactionId__": entry.transaction_id}
        assert asked.system_properties.body_digest.checksum == f"{zlib.crc32(b'left open'):X}"
        assert pull_all(server, topic) == []
        ended = stub.EndTransaction(service.EndTransactionRequest(
            topic=pb.Resource(name=topic), message_id=entry.message_id, transaction_id=check.transaction_id,
            resolution=pb.COMMIT, source=pb.SOURCE_SERVER_CHECK), metadata=who)
        assert ended.status.code == pb.OK
        assert [m.body for m in pull_all(server, topic, wait=5)] == [b"left open"]
    finally:
        commands.put(None)


def test_apaches_python_sdk_producer_sends_through_it(server, topics):
    """rocketmq-python-client's own Producer (the SDK whose protocol modules the server uses): its start
    (route, telemetry settings) and sends, read back by a remoting consumer."""
    # from the SDK's own modules: the package's __init__ is shared with the C++ client's binding
    # (rocketmq-client-python, also a `rocketmq` package), whichever was installed last
    from rocketmq.v5.client import ClientConfiguration, Credentials
    from rocketmq.v5.model import Message
    from rocketmq.v5.producer import Producer

    topic, fifo = topics(), topics("FIFO")
    producer = Producer(ClientConfiguration(server.grpc_endpoint, Credentials()), (topic, fifo))
    producer.startup()
    try:
        plain = Message()
        plain.topic, plain.body, plain.tag = topic, b"from python", "TagPy"
        plain.keys = "py-key"
        plain.add_property("lang", "python")
        receipt = producer.send(plain)
        grouped = Message()
        grouped.topic, grouped.body, grouped.message_group = fifo, b"in a group", "py-group"
        producer.send(grouped)
    finally:
        producer.shutdown()
    [got] = pull_all(server, topic)
    assert (got.body, got.tags, got.keys, got.properties["lang"]) == (b"from python", "TagPy", ["py-key"], "python")
    assert got.msg_id == receipt.message_id
    [in_group] = pull_all(server, fifo)
    assert in_group.properties["__SHARDINGKEY"] == "py-group"
