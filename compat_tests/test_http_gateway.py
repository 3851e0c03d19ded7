"""Issue 22: the HTTP gateway among the official clients, in front of Apache RocketMQ and of FerryMQ.

On each server of ``server`` (Apache 5.5.0, ``ferrymq standalone``, both with servers.FEATURE_CONFIG) the
gateway is ``http_gateway``: FerryMQ's own, or ``ferrymq gateway http`` in front of Apache. Messages
published over HTTP reach the Java 5.5.0 and Go push consumers as sent; messages of the Java and Go
producers reach HTTP consumers as sent; an HTTP consumer is one more consumer of its group (queues shared
by rebalance, the group's offsets, its retry topic and dead-letter queue); a transaction published over
HTTP is resolved by the broker's check-back through the gateway to a signed HTTP call. A scenario that
passes on Apache and fails on FerryMQ is a FerryMQ bug.

Every gateway answer is held against the gateway's OpenAPI document (tests/gateways/http_client.py).
"""

from __future__ import annotations

import re
import time
from collections import Counter

import orjson
import pytest
from ferrymq.testing import admin
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request

from tests.gateways.check_back_receiver import Receiver
from tests.gateways.http_client import Gateway

from .conftest import _ferrymq_cli
from .harness import finish_all
from .http_gateway import CHECK_BACK_SECRET, GatewayProcess
from .servers import (
    TRANSACTION_CHECK_INTERVAL_MS,
    TRANSACTION_CHECK_MAX,
    TRANSACTION_TIMEOUT_MS,
)
from .socket_client import call
from .test_official_clients import WAIT, bodies, fresh, write_spec


@pytest.fixture
def gw(http_gateway):
    client = Gateway(http_gateway)
    yield client
    client.close()


def user_properties(received: dict, names) -> dict[str, str]:
    """The properties named ``names`` of a message a Java or Go consumer printed."""
    props = received["properties"] or {}
    return {name: props[name] for name in names if name in props}


def consume_over_http(gw: Gateway, topic: str, group: str, want: set[str], *, others=lambda: (),
                      timeout: float = WAIT, **query) -> list[dict]:
    """Receive and ack over HTTP until every body of ``want`` was received, here or by the group's other
    consumers (``others()``: the bodies they received), or ``timeout`` passes; the messages received here."""
    got: list[dict] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        msgs = gw.receive(topic, group, wait=1, max=32, **query)
        if msgs:
            gw.ack(topic, group, msgs)
            got += msgs
        if want <= {m["body"] for m in got} | set(others()):
            break
    return got


# ---------------------------------------------------------------------------------------------- HTTP -> Java, Go

#: published over HTTP: tag and typed user properties
HTTP_PUBLISHED: list[tuple[str, dict[str, object]]] = [
    ("TagA", {"region": "eu", "n": 3, "price": 12.5, "vip": True}),
    ("TagB", {"region": "eu", "n": 1, "price": 0.25, "vip": False}),
    ("TagA", {"region": "us", "n": 7, "price": 99.75, "vip": True}),
    ("TagC", {"region": "eu", "n": 10, "price": -1.5, "vip": False}),
    ("TagA", {"region": "eu", "n": 5, "price": 30.0, "vip": True}),
]
TAG_EXPRESSION = "TagA"
SQL_EXPRESSION = "n > 2 AND region = 'eu' AND price < 20.5"
#: indexes of HTTP_PUBLISHED each subscription selects
TAG_SELECTS = {0, 2, 4}
SQL_SELECTS = {0, 3}


def as_text(value: object) -> str:
    """A property value as RocketMQ keeps it: a number or a boolean as its JSON text."""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def test_published_over_http_reaches_java_tag_and_go_sql92_consumers(server, http_gateway, gw, java, go):
    """Five envelopes with a tag, two keys and string/integer/float/boolean properties, published over HTTP:
    a Java push consumer subscribed to `TagA` and a Go push consumer subscribed to an SQL92 expression on
    the properties each receive exactly the messages they select (nothing more within 2 s), each with its
    body, tag, keys and properties as sent (numbers and booleans as their text) and the msgId the gateway
    answered."""
    topic, group = fresh("HttpOut")
    sent = {}
    for i, (tag, props) in enumerate(HTTP_PUBLISHED):
        r = gw.publish_envelope(topic, {"body": f"http-{i}", "tag": tag, "keys": [f"order-{i}", f"user-{i}"],
                                        "properties": props})
        assert r.status_code == 200, r.text
        sent[f"http-{i}"] = r.json()["msgId"]
    ns = server.namesrv_addr
    consumers = {
        "java": (java.spawn("consume", n=ns, t=topic, g=f"{group}_java", expr=TAG_EXPRESSION,
                            count=len(TAG_SELECTS), timeout=WAIT, linger=2), TAG_SELECTS),
        "go": (go.spawn("consume", n=ns, t=topic, g=f"{group}_go", sql=SQL_EXPRESSION, count=len(SQL_SELECTS),
                        timeout=WAIT, linger=2), SQL_SELECTS),
    }
    results = finish_all({name: running for name, (running, _) in consumers.items()}, WAIT + 30)
    for name, res in results.items():
        selects = consumers[name][1]
        res.check()
        assert sorted(bodies(res)) == sorted(f"http-{i}" for i in selects), f"{name}:\n{res.explain()}"
        for e in res.of("received"):
            i = int(e["body"].removeprefix("http-"))
            tag, props = HTTP_PUBLISHED[i]
            assert (e["msgId"], e["tags"], e["keys"]) == (sent[e["body"]], tag, f"order-{i} user-{i}"), \
                f"{name}: {e}"
            assert user_properties(e, props) == {k: as_text(v) for k, v in props.items()}, f"{name}: {e}"


# ---------------------------------------------------------------------------------------------- Java, Go -> HTTP


#: HTTP consumer groups filtering the producers' messages: type -> (expression, the bodies it selects)
HTTP_FILTERS = {"TAG": ("TagJava0 || TagGo2", {"java-0", "go-2"}),
                "SQL92": ("origin = 'go' AND ratio > 1.0", {"go-1", "go-2"})}


def test_java_and_go_producers_reach_http_consumers(server, gw, java, go, tmp_path):
    """The Java and the Go producer each send three messages with a tag, two keys and user properties; an
    HTTP consumer receives all six with their bodies, tags, keys and properties as sent, and each with the
    msgId its producer got. HTTP consumers of two more groups, subscribed with a tag expression and with
    an SQL92 expression, receive exactly the messages they select (nothing more within 1 s)."""
    topic, group = fresh("HttpIn")
    ns = server.namesrv_addr
    specs = {name: [{"body": f"{name}-{i}", "tag": f"Tag{name.title()}{i}", "keys": f"{name}-key-{i} shared-{i}",
                     "props": {"origin": name, "seq": str(i), "ratio": f"{i}.5"}} for i in range(3)]
             for name in ("java", "go")}
    msg_ids = {}
    for name, producer in (("java", java), ("go", go)):
        res = producer("send", n=ns, t=topic, spec=write_spec(tmp_path, specs[name])).check()
        assert len(res.of("sent")) == 3, res.explain()
        for e in res.of("sent"):
            msg_ids[specs[name][e["index"]]["body"]] = e["msgId"]
    got = consume_over_http(gw, topic, group, set(msg_ids))
    assert sorted(m["body"] for m in got) == sorted(msg_ids), got
    expected = {e["body"]: e for spec in specs.values() for e in spec}
    for m in got:
        e = expected[m["body"]]
        assert (m["msgId"], m["tag"], m["keys"], m["properties"]) == \
            (msg_ids[m["body"]], e["tag"], e["keys"].split(), e["props"]), m
    for kind, (expression, want) in HTTP_FILTERS.items():
        filtered = f"{group}_{kind.lower()}"
        picked = consume_over_http(gw, topic, filtered, want, expression=expression, type=kind)
        picked += gw.receive(topic, filtered, wait=1, expression=expression, type=kind)
        assert sorted(m["body"] for m in picked) == sorted(want), f"{kind} {expression}: {picked}"


# ---------------------------------------------------------------------------------------------- one group, two kinds


def consumers_of(server, group: str) -> int:
    """How many consumers of ``group`` the broker lists."""
    reply = call(server.broker_addr, request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group}),
                 timeout=3)
    if reply.code != ResponseCode.SUCCESS:
        return 0
    return len(orjson.loads(reply.body)["consumerIdList"])


def wait_for_consumers(server, group: str, count: int, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while consumers_of(server, group) != count:
        assert time.monotonic() < deadline, f"{server.kind} lists {consumers_of(server, group)} consumers of " \
                                            f"{group}, not {count}, after {timeout} s"
        time.sleep(0.1)


def committed_behind(server, topic: str, group: str) -> int:
    """Messages of ``topic`` stored beyond the group's committed offsets, over all its queues."""
    (queues,) = {q.read_queue_nums for q in admin.route(server.namesrv_addr, topic).queue_datas}
    behind = 0
    for queue_id in range(queues):
        top = call(server.broker_addr, request(RequestCode.GET_MAX_OFFSET, {"topic": topic, "queueId": str(queue_id)}))
        assert top.code == ResponseCode.SUCCESS, top
        behind += int(top.ext("offset")) - (admin.consumer_offset(server.broker_addr, group, topic, queue_id) or 0)
    return behind


def publish_bodies(gw: Gateway, topic: str, names: list[str]) -> None:
    for name in names:
        assert gw.publish_envelope(topic, {"body": name}).status_code == 200


def test_one_group_consumed_over_http_and_by_a_java_consumer(server, gw, java, mqadmin5, record_property):
    """An HTTP consumer and a Java push consumer of one group share the topic's four queues: 20 messages
    sent while both consume are all consumed, by both; once the Java consumer has left, the HTTP consumer
    takes every queue (20 more, all over HTTP). The HTTP acks are the group's committed offsets (`mqadmin
    consumerProgress` shows no diff): a Java consumer joining afterwards receives the 8 messages sent then
    (its share), never an earlier one."""
    topic, group = fresh("HttpShared")
    ns = server.namesrv_addr
    publish_bodies(gw, topic, ["warm-up"])
    received = consume_over_http(gw, topic, group, {"warm-up"})
    first = java.spawn("consume", n=ns, t=topic, g=group, count=1000, idle=3, timeout=WAIT, instance="shared-a")
    second = None
    try:
        first.wait_for("started")
        wait_for_consumers(server, group, 2)
        time.sleep(1.5)  # both rebalance: the Java client every second, the gateway's on the broker's notice
        round1 = [f"round1 #{i}" for i in range(20)]
        publish_bodies(gw, topic, round1)
        received += consume_over_http(gw, topic, group, set(round1), others=lambda: bodies(first.result()))
        java_round1 = bodies(first.finish(WAIT))  # it leaves 3 s after its last message
        wait_for_consumers(server, group, 1)
        round2 = [f"round2 #{i}" for i in range(20)]
        publish_bodies(gw, topic, round2)
        received += consume_over_http(gw, topic, group, set(round2))
        http_bodies = [m["body"] for m in received]
        assert set(round1) <= set(http_bodies) | set(java_round1), f"round 1 lost: {http_bodies} {java_round1}"
        assert set(round2) <= set(http_bodies), f"round 2 lost over HTTP: {http_bodies}"
        assert set(java_round1) & set(round1) and set(http_bodies) & set(round1), \
            f"the queues were not shared: HTTP {http_bodies}, Java {java_round1}"
        # the acks reach the broker with the gateway's next offset commit (every 5 s)
        deadline = time.monotonic() + 15
        while (behind := committed_behind(server, topic, group)) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert behind == 0, f"{behind} acked messages are not behind {group}'s committed offsets"
        progress = mqadmin5(ns, "consumerProgress", "-g", group)
        assert re.search(r"^Consume Diff Total: 0$", progress, re.MULTILINE), progress
        second = java.spawn("consume", n=ns, t=topic, g=group, count=1000, timeout=WAIT, instance="shared-b")
        second.wait_for("started")
        wait_for_consumers(server, group, 2)
        time.sleep(1.5)
        round3 = [f"round3 #{i}" for i in range(8)]
        publish_bodies(gw, topic, round3)
        received += consume_over_http(gw, topic, group, set(round3), others=lambda: bodies(second.result()))
        time.sleep(1)  # late duplicates
        second.kill()
        java_round3 = bodies(second.finish(10))
    finally:
        first.kill()
        if second is not None:
            second.kill()
    http_bodies = [m["body"] for m in received]
    assert set(round3) <= set(http_bodies) | set(java_round3), f"round 3 lost: {http_bodies} {java_round3}"
    assert java_round3 and set(java_round3) <= set(round3), \
        f"the Java consumer joining after the HTTP acks got {java_round3}: not (only) round 3"
    seen = Counter(http_bodies + java_round1 + java_round3)
    duplicates = sum(n - 1 for n in seen.values())
    record_property("duplicates", duplicates)
    assert duplicates <= 20, f"{duplicates} duplicates: more than one round re-delivered"


# ---------------------------------------------------------------------------------------------- retry, DLQ


def test_nacked_twice_over_http_is_dead_lettered_for_java(server, gw, java):
    """Consumed over HTTP with maxReconsumeTimes=1: nacked, the message comes back once (reconsumeTimes 1,
    same msgId); nacked again, it goes to %DLQ%<group>, where a Java push consumer receives it with its
    original msgId, body, tag and keys, reconsumeTimes 2 and RETRY_TOPIC naming its topic; it does not come
    back over HTTP."""
    topic, group = fresh("HttpDlq")
    r = gw.publish_envelope(topic, {"body": "doomed", "keys": "doomed-key", "tag": "TagD"})
    assert r.status_code == 200, r.text
    msg_id = r.json()["msgId"]
    query = {"maxReconsumeTimes": 1}
    deliveries = []
    for attempt in range(2):
        got = []
        deadline = time.monotonic() + WAIT
        while not got and time.monotonic() < deadline:
            got = gw.receive(topic, group, wait=2, **query)
        assert [m["body"] for m in got] == ["doomed"], f"delivery {attempt + 1}: {got}"
        deliveries += got
        nacked = gw.settle("nack", topic, group, [got[0]["receiptHandle"]], delayLevel=1)
        assert nacked.status_code == 200, nacked.text
    assert [(m["msgId"], m["reconsumeTimes"]) for m in deliveries] == [(msg_id, 0), (msg_id, 1)], deliveries
    dlq = java.spawn("consume", n=server.namesrv_addr, t=f"%DLQ%{group}", g=f"{group}_dlq", count=1, timeout=WAIT)
    try:
        again = gw.receive(topic, group, wait=3, **query)
        res = dlq.finish(WAIT + 30).check()
    finally:
        dlq.kill()
    assert again == [], f"the dead-lettered message came back over HTTP: {again}"
    (dead,) = res.of("received")
    assert (dead["msgId"], dead["body"], dead["keys"], dead["tags"]) == (msg_id, "doomed", "doomed-key", "TagD"), \
        res.explain()
    assert (dead["reconsumeTimes"], dead["properties"].get("RETRY_TOPIC")) == (2, topic), res.explain()


# ---------------------------------------------------------------------------------------------- transactions


@pytest.fixture
def receiver():
    """A loopback check-back receiver verifying the gateways' signatures (tests/gateways/check_back_receiver)."""
    r = Receiver(CHECK_BACK_SECRET)
    yield r
    r.close()


def begin_transaction(gw: Gateway, topic: str, producer_group: str, check_back_url: str, message: dict) -> dict:
    """Publish a half message over HTTP and leave it unresolved; the transaction the gateway answered."""
    r = gw.request("POST", f"/v1/topics/{topic}/transactions",
                   json={"producerGroup": producer_group, "checkBackUrl": check_back_url, "message": message})
    assert r.status_code == 201, r.text
    assert r.json()["state"] == "UNKNOWN", r.text
    return r.json()


def transaction(gw: Gateway, tx_id: str) -> dict:
    r = gw.request("GET", f"/v1/transactions/{tx_id}")
    assert r.status_code == 200, r.text
    return r.json()


#: the committed half message's user properties (string, float, boolean)
TX_PROPERTIES = {"order": "order-7", "amount": 12.5, "paid": True}


def test_transaction_over_http_resolved_by_check_back_reaches_java(server, gw, java, receiver):
    """Two half messages published over HTTP with a producer group and a check-back URL, and left
    unresolved: the broker checks them back through the gateway, whose calls the receiver verifies
    (HMAC-SHA256 with the gateway's httpCheckBackSecret). Answered ROLLBACK, the first never reaches a
    Java push consumer (nothing within 3 s of it receiving the other); answered UNKNOWN, then COMMIT on
    the next check, the second reaches it once, with the msgId the gateway answered, its body, tag, keys
    and properties. Each transaction's check-backs in GET /v1/transactions/{id} are the receiver's calls:
    as many, with the same checkTimes and answers."""
    topic, group = fresh("HttpTx")
    producers = f"{group}_producer"
    plans = {"tx-rollback": ["ROLLBACK"], "tx-commit": ["UNKNOWN", "COMMIT"]}
    rolled_back = begin_transaction(gw, topic, producers, receiver.url,
                                    {"body": "tx-rollback", "tag": "TagTx", "keys": ["order-6"]})
    committed = begin_transaction(gw, topic, producers, receiver.url,
                                  {"body": "tx-commit", "tag": "TagTx", "keys": ["order-7", "user-7"],
                                   "properties": TX_PROPERTIES})
    txs = {"tx-rollback": rolled_back, "tx-commit": committed}
    for body, tx in txs.items():
        receiver.plans[tx["transactionId"]] = list(plans[body])
    consumer = java.spawn("consume", n=server.namesrv_addr, t=topic, g=group, count=1, timeout=WAIT, linger=3)
    try:
        res = consumer.finish(WAIT + 30).check()
    finally:
        consumer.kill()
    (received,) = res.of("received")
    assert (received["msgId"], received["body"], received["tags"], received["keys"]) == \
        (committed["msgId"], "tx-commit", "TagTx", "order-7 user-7"), res.explain()
    assert user_properties(received, TX_PROPERTIES) == {k: as_text(v) for k, v in TX_PROPERTIES.items()}, \
        res.explain()
    for body, tx in txs.items():
        seen = transaction(gw, tx["transactionId"])
        calls = receiver.calls_of(tx["transactionId"])
        assert (seen["state"], seen["resolvedBy"]) == (plans[body][-1], "checkBack"), seen
        assert all(c["verified"] for c in calls), f"{body}: a check-back call did not verify"
        assert [(c["json"]["checkTimes"], c["answered"]) for c in calls] == list(enumerate(plans[body], 1)), \
            f"{body}: {[c['json'] for c in calls]}"
        assert {(c["json"]["msgId"], c["json"]["producerGroup"], c["json"]["topic"]) for c in calls} == \
            {(tx["msgId"], producers, topic)}, f"{body}: {[c['json'] for c in calls]}"
        assert [(c["checkTimes"], c["answer"], c["url"], c["status"]) for c in seen["checkBacks"]] == \
            [(c["json"]["checkTimes"], c["answered"], receiver.url, 200) for c in calls], f"{body}: {seen}"
    assert transaction(gw, rolled_back["transactionId"])["resolvedAt"] <= received["receivedAt"], \
        "the rolled-back transaction was resolved after the Java consumer's 3 s watch began"


#: seconds from a half message's birth to the broker's last check of it (servers.FEATURE_CONFIG)
CHECKS_OVER_S = (TRANSACTION_TIMEOUT_MS + TRANSACTION_CHECK_MAX * TRANSACTION_CHECK_INTERVAL_MS) / 1000


def test_open_transactions_outlive_a_killed_gateway(server, compat_home, receiver):
    """``ferrymq gateway http`` in front of the server, SIGKILLed right after publishing two half messages
    over HTTP and started again on the same port and store: the client's commit of one reaches the broker,
    and the broker's next check of the other reaches its check-back URL through the new gateway, whose
    COMMIT is applied; both are received over HTTP. Checks made while the gateway was down count, as
    they do for a Java producer that is down; those the receiver answered before the kill stay in the
    transaction's history. The new gateway must be back before the broker's checks run out (2 s, then two
    checks a second apart; about 2.5 s is usual): a round where it was not proves the client's commit and
    is tried again on a fresh topic, three rounds at most."""
    late = []
    for _ in range(3):
        back = _kill_and_restart_with_two_open_transactions(server, compat_home, receiver)
        if back is None:
            return
        late.append(round(back, 1))
    pytest.fail(f"the gateway was back {late} s after the publish in each round, when the broker's checks of the "
                f"half message were over ({CHECKS_OVER_S:g} s): the check-back after a restart was never tried")


def _kill_and_restart_with_two_open_transactions(server, compat_home, receiver) -> float | None:
    """One round of the test above: None when all was proven, else the seconds the gateway took to come
    back (too late for the check-back part; the client's commit was proven)."""
    topic, group = fresh("HttpTxRestart")
    producers = f"{group}_producer"
    home = compat_home / f"http-gateway-{server.kind}-{group}"
    settings = {"storePathRootDir": home / "store"}
    gateway = GatewayProcess.start(_ferrymq_cli(), home, server.namesrv_addr, settings=settings)
    gw = Gateway(gateway.url)
    try:
        by_client = begin_transaction(gw, topic, producers, receiver.url, {"body": "committed by the client"})
        by_check = begin_transaction(gw, topic, producers, receiver.url, {"body": "committed by a check-back"})
        published = time.monotonic()
        gateway.stop()  # SIGKILL
        gw.close()
        asked_before = len(receiver.calls_of(by_check["transactionId"]))
        receiver.plans[by_check["transactionId"]] = ["COMMIT"]
        gateway = GatewayProcess.start(_ferrymq_cli(), home, server.namesrv_addr, port=gateway.port,
                                       settings=settings)
        back = time.monotonic() - published
        gw = Gateway(gateway.url)
        done = gw.request("POST", f"/v1/transactions/{by_client['transactionId']}", json={"action": "commit"})
        assert done.status_code == 200 and done.json()["resolvedBy"] == "client", done.text
        if back > CHECKS_OVER_S:
            got = consume_over_http(gw, topic, group, {"committed by the client"})
            assert by_client["msgId"] in {m["msgId"] for m in got}, got
            return back
        deadline = time.monotonic() + WAIT
        while (seen := transaction(gw, by_check["transactionId"]))["state"] == "UNKNOWN" and time.monotonic() < deadline:
            time.sleep(0.2)
        assert (seen["state"], seen["resolvedBy"]) == ("COMMIT", "checkBack"), seen
        # the calls the history shows are the receiver's; a check the broker made again meanwhile or after
        # (on another copy of the half message) is in it too, answered COMMIT without a call
        assert [c["answer"] for c in seen["checkBacks"] if c["url"] is not None] == \
            ["UNKNOWN"] * asked_before + ["COMMIT"], seen
        assert all(c["answer"] == "COMMIT" for c in seen["checkBacks"] if c["url"] is None), seen
        assert [c["answered"] for c in receiver.calls_of(by_check["transactionId"])] == \
            ["UNKNOWN"] * asked_before + ["COMMIT"]
        got = consume_over_http(gw, topic, group, {"committed by the client", "committed by a check-back"})
        # at least once: a commit crossing a check of another copy of the half message delivers it twice
        assert {m["msgId"] for m in got} == {by_client["msgId"], by_check["msgId"]}, got
        return None
    finally:
        gw.close()
        gateway.stop()
