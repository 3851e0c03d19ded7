"""Delay levels: parking in SCHEDULE_TOPIC_XXXX, delivery when due (not before), restart safety."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from ferrymq.server.schedule.delay import ScheduleMessageService, park_delayed
from ferrymq.server.broker.store_adapter import StoreAdapter
from ferrymq.server.store import MessageStore, MessageStoreConfig
from ferrymq.wire.message import MessageConst, MessageSysFlag, decode_record
from ferrymq.wire.topics import SCHEDULE_TOPIC


class WallClock:
    def __init__(self):
        self.now = 1_700_000_000.0

    def __call__(self):
        return self.now


@pytest.fixture
def store_factory(tmp_path, monkeypatch):
    stores = []
    wall = WallClock()
    monkeypatch.setattr("ferrymq.server.store.message_store.time.time", wall)

    def make():
        cfg = MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=256 * 1024,
                                 messageDelayLevel="1s 5s 10s")
        store = MessageStore(cfg)
        store.start()
        stores.append(store)
        return store

    yield make, wall
    for store in stores:
        if store.running:
            store.shutdown()


def send_delayed(store, topic, level, body, queue_id=0):
    props = {MessageConst.DELAY_TIME_LEVEL: str(level), MessageConst.TAGS: "TagA"}
    where = park_delayed(topic, queue_id, props, 0, max_level=3)
    assert where is not None
    return store.put_message(where[0], where[1], body, props)


def test_park_rules():
    props = {MessageConst.DELAY_TIME_LEVEL: "99"}
    assert park_delayed("T", 2, props, 0, max_level=18) == (SCHEDULE_TOPIC, 17)
    assert props[MessageConst.DELAY_TIME_LEVEL] == "18"
    assert props[MessageConst.REAL_TOPIC] == "T" and props[MessageConst.REAL_QUEUE_ID] == "2"
    assert park_delayed("T", 0, {}, 0, 18) is None
    assert park_delayed("T", 0, {MessageConst.DELAY_TIME_LEVEL: "x"}, 0, 18) is None
    prepared = {MessageConst.DELAY_TIME_LEVEL: "3"}
    assert park_delayed("T", 0, prepared, MessageSysFlag.TRANSACTION_PREPARED_TYPE, 18) is None


def test_delivered_when_due_and_not_before(store_factory):
    make, wall = store_factory
    store = make()
    reactor = Clock()
    service = ScheduleMessageService(StoreAdapter(store, reactor), reactor, clock=wall)
    service.start()
    assert send_delayed(store, "Real", 2, b"five-seconds", queue_id=1).ok
    assert send_delayed(store, "Real", 1, b"one-second", queue_id=1).ok

    wall.now += 0.9
    reactor.advance(1.0)  # first run; nothing is due yet
    assert store.get_max_offset("Real", 1) == 0
    wall.now += 0.2
    reactor.advance(0.1)
    assert store.get_max_offset("Real", 1) == 1  # the 1 s message, after 1.1 s
    wall.now += 3.7
    reactor.advance(0.1)
    assert store.get_max_offset("Real", 1) == 1  # 4.8 s: the 5 s one still waits
    wall.now += 0.3
    for _ in range(3):
        reactor.advance(0.1)
    assert store.get_max_offset("Real", 1) == 2

    got = store.get_message("g", "Real", 1, 0, 10)
    bodies = [decode_record(v)[0] for v in got.messages]
    assert [m.body for m in bodies] == [b"one-second", b"five-seconds"]
    assert bodies[0].properties[MessageConst.REAL_TOPIC] == "Real"
    assert bodies[0].tags == "TagA"
    service.stop()


def test_progress_survives_restart_without_redelivery(store_factory):
    make, wall = store_factory
    store = make()
    reactor = Clock()
    service = ScheduleMessageService(StoreAdapter(store, reactor), reactor, clock=wall)
    service.start()
    send_delayed(store, "Real", 1, b"a")
    wall.now += 1.5
    reactor.advance(1.0)
    assert store.get_max_offset("Real", 0) == 1
    send_delayed(store, "Real", 1, b"b")  # pending at shutdown
    service.stop()
    store.shutdown()

    store = make()
    reactor = Clock()
    service = ScheduleMessageService(StoreAdapter(store, reactor), reactor, clock=wall)
    service.start()
    assert service.offsets.get(1) == 1
    wall.now += 2
    reactor.advance(1.0)
    assert store.get_max_offset("Real", 0) == 2  # "b" delivered once, "a" not again
    service.stop()
