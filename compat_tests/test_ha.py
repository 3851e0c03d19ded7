"""Classic master/slave replication across implementations: a FerryMQ master with an Apache RocketMQ
5.5.0 slave, and an Apache master with a FerryMQ slave (issue 24, docs/ha.md).

Messages go through the official Java client to a SYNC_MASTER that waits for its slave's acknowledgement;
the proof is that every send is SEND_OK and both commit logs hold the same bytes at the same offsets.
With the Apache master stopped, a Java consumer reads everything
from the FerryMQ slave. Both pairs use Apache's commit-log segment size (64 MiB in
:class:`~compat_tests.apache.ApacheBroker`): a slave appends its master's bytes verbatim, segments included.
"""

from __future__ import annotations

import time

import pytest
from ferrymq.testing import admin
from ferrymq.wire.bodies import HARuntimeInfo
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request

from tests.ha.helpers import (
    BrokerProcess,
    commitlog_bytes,
    commitlog_range,
    send,
    wait_for,
)

from .apache import ApacheBroker, ApacheNamesrv
from .mqadmin_output import broker_status, ha_status

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


def master_saw_its_slave_catch_up(master_addr: str) -> int:
    """Wait until the master's one slave acknowledged the master's whole commit log; its max offset."""
    def acked():
        answer = admin.call(master_addr, request(RequestCode.GET_BROKER_HA_STATUS))
        info = HARuntimeInfo.decode(answer.body) if answer.code == ResponseCode.SUCCESS else None
        conns = info.ha_connection_info if info else []
        return info.master_commit_log_max_offset if len(conns) == 1 and conns[0].diff == 0 else None

    return wait_for(acked, f"the slave of {master_addr} acknowledged everything", timeout=30)


def ha_port(addr: str) -> int:
    """The HA port of a broker at ``addr`` (listenPort + 1, both brokers' default)."""
    return int(addr.rsplit(":", 1)[1]) + 1


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


def test_mqadmin_ha_status_and_broker_status_read_the_same_from_apache_and_ferrymq(
        ferry_master_apache_slave, apache_master_ferry_slave, mqadmin5):
    """``mqadmin haStatus`` and ``brokerStatus`` on both pairs at rest: the Apache master and the Apache slave
    show what the FerryMQ master and the FerryMQ slave must show, field by field where it is deterministic
    (the transfer speed and the last read/write times are not)."""
    ferry_master, apache_slave = ferry_master_apache_slave
    ns, apache_master, ferry_slave = apache_master_ferry_slave
    pairs = {"apache": (apache_master, ferry_slave), "ferrymq": (ferry_master, apache_slave)}
    for name, (master, _slave) in pairs.items():
        slave_acks(master.addr, f"HaStatus{name}")
    ends = {name: master_saw_its_slave_catch_up(master.addr) for name, (master, _slave) in pairs.items()}

    # Apache's slave asks its master for the timer checkpoint every 3 s from 10 s after its start
    # (GET_TIMER_CHECK_POINT, 60): it must have asked the FerryMQ master, and been answered
    launched = (apache_slave.home / "broker.conf").stat().st_mtime
    time.sleep(max(0.0, launched + 14 - time.time()))
    logs = "".join(p.read_text(errors="replace") for p in (apache_slave.home / "logs").rglob("*.log"))
    assert "syncTimerCheckPoint Exception" not in logs and "SyncTimerMetrics Exception" not in logs

    masters = {b.fields["MasterAddr"]: b for b in ha_status(mqadmin5(ns.addr, "haStatus", "-c", "HaCluster"))}
    status = broker_status(mqadmin5(ns.addr, "brokerStatus", "-c", "HaCluster"))
    for name in ("apache", "ferrymq"):  # the reference first
        master, slave = pairs[name]
        end = ends[name]
        block = masters[master.addr]
        assert {k: block.fields[k] for k in ("MasterCommitLogMaxOffset", "SlaveNum", "InSyncSlaveNum")} == \
            {"MasterCommitLogMaxOffset": str(end), "SlaveNum": "1", "InSyncSlaveNum": "1"}, (name, block)
        (row,) = block.slaves
        assert (row.ack_offset, row.diff, row.status, row.transfer_from) == (end, 0, "OK", end), (name, row)
        assert row.addr.rsplit(":", 1)[1].isdigit(), (name, row)
        assert row.kib_per_s >= 0

        (mine,) = ha_status(mqadmin5(ns.addr, "haStatus", "-b", slave.addr))
        assert {k: mine.fields[k] for k in ("CommitLogMaxOffset", "MasterFlushOffset")} == \
            {"CommitLogMaxOffset": str(end), "MasterFlushOffset": "0"}, (name, mine)
        # the master's brokerIP2 (Apache's default: the host's address, FerryMQ's: brokerIP1) and haListenPort
        assert mine.fields["MasterAddr"].endswith(f":{ha_port(master.addr)}"), (name, mine)
        assert {"TransferSpeed(KB/s)", "LastReadTime", "LastWriteTime"} <= set(mine.fields), (name, mine)

        # a slave holds the master's commit log; replicated messages are no sends to it
        theirs, ours = status[master.addr], status[slave.addr]
        assert ours["commitLogMaxOffset"] == theirs["commitLogMaxOffset"] == str(end), name
        assert ours["msgPutTotalTodayNow"] == "0" and int(theirs["msgPutTotalTodayNow"]) > 0, name


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
    return request(RequestCode.GET_TOPIC_CONFIG, {"topic": topic})
