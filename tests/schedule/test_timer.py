"""Timer messages: parking rules, delivery within the precision, restart without loss or repeats."""

from __future__ import annotations

import pytest
from twisted.internet.task import Clock

from server.schedule.timer import TimerConfig, TimerMessageError, TimerMessageService, park_timer
from server.store import MessageStore, MessageStoreConfig
from wire.message import MessageConst, decode_record
from wire.topics import TIMER_TOPIC

NOW = 1_700_000_000_000


def test_park_rules():
    cfg = TimerConfig()
    props = {MessageConst.TIMER_DELIVER_MS: str(NOW + 5_500)}
    assert park_timer("T", 3, props, NOW, cfg) == (TIMER_TOPIC, 0)
    assert props[MessageConst.TIMER_OUT_MS] == str(NOW + 5_000)  # rounded down to the second
    assert props[MessageConst.REAL_TOPIC] == "T" and props[MessageConst.REAL_QUEUE_ID] == "3"
    exact = {MessageConst.TIMER_DELAY_SEC: "10"}
    park_timer("T", 0, exact, NOW, cfg)
    assert exact[MessageConst.TIMER_OUT_MS] == str(NOW + 9_000)  # Apache takes a whole second off exact times
    assert park_timer("T", 0, {MessageConst.TIMER_DELAY_MS: "-5"}, NOW, cfg) is None  # past: as sent
    assert park_timer("T", 0, {}, NOW, cfg) is None
    both = {MessageConst.DELAY_TIME_LEVEL: "2", MessageConst.TIMER_DELAY_SEC: "9"}
    assert park_timer("T", 0, both, NOW, cfg) is None and MessageConst.TIMER_DELAY_SEC not in both
    with pytest.raises(TimerMessageError, match="max delay"):
        park_timer("T", 0, {MessageConst.TIMER_DELAY_SEC: str(4 * 24 * 3600)}, NOW, cfg)
    with pytest.raises(TimerMessageError):
        park_timer("T", 0, {MessageConst.TIMER_DELIVER_MS: "soon"}, NOW, cfg)


class Wall:
    def __init__(self):
        self.now = NOW / 1000

    def __call__(self):
        return self.now


@pytest.fixture
def env(tmp_path, monkeypatch):
    wall = Wall()
    monkeypatch.setattr("server.store.message_store.time.time", wall)
    stores = []

    def open_store():
        store = MessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=512 * 1024))
        store.start()
        stores.append(store)
        return store

    yield open_store, wall
    for store in stores:
        if store.running:
            store.shutdown()


def park(store, wall, delay_ms, body, topic="Real"):
    props = {MessageConst.TIMER_DELAY_MS: str(delay_ms), MessageConst.UNIQ_KEY: body.decode()}
    where = park_timer(topic, 0, props, int(wall() * 1000), TimerConfig())
    assert where == (TIMER_TOPIC, 0)
    assert store.put_message(*where, body, props).ok


def bodies(store, topic="Real"):
    out, offset = [], 0
    while offset < store.get_max_offset(topic, 0):
        got = store.get_message("g", topic, 0, offset, 32)
        out += [decode_record(v)[0].body for v in got.messages]
        offset = got.next_begin_offset
    return out


def test_fires_in_due_order_never_early_within_a_slot(env):
    open_store, wall = env
    store = open_store()
    reactor = Clock()
    wheel = TimerMessageService(store, reactor, clock=wall)
    wheel.start()
    park(store, wall, 3_400, b"late")
    park(store, wall, 1_200, b"early")
    reactor.advance(0.1)
    assert wheel.pending == 2 and bodies(store) == []
    wall.now += 0.9
    reactor.advance(0.1)
    assert bodies(store) == []  # 0.9 s: not yet
    wall.now += 0.2
    reactor.advance(0.1)
    assert bodies(store) == []  # 1.1 s: due 1.2 s, never early
    wall.now += 0.9
    reactor.advance(0.1)
    assert bodies(store) == [b"early"]  # 2.0 s: its slot (1.0 s, rounded down) has fully passed, as Apache's
    wall.now += 2.0
    reactor.advance(0.1)
    assert bodies(store) == [b"early", b"late"]
    msg = decode_record(store.get_message("g", "Real", 0, 1, 1).messages[0])[0]
    assert int(msg.properties[MessageConst.TIMER_DEQUEUE_MS]) == int(wall() * 1000)
    assert wheel.pending == 0
    wheel.stop()


def test_restart_rebuilds_the_wheel_without_repeats(env):
    open_store, wall = env
    store = open_store()
    reactor = Clock()
    wheel = TimerMessageService(store, reactor, clock=wall)
    wheel.start()
    for i in range(50):
        park(store, wall, 1_000 + i * 100, f"m{i:02d}".encode())
    wall.now += 3.05
    reactor.advance(0.1)
    first = bodies(store)
    assert 0 < len(first) < 50
    wheel.stop()
    store.shutdown()

    store = open_store()
    reactor = Clock()
    wheel = TimerMessageService(store, reactor, clock=wall)
    wheel.start()
    assert wheel.pending == 50 - len(first)
    wall.now += 10
    reactor.advance(0.1)
    got = bodies(store)
    assert sorted(got) == [f"m{i:02d}".encode() for i in range(50)]  # each exactly once
    wheel.stop()
