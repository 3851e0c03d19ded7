"""BROADCASTING consumption over HTTP: every named client of a group gets every message, with offsets
kept by the gateway (they survive its restart); a nacked message is skipped; a group is consumed one way
at a time at a gateway."""

from __future__ import annotations

import time

import pytest

from .http_client import Gateway, names

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    levels = " ".join(["1s"] * 18)  # a clustering nack would come back within a second or two
    with FerryMQServer(tmp_path_factory.mktemp("bc"), {"messageDelayLevel": levels}, http=True) as srv:
        yield srv


def _names():
    return names("BcT", "BcG")


def _join(gw, topic, group, *clients):
    """Each client starts consuming (at the end of each queue, as a new broadcasting consumer does)."""
    for client in clients:
        assert gw.receive(topic, group, model="BROADCASTING", client=client, wait=0) == []


def test_every_client_of_a_broadcasting_group_gets_every_message(server, gw):
    topic, group = _names()
    server.create_topic(topic, 2)
    _join(gw, topic, group, "a", "b")
    sent = {gw.publish(topic, f"m{i}")["msgId"] for i in range(4)}
    for client in ("a", "b"):
        got = gw.receive_all(topic, group, 4, max=8, model="BROADCASTING", client=client)
        assert {m["msgId"] for m in got} == sent and len(got) == 4, client
        gw.ack(topic, group, got)
    for client in ("a", "b"):
        assert gw.receive(topic, group, model="BROADCASTING", client=client, wait=1) == []


def test_a_stream_is_a_broadcasting_client_too(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    stream = gw.stream(topic, group, model="BROADCASTING", client="s", heartbeat=1)
    try:
        _join(gw, topic, group, "p")
        sent = gw.publish(topic, "to all")
        [streamed] = [stream.next(20)]
        [polled] = gw.receive_all(topic, group, 1, model="BROADCASTING", client="p")
        assert streamed["msgId"] == polled["msgId"] == sent["msgId"]
        assert streamed["receiptHandle"] != polled["receiptHandle"]
        gw.ack(topic, group, [streamed, polled])
    finally:
        stream.close()


def test_a_nacked_broadcast_message_is_skipped(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    _join(gw, topic, group, "n")
    gw.publish(topic, "unwanted")
    [msg] = gw.receive_all(topic, group, 1, model="BROADCASTING", client="n")
    assert gw.settle("nack", topic, group, [msg["receiptHandle"]]).json() == {"settled": 1}
    assert gw.receive(topic, group, model="BROADCASTING", client="n", wait=4) == []


def test_a_group_is_consumed_one_way_at_a_time(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    _join(gw, topic, group, "c")
    r = gw.request("GET", f"/v1/topics/{topic}/messages", params={"group": group, "wait": 0})
    assert (r.status_code, r.json()["field"]) == (409, "query.model"), r.text
    r = gw.request("GET", f"/v1/topics/{topic}/messages", params={"group": group, "model": "BROADCASTING",
                                                                  "wait": 0})
    assert (r.status_code, r.json()["field"]) == (400, "query.client"), r.text
    other = group + "_clustering"
    assert gw.receive(topic, other, wait=0) == []
    r = gw.request("GET", f"/v1/topics/{topic}/messages", params={"group": other, "model": "BROADCASTING",
                                                                  "client": "c", "wait": 0})
    assert (r.status_code, r.json()["field"]) == (409, "query.model"), r.text
    r = gw.request("GET", f"/v1/topics/{topic}/messages", params={"group": other, "client": "c", "wait": 0})
    assert (r.status_code, r.json()["field"]) == (400, "query.client"), r.text


def test_broadcast_offsets_are_kept_by_the_gateway_across_its_restart(tmp_path):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path, http=True) as srv:
        srv.create_topic("BcDurable", 1)
        client = Gateway(srv.http_url)
        _join(client, "BcDurable", "BcDurableG", "r")
        client.publish("BcDurable", "before")
        got = client.receive_all("BcDurable", "BcDurableG", 1, model="BROADCASTING", client="r")
        client.ack("BcDurable", "BcDurableG", got)
        time.sleep(0.5)
        srv.restart()
        client.publish("BcDurable", "while away")
        again = client.receive_all("BcDurable", "BcDurableG", 1, model="BROADCASTING", client="r")
        assert [m["body"] for m in again] == ["while away"]
        client.ack("BcDurable", "BcDurableG", again)
        assert client.receive("BcDurable", "BcDurableG", model="BROADCASTING", client="r", wait=1) == []
        assert list((tmp_path).rglob("offsets.json")), "no local offset file under the server's home"
        client.close()


def test_a_refused_request_does_not_claim_the_group_for_its_model(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    r = gw.request("GET", f"/v1/topics/{topic}/messages", params={
        "group": group, "model": "BROADCASTING", "client": "z", "type": "SQL92", "expression": "a >>> 1", "wait": 0})
    assert (r.status_code, r.json()["field"]) == (400, "query.expression"), r.text
    assert gw.receive(topic, group, wait=0) == []  # CLUSTERING, as the group's only consumer here
