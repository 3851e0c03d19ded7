"""Consuming over gRPC (ReceiveMessage, AckMessage, ChangeInvisibleDuration,
ForwardMessageToDeadLetterQueue, QueryAssignment) from ``ferrymq standalone``, with the v2 stubs Apache
generates: the broker's POP underneath, the refusals as the proxy words them."""

from __future__ import annotations

import queue
import threading
import time
import uuid

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("rocketmq.grpc_protocol")

from google.protobuf.duration_pb2 import Duration  # noqa: E402
from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as service  # noqa: E402
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc  # noqa: E402

from ferrymq.sdk.blocking_clients import BlockingMQAdmin, BlockingPullConsumer  # noqa: E402
from ferrymq.sdk.client_instance import MQClientError  # noqa: E402
from ferrymq.sdk.message import PullStatus  # noqa: E402
from ferrymq.testing.server import FerryMQServer  # noqa: E402
from ferrymq.wire.bodies import SubscriptionGroupConfig  # noqa: E402

from .placements import PLACEMENTS  # noqa: E402


@pytest.fixture(scope="module", params=sorted(PLACEMENTS))
def server(request, tmp_path_factory):
    conf = {"reviveInterval": 200, "grpcEventLoop": request.param}
    with FerryMQServer(tmp_path_factory.mktemp("grpc-pop"), conf, grpc=True) as running:
        yield running


@pytest.fixture(scope="module")
def stub(server):
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        yield service_grpc.MessagingServiceStub(channel)


@pytest.fixture(scope="module")
def admin(server):
    with BlockingMQAdmin(server.namesrv_addr) as running:
        yield running


def make_topic(server, admin, kind: str = "NORMAL") -> str:
    name = f"GrpcPop{kind.title()}{uuid.uuid4().hex[:8]}"
    admin.create_topic(name, 4, broker_addr=server.broker_addr, attributes={"message.type": kind})
    return name


def make_group(server, admin, **config) -> str:
    name = f"grpc_pop_{uuid.uuid4().hex[:8]}"
    admin.api.create_subscription_group(server.broker_addr, SubscriptionGroupConfig(group_name=name, **config))
    return name


class Consumer:
    """A client whose Telemetry stream has synced its subscription settings, as the SDKs' consumers do."""

    def __init__(self, stub, group: str, topic: str, expression: pb.FilterExpression | None = None):
        self.stub, self.group, self.topic = stub, group, topic
        self.metadata = (("x-mq-client-id", f"consumer-{uuid.uuid4().hex}"), ("x-mq-client-version", "5.0.7"))
        self._commands: queue.Queue = queue.Queue()
        self._commands.put(service.TelemetryCommand(settings=pb.Settings(
            client_type=pb.SIMPLE_CONSUMER, request_timeout=Duration(seconds=3),
            subscription=pb.Subscription(group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
                topic=pb.Resource(name=topic), expression=expression or pb.FilterExpression(type=pb.TAG,
                                                                                            expression="*"))]))))
        self._stream = stub.Telemetry(iter(self._commands.get, None), metadata=self.metadata, timeout=60)
        first = next(self._stream)
        assert first.status.code == pb.OK
        self.settings = first.settings

    def close(self) -> None:
        self._commands.put(None)

    def receive(self, batch: int = 32, invisible_s: int = 10, poll_s: float = 5,
                expression: pb.FilterExpression | None = None, **extra) -> list:
        """The responses of one ReceiveMessage, in the order streamed."""
        request = service.ReceiveMessageRequest(
            group=pb.Resource(name=self.group),
            message_queue=pb.MessageQueue(topic=pb.Resource(name=self.topic), id=-1),
            filter_expression=expression or pb.FilterExpression(type=pb.TAG, expression="*"), batch_size=batch,
            invisible_duration=Duration(seconds=invisible_s), long_polling_timeout=Duration(nanos=0,
                                                                                          seconds=int(poll_s)),
            **extra)
        return list(self.stub.ReceiveMessage(request, metadata=self.metadata, timeout=poll_s + 5))

    def messages(self, **kwargs) -> list[pb.Message]:
        return [r.message for r in self.receive(**kwargs) if r.WhichOneof("content") == "message"]

    def ack(self, *messages: pb.Message, handles: list[str] | None = None) -> service.AckMessageResponse:
        entries = [service.AckMessageEntry(message_id=m.system_properties.message_id,
                                           receipt_handle=m.system_properties.receipt_handle) for m in messages]
        entries += [service.AckMessageEntry(message_id="X", receipt_handle=h) for h in handles or ()]
        return self.stub.AckMessage(service.AckMessageRequest(group=pb.Resource(name=self.group),
                                                              topic=pb.Resource(name=self.topic), entries=entries),
                                    metadata=self.metadata)

    def change_invisible(self, handle: str, seconds: float) -> service.ChangeInvisibleDurationResponse:
        return self.stub.ChangeInvisibleDuration(service.ChangeInvisibleDurationRequest(
            group=pb.Resource(name=self.group), topic=pb.Resource(name=self.topic), receipt_handle=handle,
            invisible_duration=Duration(seconds=int(seconds), nanos=int(seconds % 1 * 1e9)), message_id="X"),
            metadata=self.metadata)


@pytest.fixture
def consumers(stub):
    made = []

    def make(group: str, topic: str, **kwargs) -> Consumer:
        made.append(Consumer(stub, group, topic, **kwargs))
        return made[-1]

    yield make
    for consumer in made:
        consumer.close()


def send(stub, topic: str, *bodies: bytes, **system) -> None:
    messages = []
    for body in bodies:
        props = {"message_id": uuid.uuid4().hex.upper(), "message_type": pb.NORMAL, **system}
        messages.append(pb.Message(topic=pb.Resource(name=topic), body=body,
                                   system_properties=pb.SystemProperties(**props)))
    for message in messages:  # one by one: a FIFO group's messages go to its queue in order
        answer = stub.SendMessage(service.SendMessageRequest(messages=[message]),
                                  metadata=(("x-mq-client-id", "grpc-pop-producer"),))
        assert answer.status.code == pb.OK, answer.status.message


def pull_all(server, topic: str, wait: float = 5.0) -> list:
    deadline = time.monotonic() + wait
    with BlockingPullConsumer(f"check_{uuid.uuid4().hex[:8]}", server.namesrv_addr) as consumer:
        while True:
            out = []
            try:
                queues = consumer.fetch_subscribe_queues(topic)
            except MQClientError:  # not created yet (a DLQ topic is made by its first message)
                queues = []
            for mq in queues:
                offset = 0
                while (result := consumer.pull(mq, "*", offset, 32)).status is PullStatus.FOUND:
                    out += result.messages
                    offset = result.next_begin_offset
            if out or time.monotonic() >= deadline:
                return out
            time.sleep(0.2)


def test_a_consumer_of_a_group_the_broker_lacks_is_refused_as_the_proxy_does(server, admin, stub):
    with pytest.raises(grpc.RpcError) as refused:
        Consumer(stub, f"grpc_pop_unknown_{uuid.uuid4().hex[:8]}", make_topic(server, admin))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "group not found" in refused.value.details()


def test_consumer_settings_are_answered_with_the_groups(server, admin, stub, consumers):
    topic = make_topic(server, admin)
    settings = consumers(make_group(server, admin, retry_max_times=3, consume_message_orderly=True), topic).settings
    assert settings.subscription.fifo
    assert (settings.subscription.receive_batch_size, settings.subscription.long_polling_timeout.seconds) == (32, 20)
    assert settings.backoff_policy.max_attempts == 4
    assert [d.seconds for d in settings.backoff_policy.customized_backoff.next][:4] == [1, 5, 10, 30]


def test_a_receive_streams_status_messages_then_the_delivery_timestamp_and_acks_take_them(
        server, admin, stub, consumers):
    topic = make_topic(server, admin)
    send(stub, topic, b"one", b"two", tag="TagA")
    consumer = consumers(make_group(server, admin), topic)
    responses = consumer.receive()
    kinds = [r.WhichOneof("content") for r in responses]
    assert kinds == ["status", "message", "message", "delivery_timestamp"]
    assert responses[0].status.code == pb.OK
    got = [r.message for r in responses[1:3]]
    assert sorted(m.body for m in got) == [b"one", b"two"]
    for m in got:
        assert m.system_properties.tag == "TagA" and m.system_properties.delivery_attempt == 1
        assert len(m.system_properties.receipt_handle.split(" ")) == 9  # the broker's eight fields + commit offset
    assert abs(responses[-1].delivery_timestamp.ToMilliseconds() - time.time() * 1000) < 5000
    acked = consumer.ack(*got)
    assert acked.status.code == pb.OK and [e.status.code for e in acked.entries] == [pb.OK, pb.OK]
    assert consumer.ack(got[0]).status.code == pb.OK  # a second ack changes nothing, and is answered OK as Apache's


def test_a_receive_waits_for_a_message_sent_meanwhile(server, admin, stub, consumers):
    topic = make_topic(server, admin)
    consumer = consumers(make_group(server, admin), topic)
    threading.Timer(0.5, send, (stub, topic, b"late")).start()
    started = time.monotonic()
    assert [m.body for m in consumer.messages(poll_s=10)] == [b"late"]
    assert time.monotonic() - started < 5


def test_a_tag_filter_receives_only_matching_messages(server, admin, stub, consumers):
    topic = make_topic(server, admin)
    send(stub, topic, b"a", tag="TagA")
    send(stub, topic, b"b", tag="TagB")
    consumer = consumers(make_group(server, admin), topic)
    got = consumer.messages(expression=pb.FilterExpression(type=pb.TAG, expression="TagB"))
    assert [m.body for m in got] == [b"b"]


def test_a_renewed_handle_replaces_the_old_and_an_unacked_message_comes_back(server, admin, stub, consumers):
    topic = make_topic(server, admin)
    send(stub, topic, b"again")
    consumer = consumers(make_group(server, admin), topic)
    [first] = consumer.messages()
    renewed = consumer.change_invisible(first.system_properties.receipt_handle, 0.5)
    assert renewed.status.code == pb.OK
    assert renewed.receipt_handle != first.system_properties.receipt_handle
    assert renewed.receipt_handle.split(" ")[-1] == first.system_properties.receipt_handle.split(" ")[-1]
    [second] = consumer.messages(poll_s=5)  # visible again after 0.5 s: revived as a retry
    assert (second.body, second.system_properties.delivery_attempt) == (b"again", 2)
    assert consumer.ack(second).status.code == pb.OK


def test_bad_and_expired_handles_are_refused_as_the_proxy_does(server, admin, stub, consumers):
    topic = make_topic(server, admin)
    send(stub, topic, b"x")
    consumer = consumers(make_group(server, admin), topic)
    [got] = consumer.messages()
    handle = got.system_properties.receipt_handle
    fields = handle.split(" ")
    expired = " ".join([fields[0], str(int(fields[1]) - 60_000), *fields[2:]])
    answer = consumer.ack(got, handles=[expired, "not a handle"])
    assert answer.status.code == pb.MULTIPLE_RESULTS
    assert [e.status.code for e in answer.entries] == [pb.OK, pb.INVALID_RECEIPT_HANDLE, pb.INTERNAL_SERVER_ERROR]
    assert answer.entries[1].status.message == "receipt handle is expired"
    assert consumer.change_invisible(expired, 1).status.code == pb.INVALID_RECEIPT_HANDLE
    assert consumer.change_invisible(handle, 13 * 3600).status.code == pb.ILLEGAL_INVISIBLE_TIME


def test_receives_are_refused_as_the_proxy_does(server, admin, stub, consumers):
    topic = make_topic(server, admin)
    group = make_group(server, admin)
    consumer = consumers(group, topic)

    def code(**kwargs) -> int:
        return consumer.receive(poll_s=5, **kwargs)[0].status.code

    assert code(invisible_s=5) == pb.ILLEGAL_INVISIBLE_TIME  # under minInvisibleTimeMillsForRecv
    consumer.topic = "GrpcPopNoSuchTopic"
    assert code() == pb.TOPIC_NOT_FOUND
    consumer.topic, consumer.group = topic, "bad group!"
    assert code() == pb.ILLEGAL_CONSUMER_GROUP
    unknown = Consumer.__new__(Consumer)
    unknown.stub, unknown.group, unknown.topic = stub, group, topic
    unknown.metadata = (("x-mq-client-id", f"never-synced-{uuid.uuid4().hex}"),)
    assert unknown.receive()[0].status.code == pb.INTERNAL_SERVER_ERROR  # no settings: the proxy fails


def test_a_message_forwarded_to_the_dlq_lands_in_the_groups_dlq(server, admin, stub, consumers):
    topic = make_topic(server, admin)
    send(stub, topic, b"poison")
    group = make_group(server, admin)
    consumer = consumers(group, topic)
    [got] = consumer.messages()
    sp = got.system_properties

    def forward(handle: str) -> int:
        return stub.ForwardMessageToDeadLetterQueue(service.ForwardMessageToDeadLetterQueueRequest(
            group=pb.Resource(name=group), topic=pb.Resource(name=topic), receipt_handle=handle,
            message_id=sp.message_id, delivery_attempt=1, max_delivery_attempts=1), metadata=consumer.metadata
        ).status.code

    assert forward(" ".join(sp.receipt_handle.split(" ")[:8])) == pb.INVALID_RECEIPT_HANDLE  # no commit offset
    assert forward(sp.receipt_handle) == pb.OK
    [dead] = pull_all(server, f"%DLQ%{group}")
    assert dead.body == b"poison"


def test_a_fifo_group_receives_a_message_group_in_order_one_batch_at_a_time(server, admin, stub, consumers):
    topic = make_topic(server, admin, "FIFO")
    send(stub, topic, b"f0", b"f1", b"f2", message_group="g1", message_type=pb.FIFO)
    consumer = consumers(make_group(server, admin, consume_message_orderly=True), topic)
    first = consumer.messages(batch=2)
    assert [m.body for m in first] == [b"f0", b"f1"]
    assert {m.system_properties.message_group for m in first} == {"g1"}
    consumer.ack(*first)
    assert [m.body for m in consumer.messages()] == [b"f2"]


def test_query_assignment_hands_out_every_queue_or_each_queue_for_a_fifo_group(server, admin, stub):
    topic = make_topic(server, admin)
    host, port = server.grpc_endpoint.rsplit(":", 1)
    endpoints = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host=host, port=int(port))])

    def assigned(group: str) -> list[int]:
        answer = stub.QueryAssignment(service.QueryAssignmentRequest(
            topic=pb.Resource(name=topic), group=pb.Resource(name=group), endpoints=endpoints),
            metadata=(("x-mq-client-id", "assign"),))
        assert answer.status.code == pb.OK
        assert {a.message_queue.broker.name for a in answer.assignments} == {server.broker_name}
        return [a.message_queue.id for a in answer.assignments]

    assert assigned(make_group(server, admin)) == [-1]
    assert assigned(make_group(server, admin, consume_message_orderly=True)) == [0, 1, 2, 3]


def test_a_message_out_of_attempts_goes_to_the_dlq_when_it_comes_back(server, admin, stub, consumers):
    """A PushConsumer's failure is a renewal by the group's backoff; once the group's attempts
    (retryMaxTimes + 1) are spent, the message goes to %DLQ%group instead of coming back."""
    topic = make_topic(server, admin)
    send(stub, topic, b"poison")
    group = make_group(server, admin, retry_max_times=1)
    consumer = consumers(group, topic)
    assert consumer.settings.backoff_policy.max_attempts == 2
    for attempt in (1, 2):
        [got] = consumer.messages(auto_renew=True)
        assert got.system_properties.delivery_attempt == attempt
        assert consumer.change_invisible(got.system_properties.receipt_handle, 0.3).status.code == pb.OK
    [dead] = pull_all(server, f"%DLQ%{group}")
    assert (dead.body, dead.reconsume_times) == (b"poison", 2)


def test_an_sql_filter_receives_only_matching_messages(server, admin, stub, consumers):
    topic = make_topic(server, admin)
    for color in ("red", "blue"):
        message = pb.Message(topic=pb.Resource(name=topic), body=color.encode(), user_properties={"color": color},
                             system_properties=pb.SystemProperties(message_id=uuid.uuid4().hex.upper(),
                                                                   message_type=pb.NORMAL))
        assert stub.SendMessage(service.SendMessageRequest(messages=[message]),
                                metadata=(("x-mq-client-id", "grpc-pop-producer"),)).status.code == pb.OK
    consumer = consumers(make_group(server, admin), topic)
    got = consumer.messages(expression=pb.FilterExpression(type=pb.SQL, expression="color = 'red'"))
    assert [(m.body, dict(m.user_properties)) for m in got] == [(b"red", {"color": "red"})]



def test_a_receive_its_client_cancels_takes_no_message_sent_after(server, stub, admin, consumers):
    """A long-polling ReceiveMessage whose client cancels it (RST_STREAM) ends on the server too: the message
    sent next goes to the next receive, not to the poll nobody waits for any more."""
    topic, group = make_topic(server, admin), make_group(server, admin)
    consumer = consumers(group, topic)
    request = service.ReceiveMessageRequest(
        group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
        filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"), batch_size=1,
        invisible_duration=Duration(seconds=30), long_polling_timeout=Duration(seconds=20))
    polling = stub.ReceiveMessage(request, metadata=consumer.metadata, timeout=25)
    time.sleep(0.5)  # the poll is waiting on the server
    polling.cancel()
    time.sleep(0.5)
    send(stub, topic, b"after the cancel")
    assert [m.body for m in consumer.messages(poll_s=5)] == [b"after the cancel"]
