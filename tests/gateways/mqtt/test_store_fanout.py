"""The fan-out of a broker process's gateway (store_fanout.py) on a real broker and store: what the gateway
stored itself is handed out as it has it, what other clients stored is read back from the store, and both
in queue order."""

from __future__ import annotations

import os

import pytest

from ferrymq.gateways.mqtt.store_fanout import StoreFanOut
from ferrymq.sdk.consumer.offset_store import LocalFileOffsetStore
from ferrymq.sdk.producer import select_by_hash
from ferrymq.wire.bodies import MessageQueue

from tests.broker.conftest import Bk

from tests.gateways.test_store_send import _outcome, _publish, _sender

TOPIC = "sensors"


@pytest.fixture
def brokers(tmp_path):
    here, there = Bk(tmp_path / "a"), Bk(tmp_path / "b")
    there.config.brokerName = "broker-b"
    here.ctx.topics.create_if_absent(TOPIC, 4, 6)
    yield here, there
    here.close()
    there.close()


class _Wired:
    """A StoreFanOut of ``here``'s store subscribed to :data:`TOPIC`, told of what a StoreSend stores;
    ``handed`` holds what it handed to the sessions, ``kept`` what the StoreSend told it of."""

    def __init__(self, here: Bk, there: Bk, offsets_dir):
        self.here = here
        self.handed, self.kept = [], []
        self.fan_out = StoreFanOut(here.ctx.store, "broker-a", lambda topic: range(4), lambda: {TOPIC: "*"},
                                   self.handed.extend, LocalFileOffsetStore("g", "c", offsets_dir), reactor=here.clock)
        self.fan_out.since[TOPIC] = 0
        self.fan_out.update()
        self.sender = _sender(here, there)
        self.sender.on_stored = self._told

    def _told(self, msg) -> None:
        self.kept.append(msg)
        self.fan_out.stored(msg)

    def publish(self, mqtt_topic: str, payload: bytes) -> int:
        """Publish as a device through the StoreSend; the queue it went to."""
        message, key = _publish(mqtt_topic, payload)
        assert _outcome(self.sender.send_orderly(message, key)).queue_offset >= 0
        return select_by_hash(list(range(4)), message, key)

    def turn(self) -> list:
        self.handed.clear()
        self.here.clock.advance(0)
        return list(self.handed)


def test_what_the_gateway_stored_is_handed_out_as_it_has_it_with_its_place(brokers, tmp_path):
    here, there = brokers
    wired = _Wired(here, there, tmp_path / "offsets")
    big = os.urandom(64) * 128  # compressed in the record (past 4 KiB), handed out as published
    queue = wired.publish(f"{TOPIC}/room1/temp", b"first")
    assert wired.publish(f"{TOPIC}/room1/temp", big) == queue
    handed = wired.turn()
    assert len(handed) == 2 and all(a is b for a, b in zip(handed, wired.kept, strict=True))
    assert [m.body for m in handed] == [b"first", big] and handed[1].sys_flag & 1 == 0
    stored = here.ctx.store.get_message(TOPIC, queue, 0, 32, 1 << 20, None)
    assert [m.queue_offset for m in handed] == [0, 1]
    assert handed[0].commitlog_offset == 0 < handed[1].commitlog_offset < here.store.get_max_phy_offset()
    assert all(m.store_timestamp > 0 for m in handed) and stored.next_begin_offset == 2
    assert wired.fan_out.offsets.table[MessageQueue(TOPIC, "broker-a", queue)] == 2
    assert wired.turn() == []  # nothing new: nothing read again


def test_records_other_clients_stored_between_are_read_back_in_queue_order(brokers, tmp_path):
    here, there = brokers
    wired = _Wired(here, there, tmp_path / "offsets")
    queue = wired.publish(f"{TOPIC}/room1/temp", b"device 1")
    assert here.send(TOPIC, b"java", tags="room1/temp", queue_id=queue).code == 0
    wired.publish(f"{TOPIC}/room1/temp", b"device 2")
    handed = wired.turn()
    assert [m.body for m in handed] == [b"device 1", b"java", b"device 2"]
    assert handed[0] is wired.kept[0]
    assert [m.queue_offset for m in handed] == [0, 1, 2] and handed[1].tags == "room1/temp"
    # a turn that begins with another client's record reads the store from there
    assert here.send(TOPIC, b"java 2", tags="room1/temp", queue_id=queue).code == 0
    wired.publish(f"{TOPIC}/room1/temp", b"device 3")
    assert [m.body for m in wired.turn()] == [b"java 2", b"device 3"]


def test_a_topic_not_subscribed_is_not_kept(brokers, tmp_path):
    here, there = brokers
    here.ctx.topics.create_if_absent("other", 4, 6)
    wired = _Wired(here, there, tmp_path / "offsets")
    wired.publish("other/x", b"not for the fan-out")
    assert wired.kept and wired.fan_out._stored == {}
    assert wired.turn() == []


def test_what_is_stored_during_a_hold_is_handed_out_at_its_flush_in_the_same_turn(brokers, tmp_path):
    here, there = brokers
    wired = _Wired(here, there, tmp_path / "offsets")
    assert wired.turn() == []  # the subscription's first read
    wired.fan_out.hold()
    wired.fan_out.hold()  # nested: the outer flush reads
    wired.publish(f"{TOPIC}/room1/temp", b"first")
    assert wired.turn() == []  # no turn reads what is held
    wired.fan_out.flush()
    assert wired.handed == []
    wired.fan_out.flush()
    assert [m.body for m in wired.handed] == [b"first"]
    assert wired.turn() == []  # read once
    wired.publish(f"{TOPIC}/room1/temp", b"second")  # no hold: the next turn reads it
    assert [m.body for m in wired.turn()] == [b"second"]
