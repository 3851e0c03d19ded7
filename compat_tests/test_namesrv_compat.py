"""Issue 2 compat: official mqadmin (5.x and 4.9.x) and the official Go client against a name server.

Each test registers a broker THROUGH THE PROTOCOL (REGISTER_BROKER with a RegisterBrokerBody, sent by
``socket_client`` over a plain socket, as a Java broker would), then asks the official tools about it.
The same tests run against Apache's name server, which proves the expectations, and FerryMQ's.

The registered broker address is a fake broker endpoint: ``mqadmin clusterList`` calls
GET_BROKER_RUNTIME_INFO (28) on every broker address it lists, and the row it prints comes from that
answer (version, TPS, disk). Against an address where nothing listens, 5.x prints the row with
version/TPS columns it could not fill, so a fake that answers with known values makes the check exact.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request

from . import mqadmin_output
from .socket_client import Connection, FakeBroker, TopicSpec, register_broker_request


@dataclass
class Registered:
    cluster: str
    broker_name: str
    broker: FakeBroker
    topic: TopicSpec
    namesrv_addr: str


@pytest.fixture
def registered(namesrv):
    """A broker registered (and kept registered: the connection stays open) with ``namesrv``."""
    tag = uuid.uuid4().hex[:8]
    fake = FakeBroker(version_desc="V5_5_0").start()
    topic = TopicSpec(f"CompatTopic_{tag}", read_queue_nums=4, write_queue_nums=3, perm=6)
    # A first registration must carry more than one topic: Apache's name server takes a one-topic
    # wrapper from an unknown broker for a single-topic update and refuses it (code 1).
    other = TopicSpec(f"CompatOther_{tag}", read_queue_nums=2, write_queue_nums=2, perm=6)
    reg = Registered(f"CompatCluster_{tag}", f"compat-broker-{tag}", fake, topic, namesrv.addr)
    conn = Connection(namesrv.addr)
    try:
        reply = conn.call(register_broker_request(reg.cluster, reg.broker_name, fake.addr, [topic, other]))
        assert reply.code == ResponseCode.SUCCESS, f"REGISTER_BROKER answered {reply.code}: {reply.remark}"
        yield reg
    finally:
        conn.close()
        fake.stop()


def test_register_broker_then_route_over_the_wire(registered):
    """The route the name server builds from the registration, read back with GET_ROUTEINFO_BY_TOPIC."""
    from .mqadmin_output import fastjson_pretty
    from .socket_client import call

    reply = call(registered.namesrv_addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": registered.topic.name}))
    assert reply.code == ResponseCode.SUCCESS, reply.remark
    route = fastjson_pretty(reply.body.decode())
    assert route["brokerDatas"] == [
        {
            "brokerAddrs": {"0": registered.broker.addr},
            "brokerName": registered.broker_name,
            "cluster": registered.cluster,
            **({"enableActingMaster": False} if "enableActingMaster" in route["brokerDatas"][0] else {}),
        }
    ]
    (queue,) = route["queueDatas"]
    assert (queue["brokerName"], queue["readQueueNums"], queue["writeQueueNums"], queue["perm"]) == (
        registered.broker_name, 4, 3, 6)

    missing = call(registered.namesrv_addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "NoSuchTopic_" + registered.cluster}))
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST


def test_mqadmin_cluster_list(registered, mqadmin):
    out = mqadmin(registered.namesrv_addr, "clusterList")
    rows = [r for r in mqadmin_output.cluster_list(out) if r.cluster == registered.cluster]
    assert len(rows) == 1, f"clusterList shows no row for {registered.cluster}:\n{out}"
    row = rows[0]
    assert (row.broker_name, row.broker_id, row.addr, row.version) == (
        registered.broker_name, 0, registered.broker.addr, "V5_5_0"), out
    assert RequestCode.GET_BROKER_RUNTIME_INFO in registered.broker.seen


def test_mqadmin_topic_list(registered, mqadmin):
    out = mqadmin(registered.namesrv_addr, "topicList")
    topics = mqadmin_output.topic_list(out)
    assert registered.topic.name in topics, out


def test_mqadmin_topic_route(registered, mqadmin):
    out = mqadmin(registered.namesrv_addr, "topicRoute", "-t", registered.topic.name)
    route = mqadmin_output.fastjson_pretty(out)
    (broker,) = route["brokerDatas"]
    assert broker["brokerName"] == registered.broker_name
    assert broker["cluster"] == registered.cluster
    assert broker["brokerAddrs"] == {"0": registered.broker.addr}
    (queue,) = route["queueDatas"]
    assert queue["brokerName"] == registered.broker_name
    assert (queue["readQueueNums"], queue["writeQueueNums"], queue["perm"]) == (4, 3, 6)


def test_go_client_fetches_route(registered, go_harness):
    result = go_harness("route", "-n", registered.namesrv_addr, "-t", registered.topic.name).check()
    event = result.one("route")
    route = event["route"]
    (broker,) = route["brokerDatas"]
    # brokerAddrs is split by hand in the Go client: a stray space or quote would show up here.
    assert broker["brokerAddrs"] == {"0": registered.broker.addr}
    assert (broker["brokerName"], broker["cluster"]) == (registered.broker_name, registered.cluster)
    (queue,) = route["queueDatas"]
    assert (queue["readQueueNums"], queue["writeQueueNums"], queue["perm"]) == (4, 3, 6)
    # A producer writes to the write queues of brokers that have a master address.
    queues = sorted((q["brokerName"], q["queueId"]) for q in event["publishQueues"])
    assert queues == [(registered.broker_name, i) for i in range(3)]


def test_go_client_unknown_topic(namesrv, go_harness):
    result = go_harness("route", "-n", namesrv.addr, "-t", "NoSuchTopic_" + uuid.uuid4().hex[:8])
    assert result.returncode == 1, result.explain()
    assert "topic not exist" in result.one("error")["error"], result.explain()


@pytest.mark.parametrize("namesrv", ["apache"], indirect=True)
@pytest.mark.parametrize("java_clients", ["5.5.0"], indirect=True, ids=["java-5.5.0"])
def test_quick_mqadmin_prints_what_mqadmin_prints(registered, mqadmin):
    """The harness's QuickMqAdmin (which skips the client's idle shutdown wait) changes nothing visible."""
    from dataclasses import replace

    plain = replace(mqadmin, quick=False)
    quick_out, plain_out = mqadmin(registered.namesrv_addr, "clusterList"), plain(registered.namesrv_addr, "clusterList")
    # Compare all but the #Hour column (the broker's uptime, which moves between the two runs).
    quick_rows, plain_rows = ([(r.cluster, r.broker_name, r.broker_id, r.addr, r.version, r.rest[:-3])
                               for r in mqadmin_output.cluster_list(o)] for o in (quick_out, plain_out))
    assert quick_rows and quick_rows == plain_rows
    assert quick_out.splitlines()[0] == plain_out.splitlines()[0]  # the header line
