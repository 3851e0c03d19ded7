"""FerryMQ's Python SDK (sdk_py) as a real client, against Apache RocketMQ and against FerryMQ.

Every scenario runs twice through the ``cluster`` fixture: on Apache's name server + broker (which proves
the SDK and the expectation right) and on ``ferrymq standalone`` (which tests FerryMQ). Scheduled
intervals (route poll, heartbeat, rebalance, offset persistence) are shortened to one second so the
scenarios do not sleep. Topic and group names are fresh per test.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from ferrymq.sdk import reactor_thread
from ferrymq.sdk.blocking_clients import BlockingMQAdmin, BlockingProducer, BlockingPullConsumer, BlockingPushConsumer
from ferrymq.sdk.client_config import ClientConfig
from ferrymq.sdk.client_instance import MQClientError
from ferrymq.sdk.consumer import ConsumeConcurrentlyStatus, ConsumeOrderlyStatus
from ferrymq.sdk.message import Message, PullStatus, SendStatus
from ferrymq.sdk.producer import LocalTransactionState, select_by_hash
from ferrymq.testing import FerryMQServer

#: how long a scenario waits for its messages before failing
WAIT = 45.0


# ---------------------------------------------------------------------------------------------- servers


@dataclass
class Cluster:
    kind: str
    namesrv_addr: str
    broker_addr: str


@pytest.fixture(scope="module")
def ferrymq_standalone(tmp_path_factory):
    with FerryMQServer(tmp_path_factory.mktemp("ferrymq-standalone")) as server:
        yield server


@pytest.fixture(params=["apache", "ferrymq"])
def cluster(request) -> Cluster:
    """A name server with one master broker registered: Apache RocketMQ's, then FerryMQ's."""
    if request.param == "apache":
        broker = request.getfixturevalue("apache_broker")
        return Cluster("apache", request.getfixturevalue("apache_namesrv").addr, broker.addr)
    server = request.getfixturevalue("ferrymq_standalone")
    return Cluster("ferrymq", server.namesrv_addr, server.broker_addr)


# ---------------------------------------------------------------------------------------------- helpers


def fast_config(cluster: Cluster) -> ClientConfig:
    return ClientConfig(
        cluster.namesrv_addr,
        poll_name_server_interval=1.0,
        heartbeat_broker_interval=1.0,
        persist_consumer_offset_interval=1.0,
        rebalance_interval=1.0,
    )


def names(prefix: str) -> tuple[str, str, str]:
    tag = uuid.uuid4().hex[:10]
    return f"Sdk{prefix}_{tag}", f"sdk_pg_{tag}", f"sdk_cg_{tag}"


@pytest.fixture
def admin(cluster):
    with BlockingMQAdmin(cluster.namesrv_addr) as adm:
        yield adm


def create_topic(admin: BlockingMQAdmin, cluster: Cluster, topic: str, queues: int = 4) -> None:
    admin.create_topic(topic, queues, broker_addr=cluster.broker_addr)
    admin.wait_for_route(topic, 30.0)


class Collector:
    """Thread-safe record of what a listener saw."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.msgs: list = []

    def add(self, msgs) -> None:
        with self.cond:
            self.msgs.extend(msgs)
            self.cond.notify_all()

    def wait_for(self, pred: Callable[[list], bool], what: str, timeout: float = WAIT) -> None:
        """Wait until ``pred(messages)``; re-checked at least every 0.1 s, so a predicate may also look at
        other collectors."""
        deadline = time.monotonic() + timeout
        with self.cond:
            while not pred(self.msgs):
                left = deadline - time.monotonic()
                if left > 0:
                    self.cond.wait(min(left, 0.1))
                    continue
                raise AssertionError(f"timed out after {timeout} s waiting for {what}; saw {len(self.msgs)} "
                                     f"message(s): {[m.body for m in self.msgs][:50]}")

    def bodies(self) -> list[bytes]:
        with self.cond:
            return [m.body for m in self.msgs]


@pytest.fixture
def clients():
    """Starts nothing; shuts down whatever the test registers, even when it fails."""
    opened: list = []
    yield opened
    for c in reversed(opened):
        try:
            c.shutdown()
        except Exception:  # noqa: BLE001 - best effort at teardown
            pass


def producer(clients, cluster, group) -> BlockingProducer:
    p = BlockingProducer(group, config=fast_config(cluster))
    p.start()
    clients.append(p)
    return p


def push_consumer(clients, cluster, group, topic, expression, listener, *, orderly=False, **kwargs):
    kwargs.setdefault("consume_from_where", "CONSUME_FROM_FIRST_OFFSET")
    c = BlockingPushConsumer(group, config=fast_config(cluster), **kwargs)
    c.subscribe(topic, expression)
    c.register_listener(listener, orderly=orderly)
    c.start()
    clients.append(c)
    return c


def owned_queues(consumer: BlockingPushConsumer, topic: str) -> set:
    return reactor_thread.call(
        lambda: {mq for mq in consumer.wrapped.rebalancer.pq_table if mq.topic == topic}
    )


# ---------------------------------------------------------------------------------------------- scenarios


def test_sync_async_oneway_batch_then_consume_everything(cluster, admin, clients):
    topic, pg, cg = names("Send")
    create_topic(admin, cluster, topic)
    p = producer(clients, cluster, pg)
    expected: set[bytes] = set()

    for i in range(8):
        body = f"sync-{i}".encode()
        r = p.send(Message(topic, body, tags="TagA", keys=[f"k{i}"]))
        assert r.status == SendStatus.SEND_OK, f"sync send {i}: {r}"
        assert r.msg_id and len(r.offset_msg_id) == 32, f"sync send {i} ids: {r}"
        expected.add(body)
    futures = []
    for i in range(8):
        body = f"async-{i}".encode()
        futures.append(p.send_async(Message(topic, body, tags="TagB")))
        expected.add(body)
    for i, f in enumerate(futures):
        assert f.result(30).status == SendStatus.SEND_OK, f"async send {i}"
    for i in range(8):
        body = f"oneway-{i}".encode()
        p.send_oneway(Message(topic, body))
        expected.add(body)
    batch = [Message(topic, f"batch-{i}".encode(), tags="TagC") for i in range(8)]
    r = p.send_batch(batch)
    assert r.status == SendStatus.SEND_OK and len(r.msg_id.split(",")) == 8, f"batch send: {r}"
    expected.update(m.body for m in batch)
    big = b"z" * 10_000  # compressed on the way (over 4 KiB)
    assert p.send(Message(topic, big)).status == SendStatus.SEND_OK
    expected.add(big)

    seen = Collector()
    push_consumer(clients, cluster, cg, topic, "*", lambda msgs, ctx: seen.add(msgs))
    seen.wait_for(lambda ms: expected <= {m.body for m in ms}, f"all {len(expected)} messages")
    counts = Counter(seen.bodies())
    missing = expected - set(counts)
    assert not missing, f"never delivered: {sorted(missing)}"
    assert set(counts) == expected, f"unexpected bodies: {set(counts) - expected}"
    dups = {b: n for b, n in counts.items() if n > 1}
    assert not dups, f"delivered more than once: {dups}"
    tags = {m.body: m.tags for m in seen.msgs}
    assert tags[b"sync-0"] == "TagA" and tags[b"async-0"] == "TagB" and tags[b"batch-0"] == "TagC", tags
    assert all(m.topic == topic for m in seen.msgs), "a message arrived with the wrong topic"


def test_tag_expression_filters(cluster, admin, clients):
    topic, pg, cg = names("Tags")
    create_topic(admin, cluster, topic)
    p = producer(clients, cluster, pg)
    for i in range(30):
        tag = ("TagA", "TagB", "TagC")[i % 3]
        assert p.send(Message(topic, f"{tag}-{i}".encode(), tags=tag)).status == SendStatus.SEND_OK
    p.send(Message(topic, b"untagged"))
    seen = Collector()
    push_consumer(clients, cluster, cg, topic, "TagA || TagB", lambda msgs, ctx: seen.add(msgs))
    seen.wait_for(lambda ms: len({m.body for m in ms}) >= 20, "the 20 TagA/TagB messages")
    time.sleep(2)  # anything wrongly let through would arrive in this window too
    tags = Counter(m.tags for m in seen.msgs)
    assert set(tags) == {"TagA", "TagB"}, f"the consumer of 'TagA || TagB' saw tags {dict(tags)}"
    assert tags["TagA"] == 10 and tags["TagB"] == 10, f"per-tag counts {dict(tags)}"


def test_ordered_send_and_orderly_consumer_keep_per_queue_order(cluster, admin, clients):
    topic, pg, cg = names("Order")
    create_topic(admin, cluster, topic)
    p = producer(clients, cluster, pg)
    orders, steps = 6, 15
    queue_of: dict[int, int] = {}
    for step in range(steps):
        for order in range(orders):
            r = p.send_orderly(Message(topic, f"{order}:{step}".encode()), select_by_hash, order)
            assert r.status == SendStatus.SEND_OK
            queue_of.setdefault(order, r.message_queue.queue_id)
            assert r.message_queue.queue_id == queue_of[order], f"order {order} moved queues"

    seen = Collector()
    slow_once = threading.Event()

    def listener(msgs, ctx):
        if not slow_once.is_set():  # a slow first message must not let later ones of its queue overtake it
            slow_once.set()
            time.sleep(0.5)
        seen.add(msgs)
        return ConsumeOrderlyStatus.SUCCESS

    push_consumer(clients, cluster, cg, topic, "*", listener, orderly=True)
    seen.wait_for(lambda ms: len(ms) >= orders * steps, f"{orders * steps} messages")
    per_order: dict[int, list[int]] = defaultdict(list)
    per_queue: dict[int, list[int]] = defaultdict(list)
    for m in seen.msgs:
        order, step = map(int, m.body.decode().split(":"))
        per_order[order].append(step)
        per_queue[m.queue_id].append(m.queue_offset)
    for order, got in per_order.items():
        assert got == list(range(steps)), f"order {order} consumed out of order: {got}"
    for qid, offsets in per_queue.items():
        assert offsets == sorted(offsets), f"queue {qid} consumed out of offset order: {offsets}"


def test_two_consumers_split_the_queues_then_one_leaves(cluster, admin, clients):
    topic, pg, cg = names("Split")
    create_topic(admin, cluster, topic, 4)
    seen_a, seen_b = Collector(), Collector()
    a = push_consumer(clients, cluster, cg, topic, "*", lambda msgs, ctx: seen_a.add(msgs))
    b = push_consumer(clients, cluster, cg, topic, "*", lambda msgs, ctx: seen_b.add(msgs))
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        qa, qb = owned_queues(a, topic), owned_queues(b, topic)
        if len(qa) == 2 and len(qb) == 2 and not qa & qb:
            break
        time.sleep(0.2)
    assert len(qa) == 2 and len(qb) == 2 and not qa & qb, f"queues not split 2/2: A={qa} B={qb}"

    p = producer(clients, cluster, pg)
    expected = {f"m-{i}".encode() for i in range(40)}
    for body in sorted(expected):
        assert p.send(Message(topic, body)).status == SendStatus.SEND_OK

    def all_seen(_):
        return expected <= set(seen_a.bodies()) | set(seen_b.bodies())

    seen_a.wait_for(all_seen, "all 40 messages across both consumers")
    got_a, got_b = Counter(seen_a.bodies()), Counter(seen_b.bodies())
    assert got_a and got_b, f"one consumer got nothing: A={len(got_a)} B={len(got_b)}"
    both = set(got_a) & set(got_b)
    assert not both, f"{len(both)} message(s) consumed by both: {sorted(both)[:10]}"
    assert {m.queue_id for m in seen_a.msgs} <= {q.queue_id for q in qa}, "A consumed a queue it does not own"

    # B leaves: A takes over every queue and consumes what is sent next, starting where B committed
    b.shutdown()
    clients.remove(b)
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and len(owned_queues(a, topic)) < 4:
        time.sleep(0.2)
    assert len(owned_queues(a, topic)) == 4, f"after B left, A owns {owned_queues(a, topic)}"
    later = {f"later-{i}".encode() for i in range(20)}
    for body in sorted(later):
        assert p.send(Message(topic, body)).status == SendStatus.SEND_OK
    seen_a.wait_for(lambda ms: later <= {m.body for m in ms}, "the 20 messages sent after B left")
    redelivered = (set(got_b) & set(seen_a.bodies())) - set(got_a)
    assert not redelivered, f"A re-consumed {len(redelivered)} message(s) B had committed: {sorted(redelivered)[:10]}"


def test_restart_resumes_from_the_committed_offset(cluster, admin, clients):
    topic, pg, cg = names("Resume")
    create_topic(admin, cluster, topic, 2)
    p = producer(clients, cluster, pg)
    first = [f"first-{i}".encode() for i in range(10)]
    for body in first:
        p.send(Message(topic, body))
    seen1 = Collector()
    c1 = push_consumer(clients, cluster, cg, topic, "*", lambda msgs, ctx: seen1.add(msgs))
    seen1.wait_for(lambda ms: set(first) <= {m.body for m in ms}, "the first 10 messages")
    c1.shutdown()
    clients.remove(c1)

    committed = sum(max(admin.query_consumer_offset(cg, mq), 0) for mq in admin.fetch_subscribe_queues(topic))
    assert committed == len(first), f"after shutdown the broker holds offsets summing to {committed}, not 10"

    second = [f"second-{i}".encode() for i in range(10)]
    for body in second:
        p.send(Message(topic, body))
    seen2 = Collector()
    push_consumer(clients, cluster, cg, topic, "*", lambda msgs, ctx: seen2.add(msgs))
    seen2.wait_for(lambda ms: set(second) <= {m.body for m in ms}, "the second 10 messages")
    time.sleep(1)
    replayed = set(first) & set(seen2.bodies())
    assert not replayed, f"the restarted consumer re-consumed committed messages: {sorted(replayed)}"


def test_reconsume_later_comes_back_through_the_retry_topic(cluster, admin, clients):
    topic, pg, cg = names("Retry")
    create_topic(admin, cluster, topic, 2)
    p = producer(clients, cluster, pg)
    seen = Collector()

    def listener(msgs, ctx):
        seen.add(msgs)
        if msgs[0].reconsume_times == 0:
            ctx.delay_level_when_next_consume = 1  # 1 s, so the test does not wait the default 10 s
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    push_consumer(clients, cluster, cg, topic, "*", listener)
    r = p.send(Message(topic, b"please-retry", tags="TagR"))
    assert r.status == SendStatus.SEND_OK
    seen.wait_for(lambda ms: any(m.reconsume_times >= 1 for m in ms), "the redelivery from %RETRY%")
    first = next(m for m in seen.msgs if m.reconsume_times == 0)
    again = next(m for m in seen.msgs if m.reconsume_times >= 1)
    assert again.body == b"please-retry" and again.tags == "TagR", f"redelivered message differs: {again}"
    assert again.topic == topic, f"redelivery shows topic {again.topic}, not the original {topic}"
    assert again.properties.get("RETRY_TOPIC") == topic, f"no RETRY_TOPIC property: {again.properties}"
    assert again.msg_id == first.msg_id, f"msgId changed across the retry: {first.msg_id} -> {again.msg_id}"


def test_pull_consumer_and_queue_offsets(cluster, admin, clients):
    topic, pg, cg = names("Pull")
    create_topic(admin, cluster, topic, 1)
    p = producer(clients, cluster, pg)
    before = int(time.time() * 1000) - 1000
    for i in range(10):
        p.send(Message(topic, f"p-{i}".encode(), tags="TagA" if i % 2 == 0 else "TagB"))
    (mq,) = admin.fetch_subscribe_queues(topic)
    assert admin.max_offset(mq) == 10, "GET_MAX_OFFSET after 10 sends"
    assert admin.min_offset(mq) == 0, "GET_MIN_OFFSET of a fresh queue"
    assert admin.search_offset(mq, before) == 0, "SEARCH_OFFSET_BY_TIMESTAMP before the first message"
    assert admin.earliest_msg_store_time(mq) >= before, "GET_EARLIEST_MSG_STORETIME"

    c = BlockingPullConsumer(cg, config=fast_config(cluster))
    c.start()
    clients.append(c)
    assert c.fetch_subscribe_queues(topic) == [mq]
    res = c.pull(mq, "*", 0, 32)
    assert res.status == PullStatus.FOUND and [m.body for m in res.messages] == [f"p-{i}".encode() for i in range(10)]
    assert res.next_begin_offset == 10
    res = c.pull(mq, "TagA", 0, 32)
    assert [m.body for m in res.messages] == [f"p-{i}".encode() for i in range(0, 10, 2)], "TagA pull"
    res = c.pull(mq, "*", 10, 32)
    assert res.status == PullStatus.NO_NEW_MSG, f"pull at the end: {res.status}"
    c.update_offset(mq, 7)
    c.commit()
    assert admin.query_consumer_offset(cg, mq) == 7, "committed offset as the broker reports it"
    assert c.fetch_consume_offset(mq) == 7


def test_broadcasting_delivers_everything_to_every_consumer(cluster, admin, clients, tmp_path):
    topic, pg, cg = names("Bcast")
    create_topic(admin, cluster, topic, 2)
    seen_a, seen_b = Collector(), Collector()
    for seen in (seen_a, seen_b):
        push_consumer(clients, cluster, cg, topic, "*", lambda msgs, ctx, s=seen: s.add(msgs),
                      message_model="BROADCASTING", local_offset_dir=tmp_path,
                      consume_from_where="CONSUME_FROM_LAST_OFFSET")
    time.sleep(2)  # both have their queues before anything is sent
    p = producer(clients, cluster, pg)
    expected = {f"b-{i}".encode() for i in range(10)}
    for body in sorted(expected):
        p.send(Message(topic, body))
    for name, seen in (("A", seen_a), ("B", seen_b)):
        seen.wait_for(lambda ms: expected <= {m.body for m in ms}, f"all 10 messages at consumer {name}")


def test_transaction_commit_is_delivered_and_rollback_is_not(cluster, admin, clients):
    topic, pg, cg = names("Tx")
    create_topic(admin, cluster, topic, 2)
    p = producer(clients, cluster, pg)
    r, state = p.send_message_in_transaction(Message(topic, b"commit-me"),
                                             lambda m, arg: LocalTransactionState.COMMIT_MESSAGE)
    assert r.status == SendStatus.SEND_OK and state == LocalTransactionState.COMMIT_MESSAGE
    r, _ = p.send_message_in_transaction(Message(topic, b"roll-me-back"),
                                         lambda m, arg: LocalTransactionState.ROLLBACK_MESSAGE)
    assert r.status == SendStatus.SEND_OK
    p.send(Message(topic, b"plain"))
    seen = Collector()
    push_consumer(clients, cluster, cg, topic, "*", lambda msgs, ctx: seen.add(msgs))
    seen.wait_for(lambda ms: {b"commit-me", b"plain"} <= {m.body for m in ms}, "the committed and the plain message")
    time.sleep(1)
    assert b"roll-me-back" not in seen.bodies(), "a rolled-back half message was delivered"
    committed = next(m for m in seen.msgs if m.body == b"commit-me")
    assert committed.properties.get("TRAN_MSG") == "true", f"committed message properties: {committed.properties}"


def test_sql92_subscription_is_refused_by_a_broker_without_property_filtering(cluster, admin, clients):
    """Both brokers run with enablePropertyFilter=false (Apache's default): start() must fail with the
    broker's CHECK_CLIENT_CONFIG answer, as the Java client's does, not pull nothing forever."""
    topic, _pg, cg = names("Sql")
    create_topic(admin, cluster, topic, 1)
    c = BlockingPushConsumer(cg, config=fast_config(cluster))
    c.subscribe(topic, "a > 5", "SQL92")
    c.register_listener(lambda msgs, ctx: None)
    with pytest.raises(MQClientError, match="refuses the SQL92 subscription") as info:
        c.start()
    assert "code 1" in str(info.value), f"expected SYSTEM_ERROR (1) from the broker: {info.value}"


def test_mqadmin_sees_the_sdk_consumer_and_its_running_info(cluster, admin, clients, mqadmin):
    topic, _pg, cg = names("Admin")
    create_topic(admin, cluster, topic, 2)
    c = push_consumer(clients, cluster, cg, topic, "TagA || TagB", lambda msgs, ctx: None)
    client_id = c.wrapped.instance.client_id
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline and len(owned_queues(c, topic)) < 2:
        time.sleep(0.2)
    conn = mqadmin(cluster.namesrv_addr, "consumerConnection", "-g", cg)
    row = next((line.split() for line in conn.splitlines() if line.startswith(client_id)), None)
    assert row is not None and row[2] == "PYTHON", f"consumerConnection does not list {client_id} as PYTHON:\n{conn}"
    for expected in (topic, "TagA || TagB", f"%RETRY%{cg}", "CONSUME_PASSIVELY", "CLUSTERING"):
        assert expected in conn, f"consumerConnection lacks {expected!r}:\n{conn}"
    # consumerStatus asks the broker, which relays GET_CONSUMER_RUNNING_INFO to the SDK consumer
    status = mqadmin(cluster.namesrv_addr, "consumerStatus", "-g", cg, "-i", client_id)
    assert "PROP_CONSUME_TYPE" in status and "CONSUME_PASSIVELY" in status, f"no running info:\n{status}"
    details = [line.split() for line in status.split("#Consumer MQ Detail#")[-1].splitlines()
               if line.startswith(topic)]
    assert sorted(int(d[2]) for d in details) == [0, 1], f"running info lists queues {details}:\n{status}"
