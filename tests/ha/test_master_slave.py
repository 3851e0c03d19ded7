"""A FerryMQ master and a FerryMQ slave, each a real process on the loopback address."""

from __future__ import annotations

import pytest
from ferrymq.testing import FerryMQServer, admin
from ferrymq.testing.ports import free_port
from ferrymq.wire.bodies import HARuntimeInfo, KVTable, SubscriptionGroupConfig, TimerCheckpoint, TopicConfig
from ferrymq.wire.bodies import TimerMetricsWrapper
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request
from ferrymq.wire.headers import UpdateConsumerOffsetRequestHeader
from ferrymq.wire.message import decode_records
from ferrymq.wire.requests import encode_request_header

from .helpers import (
    BrokerProcess,
    commitlog_bytes,
    commitlog_range,
    pull,
    send,
    wait_for,
)

#: small segments, so that the stream crosses segment ends; quick heartbeats instead of sleeps
SEGMENT = 64 * 1024
FAST = {"haSendHeartbeatInterval": 200, "haHousekeepingInterval": 3000, "mappedFileSizeCommitLog": SEGMENT}


def start_pair(home, master_conf=None, slave_conf=None):
    port = free_port(also_free=(-2, 1))
    master = FerryMQServer(home / "master", {"listenPort": port, **FAST, **(master_conf or {})}).start()
    slave = BrokerProcess(home / "slave", master.namesrv_addr, {
        "brokerName": master.broker_name, "brokerClusterName": master.cluster, "brokerRole": "SLAVE",
        "brokerId": 1, **FAST, **(slave_conf or {})})
    try:
        slave.start()
    except BaseException:
        master.kill()
        raise
    return master, slave


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    master, slave = start_pair(tmp_path_factory.mktemp("ha"), slave_conf={"slaveReadEnable": True})
    yield master, slave
    slave.kill()
    master.kill()


def in_sync(master_addr: str, slave_addr: str) -> tuple[int, int] | None:
    """The slave's (min, max) once its max offset is the master's."""
    mine, theirs = commitlog_range(master_addr), commitlog_range(slave_addr)
    return theirs if theirs[1] == mine[1] and mine[1] > 0 else None


def test_the_slave_holds_the_masters_bytes_at_the_same_offsets_across_segments(pair):
    master, slave = pair
    for i in range(120):  # ~100 KiB: more than one 64 KiB segment
        assert send(master.broker_addr, "HaTopic", b"m%03d" % i + b"x" * 800, queue_id=i % 2).code == 0
    low, high = wait_for(lambda: in_sync(master.broker_addr, slave.addr), "slave caught up")
    assert high > SEGMENT
    assert commitlog_bytes(slave.store / "commitlog", low, high) == \
        commitlog_bytes(master.home / "store" / "commitlog", low, high)


def ha_status(addr: str) -> HARuntimeInfo:
    answer = admin.call(addr, request(RequestCode.GET_BROKER_HA_STATUS))
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    return HARuntimeInfo.decode(answer.body)


def runtime_info(addr: str) -> dict[str, str]:
    return KVTable.decode(admin.call(addr, request(RequestCode.GET_BROKER_RUNTIME_INFO)).body).table


def test_ha_status_and_runtime_info_show_the_slave_holding_everything_the_master_has(pair):
    master, slave = pair
    for i in range(4):
        assert send(master.broker_addr, "HaStatus", b"s%d" % i).code == 0
    _low, high = wait_for(lambda: in_sync(master.broker_addr, slave.addr), "slave caught up")
    mine = wait_for(lambda: (s := ha_status(master.broker_addr)).ha_connection_info[0].slave_ack_offset == high and s,
                    "the master saw the slave's report")
    assert (mine.master, mine.master_commit_log_max_offset, mine.in_sync_slave_nums) == (True, high, 1)
    (conn,) = mine.ha_connection_info
    assert (conn.diff, conn.in_sync, conn.transfer_from_where) == (0, True, high)
    assert conn.addr.startswith("127.0.0.1:")
    theirs = ha_status(slave.addr)
    client = theirs.ha_client_runtime_info
    assert (theirs.master, client.max_offset, client.master_flush_offset) == (False, high, 0)
    assert client.master_addr == f"127.0.0.1:{int(master.broker_addr.rsplit(':', 1)[1]) + 1}"
    assert client.last_read_timestamp > 0 and client.last_write_timestamp > 0
    # replicated messages count in the slave's put rate, not as sends to it (as on Apache's slave)
    assert runtime_info(slave.addr)["msgPutTotalTodayNow"] == "0"
    wait_for(lambda: runtime_info(slave.addr)["putTps"] != "0.00 0.00 0.00", "the slave's put rate shows", timeout=5)


def test_the_master_answers_what_an_apache_slave_syncs_of_the_timer_wheel(pair):
    master, _slave = pair
    answer = admin.call(master.broker_addr, request(RequestCode.GET_TIMER_CHECK_POINT))
    assert answer.code == ResponseCode.SUCCESS and len(answer.body) == 56
    checkpoint = TimerCheckpoint.decode(answer.body)
    assert checkpoint.last_timer_log_flush_pos == 0
    assert checkpoint.last_timer_queue_offset == checkpoint.master_timer_queue_offset >= 0
    answer = admin.call(master.broker_addr, request(RequestCode.GET_TIMER_METRICS))
    assert answer.code == ResponseCode.SUCCESS
    assert TimerMetricsWrapper.decode(answer.body).timing_count == {}


def test_the_slave_builds_its_consume_queues_and_answers_pulls_when_slave_read_is_on(pair):
    master, slave = pair
    for i in range(3):
        assert send(master.broker_addr, "HaPulled", b"p%d" % i).code == 0
    wait_for(lambda: in_sync(master.broker_addr, slave.addr), "slave caught up")
    answer = wait_for(lambda: (r := pull(slave.addr, "HaPulled", "ha-group")).code == ResponseCode.SUCCESS and r,
                      "a pull answered FOUND by the slave", timeout=5)
    assert [m.body for m in decode_records(answer.body)] == [b"p0", b"p1", b"p2"]


def test_a_slave_refuses_sends_as_apache_does(pair):
    _master, slave = pair
    answer = send(slave.addr, "HaTopic", b"to the slave")
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_BUSY,
                                            "[REJECTREQUEST]system busy, start flow control for a while")


def test_a_slave_without_slave_read_refuses_pulls_and_a_sync_master_waits_for_it(tmp_path):
    master, slave = start_pair(tmp_path, master_conf={"brokerRole": "SYNC_MASTER", "inSyncReplicas": 2,
                                                      "slaveTimeout": 1000})
    try:
        assert send(master.broker_addr, "HaSync", b"acked by the slave").code == ResponseCode.SUCCESS
        _low, high = commitlog_range(master.broker_addr)
        assert commitlog_range(slave.addr)[1] == high  # answered only once the slave held it
        answer = pull(slave.addr, "HaSync", "ha-group")
        assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_BUSY,
                                                "[REJECTREQUEST]system busy, start flow control for a while")
        slave.kill()
        answer = send(master.broker_addr, "HaSync", b"no slave to ack")
        assert answer.code == ResponseCode.FLUSH_SLAVE_TIMEOUT
        assert commitlog_range(master.broker_addr)[1] > high  # stored all the same
    finally:
        slave.kill()
        master.kill()


def test_the_slave_copies_topics_groups_and_consumer_offsets_from_its_master(pair):
    master, slave = pair
    master.create_topic("HaCreated", queues=3)
    master.create_group("ha-synced-group", retry_max_times=5)
    code = RequestCode.UPDATE_CONSUMER_OFFSET
    header = UpdateConsumerOffsetRequestHeader(consumer_group="ha-synced-group", topic="HaCreated", queue_id=1,
                                               commit_offset=42)
    assert admin.call(master.broker_addr, request(code, encode_request_header(code, header))).code == 0
    wait_for(lambda: admin.consumer_offset(slave.addr, "ha-synced-group", "HaCreated", 1) == 42,
             "the slave answers the master's consumer offset", timeout=10)
    topic = admin.call(slave.addr, request(RequestCode.GET_TOPIC_CONFIG, {"topic": "HaCreated"}))
    assert topic.code == 0 and TopicConfig.decode(topic.body).read_queue_nums == 3
    group = admin.call(slave.addr, request(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "ha-synced-group"}))
    assert group.code == 0 and SubscriptionGroupConfig.decode(group.body).retry_max_times == 5


def test_replication_resumes_after_the_master_restarts_and_the_slave_is_killed(tmp_path):
    master, slave = start_pair(tmp_path)
    try:
        def send_and_compare(first: int) -> None:
            for i in range(first, first + 5):
                assert send(master.broker_addr, "HaResume", b"r%d" % i + b"y" * 300).code == 0
            low, high = wait_for(lambda: in_sync(master.broker_addr, slave.addr), "slave caught up")
            assert commitlog_bytes(slave.store / "commitlog", low, high) == \
                commitlog_bytes(master.home / "store" / "commitlog", low, high)

        send_and_compare(0)
        master.restart()  # the slave reconnects to the same HA address
        send_and_compare(5)
        slave.kill()  # SIGKILL: the slave recovers its log and asks for what follows it
        slave.start()
        send_and_compare(10)
        answer = pull(master.broker_addr, "HaResume", "ha-group")
        assert len(decode_records(answer.body)) == 15
    finally:
        slave.kill()
        master.kill()
