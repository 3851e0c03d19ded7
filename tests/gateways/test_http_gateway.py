"""The HTTP gateway against a running `ferrymq standalone`, with httpx: every endpoint and its refusals.

Every answer is held against /openapi.json (http_client.check_answer)."""

from __future__ import annotations

import base64
import threading
import time

import pytest

from ferrymq.sdk import BlockingProducer
from ferrymq.sdk.message import Message
from ferrymq.testing import admin
from ferrymq.wire.codes import RequestCode
from ferrymq.wire.command import request
from ferrymq.wire.headers import ViewMessageRequestHeader
from ferrymq.wire.message import decode_records
from ferrymq.wire.msgid import parse_offset_msg_id

from .http_client import Gateway, names

pytestmark = pytest.mark.timeout(120)

#: short delay levels: a nacked message (level 3 + reconsumeTimes) comes back within a second or two
LEVELS = "1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s"


@pytest.fixture(scope="module")
def server(ferrymq_factory_module):
    return ferrymq_factory_module


@pytest.fixture(scope="module")
def ferrymq_factory_module(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path_factory.mktemp("http"), {"enablePropertyFilter": True, "messageDelayLevel": LEVELS,
                                                         "maxMessageSize": 65536},
                       http=True) as srv:
        yield srv


def _names():
    return names("HttpT", "HttpG")


def test_raw_publish_is_consumed_with_its_tag_keys_and_media_type(server, gw):
    topic, group = _names()
    server.create_topic(topic, 2)
    sent = gw.publish(topic, "hello", tag="TagA", keys="k1 k2")
    assert sent["topic"] == topic and sent["status"] == "SEND_OK" and sent["queueId"] in (0, 1)
    [msg] = gw.receive_all(topic, group, 1)
    assert (msg["msgId"], msg["body"], msg["bodyEncoding"], msg["tag"], msg["keys"]) == \
        (sent["msgId"], "hello", "text", "TagA", ["k1", "k2"])
    assert msg["properties"] == {"CONTENT_TYPE": "text/plain"}
    assert (msg["queueId"], msg["queueOffset"], msg["reconsumeTimes"]) == (sent["queueId"], sent["queueOffset"], 0)
    gw.ack(topic, group, [msg])
    assert gw.receive(topic, group, wait=0.5) == []


def test_envelope_properties_and_binary_body_arrive_as_sent(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    payload = bytes(range(256))
    r = gw.publish_envelope(topic, {"body": base64.b64encode(payload).decode(), "bodyEncoding": "base64",
                                    "tag": "bin", "keys": ["order-1"], "contentType": "application/octet-stream",
                                    "properties": {"region": "eu", "amount": 12.5, "vip": True, "n": 3}})
    assert r.status_code == 200, r.text
    [msg] = gw.receive_all(topic, group, 1)
    assert msg["bodyEncoding"] == "base64" and base64.b64decode(msg["body"]) == payload
    assert msg["properties"] == {"region": "eu", "amount": "12.5", "vip": "true", "n": "3",
                                 "CONTENT_TYPE": "application/octet-stream"}
    assert (msg["tag"], msg["keys"]) == ("bin", ["order-1"])
    gw.ack(topic, group, [msg])


def test_a_batch_is_stored_consecutively_in_one_queue(server, gw):
    topic, group = _names()
    server.create_topic(topic, 4)
    r = gw.publish_envelope(topic, {"messages": [{"body": f"m{i}", "tag": "B"} for i in range(5)]})
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert len({res["msgId"] for res in results}) == 5
    assert len({(res["queueId"]) for res in results}) == 1
    assert [res["queueOffset"] for res in results] == list(range(results[0]["queueOffset"],
                                                                  results[0]["queueOffset"] + 5))
    got = gw.receive_all(topic, group, 5, max=10)
    assert sorted(m["body"] for m in got) == [f"m{i}" for i in range(5)]
    assert {m["msgId"] for m in got} == {res["msgId"] for res in results}
    gw.ack(topic, group, got)


def test_sharding_key_keeps_one_key_in_one_queue(server, gw):
    topic, _ = _names()
    server.create_topic(topic, 8)
    queues = {gw.publish(topic, f"o{i}", shardingKey="order-42")["queueId"] for i in range(6)}
    assert len(queues) == 1


def test_tag_and_sql92_filters_pick_what_a_group_gets(server, gw):
    topic, group = _names()
    server.create_topic(topic, 2)
    for i in range(6):
        gw.publish_envelope(topic, {"body": f"b{i}", "tag": "even" if i % 2 == 0 else "odd", "properties": {"i": i}})
    tagged = gw.receive_all(topic, group + "_tag", 3, expression="even", max=10)
    assert sorted(m["body"] for m in tagged) == ["b0", "b2", "b4"]
    sql = gw.receive_all(topic, group + "_sql", 2, expression="i >= 4", type="SQL92", max=10)
    assert sorted(m["body"] for m in sql) == ["b4", "b5"]
    gw.ack(topic, group + "_tag", tagged)
    gw.ack(topic, group + "_sql", sql)
    assert gw.receive(topic, group + "_sql", type="SQL92", expression="i >= 4", wait=1) == []


def test_long_poll_answers_as_soon_as_a_message_arrives(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    assert gw.receive(topic, group, wait=1) == []  # the group is consuming now
    timer = threading.Timer(0.7, gw.publish, (topic, "late"))
    timer.start()
    started = time.monotonic()
    got = gw.receive(topic, group, wait=20)
    took = time.monotonic() - started
    timer.join()
    assert [m["body"] for m in got] == ["late"] and took < 10, took
    gw.ack(topic, group, got)


def test_nack_redelivers_through_the_retry_topic_then_the_dead_letter_queue(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    sent = gw.publish(topic, "retry me", tag="R")
    [first] = gw.receive_all(topic, group, 1, maxReconsumeTimes=1)
    assert gw.settle("nack", topic, group, [first["receiptHandle"]]).json() == {"settled": 1}
    [again] = gw.receive_all(topic, group, 1, rounds=30, maxReconsumeTimes=1)
    assert (again["msgId"], again["topic"], again["body"], again["reconsumeTimes"]) == \
        (sent["msgId"], topic, "retry me", 1)
    gw.settle("nack", topic, group, [again["receiptHandle"]])
    deadline = time.monotonic() + 30
    while admin.route(server.namesrv_addr, f"%DLQ%{group}") is None:  # the broker makes it on the way
        assert time.monotonic() < deadline, "no dead-letter queue"
        time.sleep(0.1)
    dead = gw.receive_all(f"%DLQ%{group}", group + "_dlq", 1, rounds=30)
    assert [(m["msgId"], m["body"]) for m in dead] == [(sent["msgId"], "retry me")]
    gw.ack(f"%DLQ%{group}", group + "_dlq", dead)


def test_an_unacked_message_comes_back_after_its_invisibility_time(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    gw.publish(topic, "slow consumer")
    [msg] = gw.receive_all(topic, group, 1, invisible=1)
    [back] = gw.receive_all(topic, group, 1, rounds=30)
    assert back["body"] == "slow consumer" and back["reconsumeTimes"] == 1
    r = gw.settle("ack", topic, group, [msg["receiptHandle"]])
    assert r.status_code == 404 and r.json()["field"] == "/receiptHandles/0"
    gw.ack(topic, group, [back])


def test_acked_offsets_are_the_groups_offsets(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    for i in range(3):
        gw.publish(topic, f"c{i}")
    got = gw.receive_all(topic, group, 3, max=3)
    gw.ack(topic, group, got)
    deadline = time.monotonic() + 15  # the consumer commits on its next pull or offset persist
    while admin.consumer_offset(server.broker_addr, group, topic, 0) != 3:
        assert time.monotonic() < deadline, admin.consumer_offset(server.broker_addr, group, topic, 0)
        time.sleep(0.2)


def test_a_message_published_over_remoting_is_consumed_over_http(server, gw):
    topic, group = _names()
    server.create_topic(topic, 2)
    producer = BlockingProducer("HttpRemotingPG", server.namesrv_addr)
    producer.start()
    try:
        producer.send(Message(topic, b"from the sdk", tags="S", keys="sdk-key", properties={"origin": "remoting"}))
    finally:
        producer.shutdown()
    [msg] = gw.receive_all(topic, group, 1)
    assert (msg["body"], msg["tag"], msg["keys"], msg["properties"]) == \
        ("from the sdk", "S", ["sdk-key"], {"origin": "remoting"})
    gw.ack(topic, group, [msg])


def test_topics_are_listed_and_created(server, gw):
    topic, _ = _names()
    r = gw.request("POST", "/v1/topics", json={"topic": topic, "queueNums": 3})
    assert r.status_code == 201, r.text
    assert topic in gw.request("GET", "/v1/topics").json()["topics"]
    route = admin.route(server.namesrv_addr, topic)
    assert route is not None and route.queue_datas[0].write_queue_nums == 3


# ---------------------------------------------------------------- refusals


@pytest.mark.parametrize(("kwargs", "status", "field"), [
    ({"content": b"{not json", "headers": {"Content-Type": "application/vnd.ferrymq.message+json"}}, 400, "/"),
    ({"json": {"body": "x", "colour": "red"}, "headers": {"Content-Type": "application/vnd.ferrymq.message+json"}},
     400, "/colour"),
    ({"json": {"tag": "x"}, "headers": {"Content-Type": "application/vnd.ferrymq.message+json"}}, 400, "/body"),
    ({"json": {"body": "!!", "bodyEncoding": "base64"},
      "headers": {"Content-Type": "application/vnd.ferrymq.message+json"}}, 400, "/body"),
    ({"json": {"messages": [{"body": "n\u00e9", "bodyEncoding": "base64"}]},
      "headers": {"Content-Type": "application/vnd.ferrymq.message+json"}}, 400, "/messages/0/body"),
    ({"json": {"body": "x", "properties": {"TAGS": "sneaky"}},
      "headers": {"Content-Type": "application/vnd.ferrymq.message+json"}}, 400, "/properties/TAGS"),
    ({"json": {"messages": [{"body": "a"}, {"body": "b", "delayLevel": 2}]},
      "headers": {"Content-Type": "application/vnd.ferrymq.message+json"}}, 400, "/messages/1/delayLevel"),
    ({"content": b"", "headers": {"Content-Type": "text/plain"}}, 400, "/"),
    ({"content": b"x" * 70000, "headers": {"Content-Type": "text/plain"}}, 413, "/"),
    ({"content": b"x", "params": {"delayLevel": "soon"}}, 400, "query.delayLevel"),
    ({"content": b"x", "params": {"colour": "red"}}, 400, "query.colour"),
], ids=["bad-json", "unknown-member", "no-body", "bad-base64", "non-ascii-base64", "system-property", "delay-in-batch", "empty",
        "too-large", "bad-delay", "unknown-param"])
def test_bad_publishes_are_refused_naming_the_field(server, gw, kwargs, status, field):
    topic, _ = _names()
    server.create_topic(topic, 1)
    r = gw.request("POST", f"/v1/topics/{topic}/messages", **kwargs)
    assert r.status_code == status, r.text
    problem = r.json()
    assert r.headers["content-type"] == "application/problem+json"
    assert (problem["status"], problem["field"]) == (status, field), problem
    assert problem["detail"]


def test_a_body_without_a_length_is_published_whole_and_refused_once_over_the_limit(server, gw):
    """A chunked body comes in pieces: they are joined, and counted against maxMessageSize as they come."""
    topic, group = _names()
    server.create_topic(topic, 1)
    r = gw.request("POST", f"/v1/topics/{topic}/messages", content=iter([b"a" * 3000, b"b" * 3000, b"c"]),
                   headers={"Content-Type": "text/plain"})
    assert r.status_code == 200 and "content-length" not in r.request.headers, r.text
    [msg] = gw.receive_all(topic, group, 1)
    assert msg["body"] == "a" * 3000 + "b" * 3000 + "c"
    r = gw.request("POST", f"/v1/topics/{topic}/messages", content=iter([b"x" * 40000, b"x" * 40000]),
                   headers={"Content-Type": "text/plain"})
    assert (r.status_code, r.json()["field"]) == (413, "/"), r.text


def test_publishing_to_a_topic_that_does_not_exist_is_404(tmp_path):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path, {"autoCreateTopicEnable": False}, http=True) as srv:
        client = Gateway(srv.http_url)
        r = client.request("POST", "/v1/topics/NoSuchTopic/messages", content=b"x")
        assert r.status_code == 404 and r.json()["field"] == "path.topic", r.text
        assert "NoSuchTopic" in r.json()["detail"]
        r = client.request("GET", "/v1/topics/NoSuchTopic/messages", params={"group": "G", "wait": 0})
        assert r.status_code == 404 and r.json()["field"] == "path.topic", r.text
        client.close()


def test_bad_consume_requests_are_refused(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    r = gw.request("GET", f"/v1/topics/{topic}/messages")
    assert (r.status_code, r.json()["field"]) == (400, "query.group")
    r = gw.request("GET", f"/v1/topics/{topic}/messages", params={"group": group, "type": "SQL92",
                                                                  "expression": "a >>> 1", "wait": 0})
    assert (r.status_code, r.json()["field"]) == (400, "query.expression"), r.text
    r = gw.request("GET", f"/v1/topics/{topic}/messages", params={"group": group, "max": 0})
    assert (r.status_code, r.json()["field"]) == (400, "query.max")
    assert gw.receive(topic, group, wait=0) == []
    r = gw.request("GET", f"/v1/topics/{topic}/messages", params={"group": group, "expression": "TagA", "wait": 0})
    assert (r.status_code, r.json()["field"]) == (409, "query.expression"), r.text
    r = gw.request("GET", f"/v1/topics/{topic}/messages", params={"group": group, "maxReconsumeTimes": 2, "wait": 0})
    assert (r.status_code, r.json()["field"]) == (409, "query.maxReconsumeTimes"), r.text


def test_bad_acks_are_refused(server, gw):
    topic, group = _names()
    r = gw.settle("ack", topic, group, ["nope"])
    assert (r.status_code, r.json()["field"]) == (404, "/group")
    r = gw.request("POST", f"/v1/topics/{topic}/ack", content=b"group=x", headers={"Content-Type": "text/plain"})
    assert r.status_code == 415
    r = gw.request("POST", f"/v1/topics/{topic}/ack", json={"group": group, "receiptHandles": []})
    assert (r.status_code, r.json()["field"]) == (400, "/receiptHandles")
    r = gw.settle("ack", topic, group, ["h"], delayLevel=3)
    assert (r.status_code, r.json()["field"]) == (400, "/delayLevel")


def test_unknown_paths_and_methods_are_problems(gw):
    r = gw.http.get("/v2/nothing")
    assert r.status_code == 404 and r.headers["content-type"] == "application/problem+json"
    r = gw.http.delete("/v1/topics")
    assert r.status_code == 405 and r.json()["status"] == 405


def test_the_openapi_document_is_served(gw):
    doc = gw.request("GET", "/openapi.json").json()
    assert doc["openapi"].startswith("3.1") and "/v1/topics/{topic}/messages" in doc["paths"]


def test_nothing_is_lost_or_repeated_across_a_restart_between_publish_and_ack(tmp_path):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path, http=True) as srv:
        srv.create_topic("Durable", 2)
        client = Gateway(srv.http_url)
        sent = {client.publish("Durable", f"d{i}")["msgId"] for i in range(10)}
        srv.restart()
        got = client.receive_all("Durable", "DurableG", 10, max=16)
        assert {m["msgId"] for m in got} == sent and len(got) == 10
        client.ack("Durable", "DurableG", got)
        srv.restart()
        assert client.receive("Durable", "DurableG", wait=3) == []
        client.close()


def test_a_long_poll_given_up_by_its_client_hands_out_nothing(server, gw):
    import httpx

    topic, group = _names()
    server.create_topic(topic, 1)
    assert gw.receive(topic, group, wait=0.5) == []
    with pytest.raises(httpx.ReadTimeout):
        gw.http.get(f"/v1/topics/{topic}/messages", params={"group": group, "wait": 20}, timeout=1.0)
    gw.publish(topic, "after the hang-up")
    started = time.monotonic()
    got = gw.receive_all(topic, group, 1)
    assert [m["body"] for m in got] == ["after the hang-up"] and got[0]["reconsumeTimes"] == 0
    assert time.monotonic() - started < 10  # not held back for an invisibility time
    gw.ack(topic, group, got)


def test_whole_numbers_written_with_a_fraction_are_integers(server, gw):
    topic, _ = _names()
    r = gw.request("POST", "/v1/topics", json={"topic": topic, "queueNums": 3.0, "perm": 6.0})
    assert r.status_code == 201, r.text
    assert admin.route(server.namesrv_addr, topic).queue_datas[0].write_queue_nums == 3
    r = gw.publish_envelope(topic, {"body": "x", "delayLevel": 1.0})
    assert r.status_code == 200, r.text


def test_the_broker_processs_gateway_publishes_in_process(server, gw):
    """Its sends run through the broker's request table, not a loopback connection: the stored BORNHOST is
    the broker's host with port 0, where a connection would show its own port."""
    topic, _ = _names()
    server.create_topic(topic, 1)
    sent = gw.publish(topic, "in process")
    (host, _), offset = parse_offset_msg_id(sent["offsetMsgId"])
    answer = admin.call(server.broker_addr, request(RequestCode.VIEW_MESSAGE_BY_ID,
                                                    ViewMessageRequestHeader(offset=offset).to_ext()))
    [msg] = decode_records(answer.body)
    assert (msg.body, msg.born_host) == (b"in process", (host, 0))
