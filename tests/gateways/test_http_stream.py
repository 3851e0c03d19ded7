"""Server-Sent Events consumption (GET /v1/topics/{topic}/stream) against a running server: events are
the long poll's messages, settled with ack/nack, flow-controlled, kept open by heartbeats, and a closed
stream's messages come back after their invisibility time."""

from __future__ import annotations

import time

import pytest

from .http_client import Gateway, names

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path_factory.mktemp("sse"), http=True) as srv:
        yield srv


def _names():
    return names("SseT", "SseG")


def _events(stream, count: int, timeout: float = 20) -> list[dict]:
    got, deadline = [], time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        event = stream.next(deadline - time.monotonic())
        if event is not None:
            got.append(event)
    return got


def test_each_message_is_an_event_with_its_receipt_handle_and_is_settled_with_ack(server, gw):
    topic, group = _names()
    server.create_topic(topic, 2)
    stream = gw.stream(topic, group, heartbeat=1)
    try:
        sent = [gw.publish(topic, f"s{i}", tag="T") for i in range(3)]
        got = _events(stream, 3)
        assert sorted(m["body"] for m in got) == ["s0", "s1", "s2"]
        assert {m["msgId"] for m in got} == {s["msgId"] for s in sent}
        assert all(m["eventId"] == m["receiptHandle"] and m["tag"] == "T" for m in got)
        gw.ack(topic, group, got)
        assert stream.next(2.5) is None  # acked: not delivered again
    finally:
        stream.close()
    assert gw.receive(topic, group, wait=1) == []


def test_a_stream_holds_at_most_inflight_unsettled_messages(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    stream = gw.stream(topic, group, inflight=2, heartbeat=1)
    try:
        for i in range(5):
            gw.publish(topic, f"f{i}")
        first = _events(stream, 2)
        assert len(first) == 2
        assert stream.next(2.5) is None  # two held: nothing more until one is settled
        gw.ack(topic, group, first[:1])
        [third] = _events(stream, 1, timeout=10)
        assert stream.next(1.5) is None
        r = gw.settle("nack", topic, group, [first[1]["receiptHandle"], third["receiptHandle"]])
        assert r.json() == {"settled": 2}
        assert len(_events(stream, 2, timeout=10)) == 2
    finally:
        stream.close()


def test_heartbeats_keep_an_idle_stream_talking(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    stream = gw.stream(topic, group, heartbeat=1)
    try:
        assert stream.next(3.5) is None
        assert stream.comments >= 3  # the opening comment and a heartbeat a second
    finally:
        stream.close()


def test_messages_held_by_a_closed_stream_come_back_after_their_invisibility(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    stream = gw.stream(topic, group, invisible=2, heartbeat=1)
    try:
        sent = gw.publish(topic, "abandoned")
        [held] = _events(stream, 1)
    finally:
        stream.close()
    gw.publish(topic, "after the close")
    got = gw.receive_all(topic, group, 2, rounds=10, max=4)
    assert sorted((m["body"], m["reconsumeTimes"]) for m in got) == [("abandoned", 1), ("after the close", 0)]
    assert [m["msgId"] for m in got if m["body"] == "abandoned"] == [sent["msgId"]]
    r = gw.settle("ack", topic, group, [held["receiptHandle"]])
    assert r.status_code == 404
    gw.ack(topic, group, got)


def test_a_stream_and_a_long_poll_share_the_group(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    stream = gw.stream(topic, group, inflight=1, heartbeat=1)
    try:
        for i in range(3):
            gw.publish(topic, f"x{i}")
        [streamed] = _events(stream, 1)
        polled = gw.receive_all(topic, group, 2, max=4)
        assert sorted([streamed["body"]] + [m["body"] for m in polled]) == ["x0", "x1", "x2"]
        gw.ack(topic, group, [streamed, *polled])
    finally:
        stream.close()


def test_bad_stream_requests_are_refused_before_streaming(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    r = gw.stream(topic, group, inflight=0)
    assert (r.status_code, r.json()["field"]) == (400, "query.inflight")
    r = gw.stream(topic, group, wait=3)
    assert (r.status_code, r.json()["field"]) == (400, "query.wait")
    r = gw.stream(topic, group, type="SQL92", expression="a >>> 1")
    assert (r.status_code, r.json()["field"]) == (400, "query.expression")
    assert gw.receive(topic, group, wait=0) == []
    r = gw.stream(topic, group, expression="Other")
    assert (r.status_code, r.json()["field"]) == (409, "query.expression")


def test_a_stream_ends_when_the_gateway_stops(tmp_path):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path, http=True) as srv:
        srv.create_topic("SseStop", 1)
        client = Gateway(srv.http_url)
        stream = client.stream("SseStop", "SseStopG", heartbeat=8)  # a line each 8 s: under httpx's 10 s
        try:
            started = time.monotonic()
            srv.stop()
            assert stream.next(8) is None and stream.ended
            assert time.monotonic() - started < 4  # not after the heartbeat or uvicorn's graceful timeout
            assert "Traceback" not in srv.log, srv.log
        finally:
            stream.close()
            client.close()
