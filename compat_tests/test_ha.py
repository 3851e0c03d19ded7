"""Classic master/slave replication across implementations: a FerryMQ master with an Apache RocketMQ
5.5.0 slave, and an Apache master with a FerryMQ slave (issue 24, docs/ha.md).

Messages go through the official Java client to a SYNC_MASTER that waits for its slave's acknowledgement;
the proof is that every send is SEND_OK and both commit logs hold the same bytes at the same offsets.
With the Apache master stopped, a Java consumer reads everything
from the FerryMQ slave. Both pairs use Apache's commit-log segment size (64 MiB in
:class:`~compat_tests.apache.ApacheBroker`): a slave appends its master's bytes verbatim, segments included.
"""

from __future__ import annotations

import pytest
from ferrymq.testing import admin
from ferrymq.wire.codes import RequestCode, ResponseCode

from tests.ha.helpers import (
    BrokerProcess,
    commitlog_bytes,
    commitlog_range,
    send,
    wait_for,
)

from .apache import ApacheBroker, ApacheNamesrv

SEGMENT = 64 * 1024 * 1024
#: quick offset reports and heartbeats instead of Apache's 5 s
HA_TIMING = {"haSendHeartbeatInterval": 500, "mappedFileSizeCommitLog": SEGMENT}
#: the masters answer a send only once their slave acknowledged it (Apache 5.x: inSyncReplicas=2), so every
#: SEND_OK the Java client reports is an acknowledgement by the other implementation's slave
SYNC_MASTER = {"brokerRole": "SYNC_MASTER", "inSyncReplicas": 2, "slaveTimeout": 2000}
MESSAGES = 40


def same_commitlog(master_addr: str, master_dir, slave_addr: str, slave_dir) -> tuple[int, int]:
    """Wait until the slave's commit log ends where the master's does; then its bytes must be the master's."""
    def caught_up():
        mine, theirs = commitlog_range(master_addr), commitlog_range(slave_addr)
        return theirs if mine[1] > 0 and theirs[1] == mine[1] else None

    low, high = wait_for(caught_up, f"slave {slave_addr} caught up with master {master_addr}", timeout=30)
    assert commitlog_bytes(slave_dir, low, high) == commitlog_bytes(master_dir, low, high)
    return low, high


def slave_acks(master_addr: str, topic: str) -> None:
    """Wait until the master's slave is connected: a send is answered SUCCESS, not FLUSH_SLAVE_TIMEOUT."""
    wait_for(lambda: send(master_addr, topic, b"until the slave acknowledges").code == ResponseCode.SUCCESS,
             f"the slave of {master_addr} acknowledges sends", timeout=30)


def sent_ok(result) -> int:
    sent = result.check().of("sent")
    assert sent and {e["status"] for e in sent} == {"SEND_OK"}, result.explain()
    return len(sent)


@pytest.fixture(scope="module")
def apache_ns(java5, tmp_path_factory):
    """One Apache name server for both pairs (each pair is its own broker group); ``java5`` skips the
    module where Java or Maven is missing."""
    ns = ApacheNamesrv.start(tmp_path_factory.mktemp("ha-namesrv"))
    yield ns
    ns.stop()


@pytest.fixture(scope="module")
def ferry_master_apache_slave(apache_ns, tmp_path_factory):
    home = tmp_path_factory.mktemp("ha-ferry-master")
    master = BrokerProcess(home / "ferry-master", apache_ns.addr, {
        "brokerClusterName": "HaCluster", "brokerName": "ha-ferry-a", **HA_TIMING, **SYNC_MASTER}).start()
    try:
        slave = ApacheBroker.start(home / "apache-slave", apache_ns.addr, cluster="HaCluster", name="ha-ferry-a",
                                   extra={"brokerId": 1, "brokerRole": "SLAVE", **HA_TIMING})
    except BaseException:
        master.kill()
        raise
    yield master, slave
    slave.stop()
    master.kill()


def test_an_apache_slave_holds_the_ferrymq_masters_bytes(ferry_master_apache_slave, java5):
    master, slave = ferry_master_apache_slave
    slave_acks(master.addr, "HaFerryToApache")
    assert sent_ok(java5("send", "-n", master.namesrv_addr, "-t", "HaFerryToApache", "-count", str(MESSAGES))) \
        == MESSAGES
    _low, high = same_commitlog(master.addr, master.store / "commitlog", slave.addr, slave.store / "commitlog")
    assert high > 0


@pytest.fixture(scope="module")
def apache_master_ferry_slave(apache_ns, tmp_path_factory):
    home = tmp_path_factory.mktemp("ha-apache-master")
    master = ApacheBroker.start(home / "apache-master", apache_ns.addr, cluster="HaCluster", name="ha-apache-a",
                                extra={**HA_TIMING, **SYNC_MASTER})
    slave = BrokerProcess(home / "ferry-slave", apache_ns.addr, {
        "brokerClusterName": "HaCluster", "brokerName": "ha-apache-a", "brokerRole": "SLAVE", "brokerId": 1,
        "slaveReadEnable": True, **HA_TIMING})
    try:
        slave.start()
    except BaseException:
        master.stop()
        raise
    yield apache_ns, master, slave
    slave.kill()
    master.stop()


def test_a_ferrymq_slave_holds_the_apache_masters_bytes_and_serves_consumers_when_it_is_gone(
        apache_master_ferry_slave, java5):
    ns, master, slave = apache_master_ferry_slave
    topic = "HaApacheToFerry"
    slave_acks(master.addr, topic)
    assert sent_ok(java5("send", "-n", ns.addr, "-t", topic, "-count", str(MESSAGES))) == MESSAGES
    same_commitlog(master.addr, master.store / "commitlog", slave.addr, slave.store / "commitlog")
    # the slave copies the master's topic config (SlaveSynchronize) before the master goes
    wait_for(lambda: admin.call(slave.addr, request_topic(topic)).code == 0, "the slave knows the topic", timeout=15)
    master.stop()
    consumed = java5("consume", "-n", ns.addr, "-t", topic, "-g", "ha-slave-readers", "-count", str(MESSAGES + 1),
                     "-timeout", "40000").check()
    bodies = {e["body"] for e in consumed.of("received")}
    assert {f"hello from the Java client #{i}" for i in range(MESSAGES)} <= bodies


def request_topic(topic: str):
    from ferrymq.wire.command import request

    return request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
