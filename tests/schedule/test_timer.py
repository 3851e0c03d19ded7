"""Timer messages: parking rules, delivery within the precision, restart without loss or repeats."""

from __future__ import annotations

import shutil
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.internet.task import Clock

from ferrymq.server.schedule.timer import TimerConfig, TimerMessageError, TimerMessageService, park_timer
from ferrymq.server.broker.store_adapter import StoreAdapter
from ferrymq.server.store import MessageStore, MessageStoreConfig
from ferrymq.wire.message import MessageConst, decode_record
from ferrymq.wire.topics import TIMER_TOPIC

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
    monkeypatch.setattr("ferrymq.server.store.message_store.time.time", wall)
    stores = []

    def open_store():
        store = MessageStore(MessageStoreConfig(storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=512 * 1024,
                                                maxHashSlotNum=64, maxIndexNum=256))  # no 400 MB index file
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
    wheel = TimerMessageService(StoreAdapter(store, reactor), reactor, clock=wall)
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
    wheel = TimerMessageService(StoreAdapter(store, reactor), reactor, clock=wall)
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
    wheel = TimerMessageService(StoreAdapter(store, reactor), reactor, clock=wall)
    wheel.start()
    assert wheel.pending == 50 - len(first)
    wall.now += 10
    reactor.advance(0.1)
    got = bodies(store)
    assert sorted(got) == [f"m{i:02d}".encode() for i in range(50)]  # each exactly once
    wheel.stop()


def crash(wheel, store):
    """Stop as a kill would: no final checkpoint or snapshot (the store's own recovery still runs)."""
    wheel.running = False
    store.shutdown()


def test_restart_loads_the_wheel_instead_of_reading_every_parked_message(env):
    open_store, wall = env
    store = open_store()
    wheel = TimerMessageService(StoreAdapter(store, Clock()), Clock(), clock=wall)
    wheel.start()
    for i in range(40):
        park(store, wall, 5_000 + i * 100, f"m{i:02d}".encode())
    wheel.run_once()
    wheel.stop()
    store.shutdown()

    store = open_store()
    wheel = TimerMessageService(StoreAdapter(store, Clock()), Clock(), clock=wall)
    wheel.start()
    assert wheel.recovery == (40, 0) and wheel.pending == 40
    wall.now += 10
    wheel.run_once()
    assert sorted(bodies(store)) == [f"m{i:02d}".encode() for i in range(40)]
    wheel.stop()


def test_crash_after_a_snapshot_reads_only_what_was_parked_since_and_repeats_nothing(env):
    open_store, wall = env
    store = open_store()
    reactor = Clock()
    wheel = TimerMessageService(StoreAdapter(store, reactor), reactor, clock=wall)
    wheel.start()
    for i in range(30):
        park(store, wall, 1_000 + i * 200, f"a{i:02d}".encode())
    wall.now += 31  # the periodic snapshot is due: it is written on the next tick...
    reactor.advance(0.1)  # ...after that tick delivered everything due by now (all of them)
    assert len(bodies(store)) == 30
    for i in range(20):
        park(store, wall, 1_000 + i * 200, f"b{i:02d}".encode())
    for i in range(10):
        park(store, wall, 60_000 + i * 200, f"c{i:02d}".encode())
    reactor.advance(0.1)  # taken into the wheel, none due yet; no new snapshot (30 s have not passed)
    wall.now += 2.5
    wheel.run_once()  # some b's delivered after the snapshot (timercheck records them)
    delivered_before_crash = len(bodies(store))
    assert 30 < delivered_before_crash < 60
    crash(wheel, store)

    store = open_store()
    reactor = Clock()
    wheel = TimerMessageService(StoreAdapter(store, reactor), reactor, clock=wall)
    wheel.start()
    # The snapshot held an empty wheel; of the 30 parked since, those below timercheck's low-water mark
    # (delivered, in offset order here) are not even read.
    assert wheel.recovery == (0, 60 - delivered_before_crash)
    assert wheel.pending == 60 - delivered_before_crash
    wall.now += 80
    reactor.advance(0.1)
    got = bodies(store)
    expected = [f"a{i:02d}" for i in range(30)] + [f"b{i:02d}" for i in range(20)] + [f"c{i:02d}" for i in range(10)]
    assert sorted(got) == [e.encode() for e in expected]  # each exactly once
    wheel.stop()


def test_snapshot_entries_delivered_since_are_dropped_on_restart(env):
    """The snapshot is older than timercheck: slots delivered after it must not fire again."""
    open_store, wall = env
    store = open_store()
    reactor = Clock()
    wheel = TimerMessageService(StoreAdapter(store, reactor), reactor, clock=wall)
    wheel.start()
    for i in range(20):
        park(store, wall, 1_000 + i * 500, f"m{i:02d}".encode())
    wheel.run_once()
    wheel.snapshot()
    wall.now += 5.5
    wheel.run_once()
    first = len(bodies(store))
    assert 0 < first < 20
    crash(wheel, store)

    store = open_store()
    wheel = TimerMessageService(StoreAdapter(store, Clock()), Clock(), clock=wall)
    wheel.start()
    assert wheel.recovery == (20 - first, 0) and wheel.pending == 20 - first
    wall.now += 20
    wheel.run_once()
    assert sorted(bodies(store)) == [f"m{i:02d}".encode() for i in range(20)]
    wheel.stop()


@pytest.mark.parametrize("damage", ["truncated", "corrupted", "other precision"])
def test_an_unusable_snapshot_falls_back_to_reading_the_store(env, damage):
    open_store, wall = env
    store = open_store()
    wheel = TimerMessageService(StoreAdapter(store, Clock()), Clock(), clock=wall)
    wheel.start()
    for i in range(10):
        park(store, wall, 3_000 + i * 100, f"m{i}".encode())
    wheel.run_once()
    wheel.stop()
    store.shutdown()
    config = TimerConfig()
    with open(wheel.wheel_path, "r+b") as f:
        data = f.read()
        if damage == "truncated":
            f.truncate(len(data) - 9)
        elif damage == "corrupted":
            f.seek(60)
            f.write(b"\xff")
        else:
            config = TimerConfig(timerPrecisionMs=100)

    store = open_store()
    wheel = TimerMessageService(StoreAdapter(store, Clock()), Clock(), config, clock=wall)
    wheel.start()
    assert wheel.recovery == (0, 10) and wheel.pending == 10
    wall.now += 10
    wheel.run_once()
    assert sorted(bodies(store)) == [f"m{i}".encode() for i in range(10)]
    wheel.stop()


#: rounds of: timers parked (delays, ms), a snapshot taken after they are scanned or not, time advanced
#: (s), then a tick (delivery) and the round's end: nothing, a kill, or a clean restart
_ROUNDS = st.lists(
    st.tuples(st.lists(st.integers(1_000, 20_000), max_size=5), st.booleans(), st.floats(0.1, 12.0),
              st.sampled_from(["none", "crash", "restart"])),
    max_size=8,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rounds=_ROUNDS)
def test_any_mix_of_snapshots_crashes_and_restarts_delivers_each_timer_once(tmp_path, rounds):
    """Whatever the order of parks, deliveries, snapshots, kills and clean restarts, every timer is
    delivered exactly once and never before its due time (kills fall between ticks here)."""
    root = tmp_path / uuid.uuid4().hex
    wall = Wall()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr("ferrymq.server.store.message_store.time.time", wall)

        def open_store():
            # small index and consume queue files: each example has its own store (deleted at its end)
            store = MessageStore(MessageStoreConfig(
                storePathRootDir=str(root), mappedFileSizeCommitLog=512 * 1024, mappedFileSizeConsumeQueue=20 * 256,
                maxHashSlotNum=64, maxIndexNum=256,
            ))
            store.start()
            return store

        store = open_store()
        wheel = TimerMessageService(StoreAdapter(store, Clock()), Clock(), clock=wall)
        wheel.start()
        due: dict[bytes, int] = {}  # body -> due time (ms)
        try:
            for delays, snapshot, advance, end in rounds:
                for delay in delays:
                    body = f"t{len(due)}".encode()
                    park(store, wall, delay, body)
                    due[body] = int(wall() * 1000) + delay
                wheel.run_once()
                if snapshot:
                    wheel.snapshot()
                wall.now += advance
                wheel.run_once()
                wheel._maybe_snapshot()
                if end != "none":
                    if end == "crash":
                        crash(wheel, store)
                    else:
                        wheel.stop()
                        store.shutdown()
                    store = open_store()
                    wheel = TimerMessageService(StoreAdapter(store, Clock()), Clock(), clock=wall)
                    wheel.start()
                for msg in delivered(store):
                    assert int(msg.properties[MessageConst.TIMER_DEQUEUE_MS]) >= due[msg.body]
            wall.now += 30
            wheel.run_once()
            got = [m.body for m in delivered(store)]
            assert sorted(got) == sorted(due)  # each exactly once
            assert wheel.pending == 0
            wheel.stop()
        finally:
            if store.running:
                store.shutdown()
            shutil.rmtree(root, ignore_errors=True)


def delivered(store, topic="Real"):
    out, offset = [], 0
    while offset < store.get_max_offset(topic, 0):
        got = store.get_message("g", topic, 0, offset, 32)
        out += [decode_record(v)[0] for v in got.messages]
        offset = got.next_begin_offset
    return out
