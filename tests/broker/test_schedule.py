"""Delay levels: parked in SCHEDULE_TOPIC_XXXX, delivered to the real topic when due, offsets persisted."""

from __future__ import annotations

import pytest

from server.broker.schedule import ScheduleService, parse_delay_levels
from wire.message import decode_records


def real(bk, topic="DelayT"):
    return decode_records(bk.store.get_message("", topic, 0, 0, 32).body())


def test_delay_levels_parse():
    assert parse_delay_levels("1s 5m 2h 1d") == [1000, 300_000, 7_200_000, 86_400_000]
    with pytest.raises(ValueError, match="3x"):
        parse_delay_levels("1s 3x")


def test_delayed_send_is_parked_then_delivered_when_due(bk):
    resp = bk.send("DelayT", b"later", tags="TagA", extra_props={"DELAY": "2"})  # level 2 = 5 s
    # Apache answers the queue the producer chose, and the offset in the schedule queue it was parked in
    assert resp.code == 0 and resp.ext_fields["queueId"] == "0" and resp.ext_fields["queueOffset"] == "0"
    assert real(bk) == [] and bk.store.get_max_offset("SCHEDULE_TOPIC_XXXX", 1) == 1
    bk.later_ms = 4_000
    assert bk.ctx.scheduler.tick() == 0
    bk.later_ms = 5_500
    assert bk.ctx.scheduler.tick() == 1
    (msg,) = real(bk)
    assert msg.body == b"later" and msg.tags == "TagA" and msg.properties["REAL_TOPIC"] == "DelayT"
    assert bk.ctx.scheduler.offsets == {2: 1} and bk.ctx.scheduler.changed
    assert bk.ctx.scheduler.tick() == 0  # delivered once


def test_levels_above_the_table_are_clamped_and_offsets_round_trip(bk):
    bk.send("DelayT", b"x", extra_props={"DELAY": "99"})
    assert bk.store.get_max_offset("SCHEDULE_TOPIC_XXXX", 17) == 1
    bk.later_ms = 3 * 3_600_000
    assert bk.ctx.scheduler.tick() == 1
    copy = ScheduleService(bk.ctx)
    copy.load_json_obj(bk.ctx.scheduler.to_json_obj())
    assert copy.offsets == {18: 1} and copy.tick() == 0


def test_no_scheduler_means_immediate_delivery(bk):
    bk.ctx.scheduler = None
    bk.send("DelayT", b"now", extra_props={"DELAY": "3"})
    assert [m.body for m in real(bk)] == [b"now"]
