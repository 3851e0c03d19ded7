"""Issue 26: the web console shows a cluster's figures as the RocketMQ admin protocol reports them, in front
of Apache RocketMQ (``ferrymq gateway http -n``, the ``http_gateway`` fixture) and served by FerryMQ itself.

On each server a topic gets messages with keys, a group consumes them and goes away, and more arrive: the
console's broker row, the topic's queues, the group's lag per queue and the messages found by offset id,
unique key and key (with their delivery trace) are the figures the SDK's admin client reads from that
server. The pages are read as served (the browser's view of them is tests/gateways/console's).
"""

from __future__ import annotations

import time

import httpx
import pytest
from ferrymq.gateways.http import groups
from ferrymq.sdk import BlockingMQAdmin, BlockingProducer, BlockingPushConsumer, ClientConfig, Message

from tests.gateways.console.dom import Page

from .test_official_clients import fresh, wait_until_offline

SENT, LATE = 6, 2


def _until(what, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (value := what()):
        assert time.monotonic() < deadline, "not reached in time"
        time.sleep(0.2)
    return value


@pytest.fixture(scope="module")
def scenario(server, http_gateway):
    topic, group = fresh("Console")
    with BlockingMQAdmin(server.namesrv_addr) as admin:
        admin.create_topic(topic, 2, broker_addr=server.broker_addr)
        admin.wait_for_route(topic)
        consumer = BlockingPushConsumer(group, consume_from_where="CONSUME_FROM_FIRST_OFFSET",
                                        config=ClientConfig(server.namesrv_addr, persist_consumer_offset_interval=0.2))
        consumer.subscribe(topic, "*")
        consumer.register_listener(lambda msgs, context: None)
        consumer.start()
        with BlockingProducer(f"{group}_p", server.namesrv_addr) as producer:
            sent = [producer.send(Message(topic, f"order {i}".encode(), tags="paid", keys=[f"order-{i}", "shop"]))
                    for i in range(SENT)]
            _until(lambda: groups.summary(group, admin.consume_stats(group))["lag"] == 0)
            consumer.shutdown()
            wait_until_offline(server, group)
            for i in range(LATE):
                producer.send(Message(topic, f"late {i}".encode()))
        with httpx.Client(base_url=f"{http_gateway}/console", timeout=30) as http:
            yield admin, http, topic, group, sent


def _page(http: httpx.Client, path: str, **query) -> Page:
    r = http.get(path, params=query)
    assert r.status_code == 200, r.text
    return Page(r.text)


def test_the_console_shows_the_brokers_figures(server, scenario):
    admin, http, topic, group, _ = scenario
    runtime = admin.runtime_info(server.broker_addr)
    rows = [r for r in _page(http, "/").tables["brokers"] if r[1] == server.broker_name]
    assert [r[:6] for r in rows] == [[server.cluster, server.broker_name, "0", "MASTER", server.broker_addr,
                                      runtime["brokerVersionDesc"]]]

    stats = admin.topic_stats(topic)
    queues = _page(http, f"/topics/{topic}").tables["queues"]
    assert [r[:4] for r in queues] == [[mq.broker_name, str(mq.queue_id), str(o.min_offset), str(o.max_offset)]
                                       for mq, o in sorted(stats.offset_table.items(), key=lambda i: i[0].queue_id)]
    assert sum(o.max_offset for o in stats.offset_table.values()) == SENT + LATE

    page = _page(http, f"/groups/{group}")
    detail = groups.detail(group, admin.consume_stats(group))
    assert page.fields["group-figures"]["Lag"] == str(detail["lag"]) == str(LATE)
    assert [r[:6] for r in page.tables["queues"]] == [
        [q["topic"], q["brokerName"], str(q["queueId"]), str(q["brokerOffset"]), str(q["consumerOffset"]),
         str(q["lag"])] for q in detail["queues"]]


def test_the_console_finds_a_message_by_id_and_key_with_its_trace(server, scenario):
    admin, http, topic, group, sent = scenario
    result = sent[3]
    msg = admin.message_by_id(topic, result.offset_msg_id)
    tracks = {t.group: t.track_type for t in admin.message_tracks(msg)}
    assert tracks[group] == "NOT_ONLINE"
    for msg_id in (result.offset_msg_id, result.msg_id):
        page = _page(http, "/messages", topic=topic, msgId=msg_id)
        shown = page.fields["message"]
        assert (shown["Message id (UNIQ_KEY)"], shown["Offset message id"], shown["Keys"], shown["Queue"],
                shown["Queue offset"]) == (result.msg_id, result.offset_msg_id, "order-3 shop",
                                           str(result.message_queue.queue_id), str(result.queue_offset))
        assert dict(page.tables["properties"]) == msg.properties
        assert {r[0]: r[1] for r in page.tables["trace"]} == tracks
    found = _page(http, "/messages", topic=topic, key="shop").tables["found"]
    assert sorted(r[0] for r in found) == sorted(r.msg_id for r in sent)

    missing = http.get("/messages", params={"topic": topic, "msgId": "0" * 32})
    assert (missing.status_code, Page(missing.text).texts["problem-field"]) == (404, "msgId")
