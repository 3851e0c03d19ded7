"""Delay levels and timer messages through SEND: parked, delivered to the real topic when due, not before."""

from __future__ import annotations

import time

import pytest

from ferrymq.server.store.config import MessageStoreConfig
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.message import decode_records


def real(bk, topic="DelayT"):
    return decode_records(bk.store.get_message("", topic, 0, 0, 32).body())


def test_delay_levels_parse():
    cfg = MessageStoreConfig(messageDelayLevel="1s 5m 2h 1d")
    assert cfg.delay_level_millis() == [1000, 300_000, 7_200_000, 86_400_000]
    with pytest.raises(ValueError, match="3x"):
        MessageStoreConfig(messageDelayLevel="1s 3x").delay_level_millis()


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
    assert bk.ctx.scheduler.offsets[2] == 1
    assert bk.ctx.scheduler.tick() == 0  # delivered once


def test_levels_above_the_table_are_clamped_and_offsets_round_trip(bk):
    bk.send("DelayT", b"x", extra_props={"DELAY": "99"})
    assert bk.store.get_max_offset("SCHEDULE_TOPIC_XXXX", 17) == 1
    bk.later_ms = 3 * 3_600_000
    assert bk.ctx.scheduler.tick() == 1
    bk.ctx.scheduler.persist()
    from ferrymq.server.schedule.delay import ScheduleMessageService

    copy = ScheduleMessageService(bk.ctx.store, bk.clock, clock=bk.wall)
    copy.load()
    assert copy.offsets[18] == 1 and copy.tick() == 0


def test_no_scheduler_means_immediate_delivery(bk):
    bk.ctx.scheduler = None
    bk.send("DelayT", b"now", extra_props={"DELAY": "3"})
    assert [m.body for m in real(bk)] == [b"now"]


def test_timer_message_is_parked_then_delivered_within_its_slot(bk):
    due = int(time.time() * 1000) + 30_000
    resp = bk.send("DelayT", b"timer", tags="TagT", extra_props={"TIMER_DELIVER_MS": str(due)})
    assert resp.code == 0, resp.remark
    assert real(bk) == [] and bk.store.get_max_offset("rmq_sys_wheel_timer", 0) == 1
    timer = bk.ctx.timer
    bk.later_ms = 29_500
    assert timer.run_once() == 0 and timer.pending == 1  # never early
    bk.later_ms = 31_001  # at most one timerPrecisionMs late
    assert timer.run_once() == 1
    (msg,) = real(bk)
    assert msg.body == b"timer" and msg.tags == "TagT" and msg.properties["REAL_TOPIC"] == "DelayT"
    assert "TIMER_ENQUEUE_MS" in msg.properties and "TIMER_DEQUEUE_MS" in msg.properties
    assert timer.run_once() == 0 and timer.pending == 0


def test_timer_delay_properties_and_a_delay_level_wins(bk):
    assert bk.send("DelayT", b"s", extra_props={"TIMER_DELAY_SEC": "10"}).code == 0
    assert bk.send("DelayT", b"ms", extra_props={"TIMER_DELAY_MS": "10000"}).code == 0
    assert bk.store.get_max_offset("rmq_sys_wheel_timer", 0) == 2
    assert bk.send("DelayT", b"lvl", extra_props={"DELAY": "1", "TIMER_DELAY_SEC": "10"}).code == 0
    assert bk.store.get_max_offset("SCHEDULE_TOPIC_XXXX", 0) == 1  # HookUtils: the level wins
    past = bk.send("DelayT", b"past", extra_props={"TIMER_DELIVER_MS": str(int(time.time() * 1000) - 5)})
    assert past.code == 0 and [m.body for m in real(bk)] == [b"past"]  # already due: stored as sent


def test_timer_errors_answer_as_apache(bk):
    too_far = bk.send("DelayT", b"x", extra_props={"TIMER_DELAY_SEC": str(4 * 24 * 3600)})
    assert too_far.code == ResponseCode.MESSAGE_ILLEGAL
    assert too_far.remark.startswith("timer message illegal, the delay time should not be bigger than the max delay 259200000ms")
    garbage = bk.send("DelayT", b"x", extra_props={"TIMER_DELAY_MS": "soon"})
    assert garbage.code == ResponseCode.MESSAGE_ILLEGAL
    bk.ctx.timer.config.timerWheelEnable = False
    off = bk.send("DelayT", b"x", extra_props={"TIMER_DELAY_SEC": "5"})
    assert off.code == ResponseCode.SYSTEM_ERROR
    assert off.remark == "accurate timer message is not enabled, timerWheelEnable is false"
    assert real(bk) == []


def test_runtime_info_reports_the_timer_wheel(bk):
    from ferrymq.wire.bodies import KVTable
    from ferrymq.wire.codes import RequestCode

    def figures():
        table = KVTable.decode(bk.call(RequestCode.GET_BROKER_RUNTIME_INFO).body).table
        return {k: table[k] for k in ("timerOffsetBehind", "timerCongestNum", "timerReadBehind")}

    for i in range(3):
        assert bk.send("DelayT", b"t", extra_props={"TIMER_DELAY_SEC": str(5 + i)}).code == 0
    assert figures() == {"timerOffsetBehind": "3", "timerCongestNum": "0", "timerReadBehind": "0"}
    bk.ctx.timer.run_once()
    assert figures() == {"timerOffsetBehind": "0", "timerCongestNum": "3", "timerReadBehind": "0"}
    bk.later_ms = 20_000  # due long ago, not yet fired: the wheel lags
    assert int(figures()["timerReadBehind"]) >= 14_000
