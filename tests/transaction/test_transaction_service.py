"""Half messages: commit delivers, rollback discards, undecided ones are checked back, then parked."""

from __future__ import annotations

import pytest
from twisted.internet import task

from ferrymq.server.broker.offsets import ConsumerOffsetManager
from ferrymq.server.broker.store_adapter import StoreAdapter
from ferrymq.server.store import MessageStore, MessageStoreConfig
from ferrymq.server.transaction.service import COMMIT, ROLLBACK, TransactionConfig, TransactionalMessageService, prepare_half
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.message import MessageConst, MessageSysFlag, decode_record
from ferrymq.wire.topics import TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC


class Clock:
    def __init__(self):
        self.now = 1_700_000_000.0

    def __call__(self):
        return self.now


@pytest.fixture
def env(tmp_path, monkeypatch):
    clock = Clock()
    monkeypatch.setattr("ferrymq.server.store.message_store.time.time", clock)
    store = MessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=256 * 1024))
    store.start()
    checks = []
    offsets = ConsumerOffsetManager()

    def send_check(group, ext, body):
        checks.append((group, ext, body))
        return True

    service = TransactionalMessageService(StoreAdapter(store, task.Clock()), offsets, send_check, TransactionConfig(transactionCheckMax=2), clock=clock)
    yield store, service, checks, clock
    store.shutdown()


def send_half(store, clock, body=b"order-1", uniq="UNIQ0001"):
    props = {MessageConst.TRANSACTION_PREPARED: "true", MessageConst.PRODUCER_GROUP: "pg", MessageConst.UNIQ_KEY: uniq}
    topic, queue, sys_flag = prepare_half("Orders", 2, props, MessageSysFlag.TRANSACTION_PREPARED_TYPE)
    result = store.put_message(topic, queue, body, props, sys_flag=sys_flag, born_timestamp=int(clock() * 1000))
    assert result.ok
    return result


def delivered(store, topic="Orders", queue=2):
    got = store.get_message("g", topic, queue, 0, 32)
    return [decode_record(v)[0] for v in got.messages]


def test_half_message_is_invisible_until_commit(env):
    store, service, _, clock = env
    half = send_half(store, clock)
    assert delivered(store) == []
    assert store.get_max_offset(TRANS_HALF_TOPIC, 0) == 1
    result = service.end_transaction("pg", half.queue_offset, half.commitlog_offset, COMMIT)
    assert result.code == ResponseCode.SUCCESS
    (msg,) = delivered(store)
    assert msg.body == b"order-1" and msg.uniq_key == "UNIQ0001"
    assert msg.sys_flag & MessageSysFlag.TRANSACTION_MASK == COMMIT
    assert msg.prepared_transaction_offset == half.commitlog_offset
    assert msg.properties[MessageConst.TRANSACTION_ID] == "UNIQ0001"
    # the half's own topic and queue are not the committed message's properties (as Apache's broker)
    assert MessageConst.REAL_TOPIC not in msg.properties and MessageConst.REAL_QUEUE_ID not in msg.properties
    # a repeated commit does not deliver twice
    service.end_transaction("pg", half.queue_offset, half.commitlog_offset, COMMIT)
    assert len(delivered(store)) == 1


def test_rollback_discards_and_validation_errors(env):
    store, service, checks, clock = env
    half = send_half(store, clock)
    assert service.end_transaction("other", half.queue_offset, half.commitlog_offset, COMMIT).remark == "The producer group wrong"
    assert service.end_transaction("pg", 99, half.commitlog_offset, COMMIT).remark == "The transaction state table offset wrong"
    assert service.end_transaction("pg", 0, 123456, COMMIT).remark == "Find prepared transaction message failed"
    assert service.end_transaction("pg", half.queue_offset, half.commitlog_offset, 0).code == ResponseCode.SUCCESS
    assert service.end_transaction("pg", half.queue_offset, half.commitlog_offset, ROLLBACK).code == ResponseCode.SUCCESS
    assert delivered(store) == []
    clock.now += 60
    assert service.check() == 0 and checks == []  # decided: never checked


def test_undecided_is_checked_then_commit_on_check_delivers(env):
    store, service, checks, clock = env
    send_half(store, clock)
    assert service.check() == 0  # younger than transactionTimeOut (6 s)
    clock.now += 7
    assert service.check() == 1
    group, ext, body = checks[0]
    assert group == "pg" and ext["msgId"] == "UNIQ0001" and ext["tranStateTableOffset"] == "1"
    checked, _ = decode_record(body)
    assert checked.topic == "Orders" and checked.queue_id == 2 and checked.body == b"order-1"
    result = service.end_transaction("pg", int(ext["tranStateTableOffset"]), int(ext["commitLogOffset"]), COMMIT, True)
    assert result.code == ResponseCode.SUCCESS
    assert [m.body for m in delivered(store)] == [b"order-1"]
    clock.now += 60
    assert service.check() == 0


def test_never_answered_is_parked_after_the_maximum_checks(env):
    store, service, checks, clock = env
    send_half(store, clock)
    for _ in range(4):
        clock.now += 7
        service.check()
    assert len(checks) == 2  # transactionCheckMax = 2
    assert store.get_max_offset(TRANS_CHECK_MAX_TIME_TOPIC, 0) == 1
    assert delivered(store) == []


def test_decisions_survive_a_restart(env, tmp_path):
    store, service, checks, clock = env
    half = send_half(store, clock)
    service.end_transaction("pg", half.queue_offset, half.commitlog_offset, ROLLBACK)
    fresh = TransactionalMessageService(StoreAdapter(store, task.Clock()), ConsumerOffsetManager(), lambda *a: checks.append(a) or True, clock=clock)
    clock.now += 60
    assert fresh.check() == 0 and checks == []  # the op record says it is decided
