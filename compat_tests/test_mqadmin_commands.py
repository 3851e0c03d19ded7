"""Issue 4: the official ``mqadmin`` against Apache RocketMQ and FerryMQ, each command's output checked for
what a user reads in it. Every command runs with rocketmq-tools 5.5.0 and 4.9.8 (users run both).

One combination cannot run: 4.9.8's ``clusterList`` against Apache 5.5.0. It reads the broker's runtime
info key ``getTransferedTps``, which 5.x brokers no longer report, and throws; that test asserts exactly
this failure on Apache (FerryMQ reports the key, so 4.9.8's clusterList works there).
"""

from __future__ import annotations

import re
import time
import uuid

import pytest

from . import mqadmin_output, toolchain
from .conftest import mqadmin_of
from .harness import ClientRunFailed, MqAdmin
from .test_official_clients import fresh


@pytest.fixture(scope="module", params=toolchain.CLIENT_VERSIONS, ids=lambda v: f"mqadmin-{v}")
def mqadmin_cli(request, compat_home) -> MqAdmin:
    """mqadmin of rocketmq-tools 5.5.0, then 4.9.8."""
    return mqadmin_of(request.param, compat_home)


@pytest.fixture(scope="module")
def created_topic(server, mqadmin_cli):
    """A topic created by `mqadmin updateTopic` with 3 read / 3 write queues; (name, mqadmin's output)."""
    topic = f"CompatAdmin_{uuid.uuid4().hex[:10]}"
    out = mqadmin_cli(server.namesrv_addr, "updateTopic", "-b", server.broker_addr, "-t", topic,
                      "-r", "3", "-w", "3")
    return topic, out


@pytest.fixture(scope="module")
def live_clients(server, java5):
    """A Java 5.x push consumer and producer that stay connected while the connection commands run."""
    topic, group = fresh("Live")
    ns = server.namesrv_addr
    producer = java5.spawn("send", "-n", ns, "-t", topic, "-count", "3", "-group", f"{group}_producer",
                           "-body", "live", "-linger", "120000")
    consumer = None
    try:
        producer.wait_for("lingering")
        consumer = java5.spawn("consume", "-n", ns, "-t", topic, "-g", group, "-count", "3", "-linger", "120000",
                               "-persist", "true", "-timeout", "60000")
        consumer.wait_for("started", 60)
        end = time.monotonic() + 60
        while len(consumer.result().of("received")) < 3 and time.monotonic() < end:
            time.sleep(0.2)
        yield {"topic": topic, "group": group, "producer_group": f"{group}_producer"}
    finally:
        producer.kill()
        if consumer is not None:
            consumer.kill()


def test_update_topic(server, created_topic):
    """updateTopic reports success for the broker and echoes the topic config it created."""
    topic, out = created_topic
    assert f"create topic to {server.broker_addr} success" in out, out
    assert re.search(rf"topicName='?{topic}'?", out) and "readQueueNums=3" in out and "writeQueueNums=3" in out, out


def test_topic_list(server, mqadmin_cli, created_topic):
    """topicList lists the created topic."""
    topic, _ = created_topic
    assert topic in mqadmin_output.topic_list(mqadmin_cli(server.namesrv_addr, "topicList"))


def test_topic_route(server, mqadmin_cli, created_topic):
    """topicRoute shows one broker with the master address and 3/3 queues."""
    topic, _ = created_topic
    route = mqadmin_output.fastjson_pretty(mqadmin_cli(server.namesrv_addr, "topicRoute", "-t", topic))
    (broker,) = route["brokerDatas"]
    assert broker["brokerName"] == server.broker_name and broker["brokerAddrs"] == {"0": server.broker_addr}
    (queues,) = route["queueDatas"]
    assert (queues["readQueueNums"], queues["writeQueueNums"], queues["brokerName"]) == (3, 3, server.broker_name)


def test_topic_status(server, mqadmin_cli, created_topic, java5):
    """topicStatus has one row per queue (0, 1, 2) of the broker, and the max offsets add up to the
    messages sent."""
    topic, _ = created_topic
    java5("send", "-n", server.namesrv_addr, "-t", topic, "-count", "4").check()
    out = mqadmin_cli(server.namesrv_addr, "topicStatus", "-t", topic)
    rows = [line.split() for line in out.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    rows = [r for r in rows if len(r) >= 4 and r[0] == server.broker_name]
    assert sorted(int(r[1]) for r in rows) == [0, 1, 2], out
    assert sum(int(r[3]) for r in rows) == 4, out
    assert all(int(r[2]) == 0 for r in rows), out


def test_delete_topic(server, mqadmin_cli):
    """deleteTopic reports success for the cluster and the topic leaves topicList."""
    topic = f"CompatDel_{uuid.uuid4().hex[:10]}"
    ns = server.namesrv_addr
    mqadmin_cli(ns, "updateTopic", "-b", server.broker_addr, "-t", topic)
    assert topic in mqadmin_output.topic_list(mqadmin_cli(ns, "topicList"))
    out = mqadmin_cli(ns, "deleteTopic", "-c", server.cluster, "-t", topic)
    assert f"delete topic [{topic}] from cluster [{server.cluster}] success" in out, out
    assert topic not in mqadmin_output.topic_list(mqadmin_cli(ns, "topicList"))


def test_cluster_list(server, mqadmin_cli):
    """clusterList shows the broker: cluster, name, id 0, address and version V5_5_0 (4.9.8's clusterList
    fails on Apache 5.5.0, whose runtime info lacks getTransferedTps; checked as such)."""
    if server.kind == "apache" and mqadmin_cli.version == toolchain.ROCKETMQ_4:
        with pytest.raises(ClientRunFailed, match="getTransferedTps"):
            mqadmin_cli(server.namesrv_addr, "clusterList")
        return
    rows = mqadmin_output.cluster_list(mqadmin_cli(server.namesrv_addr, "clusterList"))
    assert [(r.cluster, r.broker_name, r.broker_id, r.addr) for r in rows] == \
        [(server.cluster, server.broker_name, 0, server.broker_addr)]
    assert rows[0].version == "V5_5_0"


def _key_values(out: str, sep: str) -> dict[str, str]:
    pairs = {}
    for line in out.splitlines():
        if sep in line:
            k, _, v = line.partition(sep)
            pairs[k.strip()] = v.strip()
    return pairs


def test_broker_status(server, mqadmin_cli):
    """brokerStatus prints the broker's runtime info as `key : value` lines: version, boot time,
    commit-log offsets and put statistics."""
    stats = _key_values(mqadmin_cli(server.namesrv_addr, "brokerStatus", "-b", server.broker_addr), " : ")
    assert stats.get("brokerVersionDesc") == "V5_5_0", stats
    for key in ("bootTimestamp", "commitLogMaxOffset", "msgPutTotalTodayNow", "putTps", "getTotalTps"):
        assert key in stats, f"brokerStatus lacks {key}: {sorted(stats)}"
    assert int(stats["bootTimestamp"]) > 1_600_000_000_000


def test_get_broker_config(server, mqadmin_cli):
    """getBrokerConfig prints `key = value` lines with the broker's configured name, cluster and the
    features the suite switched on."""
    conf = _key_values(mqadmin_cli(server.namesrv_addr, "getBrokerConfig", "-b", server.broker_addr), " = ")
    assert conf.get("brokerName") == server.broker_name, conf
    assert conf.get("brokerClusterName") == server.cluster
    assert conf.get("enablePropertyFilter") == "true"
    assert conf.get("transactionCheckMax") == "2"


def test_update_broker_config(server, mqadmin_cli):
    """updateBrokerConfig reports success and getBrokerConfig then shows the new value."""
    ns = server.namesrv_addr
    out = mqadmin_cli(ns, "updateBrokerConfig", "-b", server.broker_addr, "-k", "flushConsumerOffsetInterval",
                   "-v", "4000")
    assert f"update broker config success, {server.broker_addr}" in out, out
    conf = _key_values(mqadmin_cli(ns, "getBrokerConfig", "-b", server.broker_addr), " = ")
    assert conf.get("flushConsumerOffsetInterval") == "4000", conf


def test_update_sub_group(server, mqadmin_cli):
    """updateSubGroup reports success and echoes the subscription group config it created."""
    group = f"compat_sub_{uuid.uuid4().hex[:10]}"
    out = mqadmin_cli(server.namesrv_addr, "updateSubGroup", "-b", server.broker_addr, "-g", group)
    assert f"create subscription group to {server.broker_addr} success" in out, out
    assert re.search(rf"groupName='?{group}'?", out), out


def test_delete_sub_group(server, mqadmin_cli):
    """deleteSubGroup of an existing group reports success for the broker."""
    group = f"compat_sub_{uuid.uuid4().hex[:10]}"
    ns = server.namesrv_addr
    mqadmin_cli(ns, "updateSubGroup", "-b", server.broker_addr, "-g", group)
    out = mqadmin_cli(ns, "deleteSubGroup", "-b", server.broker_addr, "-g", group)
    assert f"delete subscription group [{group}] from broker [{server.broker_addr}] success" in out, out


def test_consumer_progress(server, mqadmin_cli, live_clients):
    """consumerProgress of a live group that consumed everything: rows for its topic with broker offset
    = consumer offset, and a total diff of 0 (polled: the live consumer sends its offsets every 200 ms
    once it has its messages, where the Java client alone would first persist them 10 s after start; until
    then the broker holds no offset of the group, which 4.9.8 reports as an error, "offset table is
    empty", and 5.5.0 as an empty table)."""
    deadline = time.monotonic() + 30
    while True:
        try:
            out = mqadmin_cli(server.namesrv_addr, "consumerProgress", "-g", live_clients["group"])
        except ClientRunFailed as exc:
            if "offset table is empty" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(1)
            continue
        rows = [line.split() for line in out.splitlines() if line.startswith(live_clients["topic"])]
        if (rows and all(r[3] == r[4] for r in rows)) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert rows, out
    assert all(r[1] == server.broker_name for r in rows), out
    assert sum(int(r[3]) for r in rows) == 3 and all(r[3] == r[4] for r in rows), out
    assert re.search(r"Diff Total:\s*0\b", out), out


def test_consumer_connection(server, mqadmin_cli, live_clients):
    """consumerConnection lists the live Java consumer (language JAVA, version V5_5_0) and its
    subscription of the topic."""
    out = mqadmin_cli(server.namesrv_addr, "consumerConnection", "-g", live_clients["group"])
    assert re.search(r"\bJAVA\s+V5_5_0\b", out), out
    assert re.search(rf"^\S*\s*{re.escape(live_clients['topic'])}\s+\*", out, re.M), out
    assert "CONSUME_PASSIVELY" in out and "CLUSTERING" in out, out


def test_producer_connection(server, mqadmin_cli, live_clients):
    """producerConnection lists the live Java producer of the group (language JAVA, version V5_5_0)."""
    try:
        out = mqadmin_cli(server.namesrv_addr, "producerConnection", "-g", live_clients["producer_group"],
                       "-t", live_clients["topic"])
    except ClientRunFailed as exc:
        raise AssertionError(f"producerConnection failed: {exc}") from None
    assert re.search(r"\bJAVA\s+V5_5_0\b", out), out
    assert "compat-producer-" in out, out
