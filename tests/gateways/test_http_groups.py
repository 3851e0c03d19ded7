"""GET /v1/groups and /v1/groups/{group}: the groups the brokers know with their lag, per queue as
mqadmin consumerProgress computes it (broker max offset - committed offset)."""

from __future__ import annotations

import time

import pytest

from .http_client import names

from ferrymq.testing import admin


pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path_factory.mktemp("groups"), http=True) as srv:
        yield srv


def _names():
    return names("GrpT", "GrpG")


def test_a_groups_lag_is_what_it_has_not_acked(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    for i in range(5):
        gw.publish(topic, f"g{i}")
    got = sorted(gw.receive_all(topic, group, 5, max=8), key=lambda m: m["queueOffset"])
    gw.ack(topic, group, got[:2])
    deadline = time.monotonic() + 15  # the consumer commits on its next pull or offset persist
    while admin.consumer_offset(server.broker_addr, group, topic, 0) != 2:
        assert time.monotonic() < deadline
        time.sleep(0.2)
    progress = gw.request("GET", f"/v1/groups/{group}").json()
    [queue] = [q for q in progress["queues"] if q["topic"] == topic]
    assert (queue["queueId"], queue["brokerOffset"], queue["consumerOffset"], queue["lag"]) == (0, 5, 2, 3)
    assert progress["group"] == group and progress["lag"] == sum(q["lag"] for q in progress["queues"]) == 3
    listed = {g["group"]: g for g in gw.request("GET", "/v1/groups").json()["groups"]}
    assert listed[group]["lag"] == 3
    gw.ack(topic, group, got[2:])
    while gw.request("GET", f"/v1/groups/{group}").json()["lag"] != 0:
        assert time.monotonic() < deadline + 15
        time.sleep(0.3)


def test_a_broadcasting_group_has_no_lag_at_the_brokers(server, gw):
    topic, group = _names()
    server.create_topic(topic, 1)
    assert gw.receive(topic, group, model="BROADCASTING", client="x", wait=0) == []
    progress = gw.request("GET", f"/v1/groups/{group}").json()
    assert (progress["lag"], progress["queues"]) == (None, [])
    listed = {g["group"]: g for g in gw.request("GET", "/v1/groups").json()["groups"]}
    assert listed[group]["lag"] is None


def test_unknown_and_bad_group_names_are_refused(gw):
    r = gw.request("GET", "/v1/groups/NoSuchGroup_x")
    assert (r.status_code, r.json()["field"]) == (404, "path.group"), r.text
    r = gw.request("GET", "/v1/groups/bad name")
    assert (r.status_code, r.json()["field"]) == (400, "path.group"), r.text
    r = gw.request("GET", "/v1/groups", params={"page": 2})
    assert (r.status_code, r.json()["field"]) == (400, "query.page"), r.text
