"""PopService over a real store, without sockets: invisibility, acks, revive to the retry topic and
the DLQ, FIFO locking, long polling, and the state a restart brings back."""

from __future__ import annotations

import pytest
from twisted.internet import defer

from ferrymq.server.broker.pop import AckStatus, PopError, PopService
from ferrymq.server.broker.pop.service import INIT_MIN
from ferrymq.wire.extra_info import ReceiptHandle
from ferrymq.wire.message import MessageConst, decode_record

from .conftest import Bk

G, T = "pop-group", "PopTopic"


def sent(bk: Bk, n: int, queue_id: int = 0, tags: str | None = None, prefix: str = "m") -> None:
    for i in range(n):
        assert bk.send(T, f"{prefix}{i}".encode(), tags=tags, queue_id=queue_id).code == 0


def bodies(result) -> list[bytes]:
    return [decode_record(m.record)[0].body for m in result.messages]


def pop(bk: Bk, **kw):
    kw.setdefault("init_mode", INIT_MIN)
    return bk.ctx.pop.pop(G, T, **kw)


def later(bk: Bk, seconds: float) -> None:
    bk.clock.advance(seconds)
    bk.ctx.pop.revive()


@pytest.fixture
def bk(tmp_path):
    b = Bk(tmp_path)
    b.send(T, b"create")  # the topic (4 queues), with one message on queue 0 consumed below
    first = b.ctx.pop.pop(G, T, 0, 1, 1000, init_mode=INIT_MIN)
    b.ctx.pop.ack(G, T, first.messages[0].handle)
    yield b
    b.close()


def test_popped_messages_stay_invisible_until_acked_or_timed_out(bk):
    sent(bk, 3)
    r = pop(bk, queue_id=0, invisible_ms=5000)
    assert bodies(r) == [b"m0", b"m1", b"m2"]
    assert all(m.attempts == 0 for m in r.messages)
    assert not pop(bk, queue_id=0).found  # in flight: nobody else gets them
    assert bk.ctx.pop.ack(G, T, r.messages[1].handle) is AckStatus.OK
    assert bk.ctx.pop.ack(G, T, r.messages[1].handle) is AckStatus.NOT_FOUND  # already acked
    # the consumer offset is the lowest unacked message
    assert bk.ctx.offsets.query(G, T, 0) == r.messages[0].queue_offset


def test_ack_of_all_moves_the_consumer_offset_past_them(bk):
    sent(bk, 2)
    r = pop(bk, queue_id=0)
    for m in r.messages:
        bk.ctx.pop.ack(G, T, m.handle)
    assert bk.ctx.offsets.query(G, T, 0) == r.messages[-1].queue_offset + 1


def test_unacked_message_comes_back_through_the_retry_topic_with_reconsume_times_plus_one(bk):
    sent(bk, 2)
    r = pop(bk, queue_id=0, invisible_ms=2000)
    bk.ctx.pop.ack(G, T, r.messages[0].handle)
    later(bk, 1.5)
    assert not pop(bk).found
    later(bk, 1.0)  # m1 passed its invisible time
    again = pop(bk, invisible_ms=2000)
    assert bodies(again) == [b"m1"]
    back = again.messages[0]
    msg, _ = decode_record(back.record)
    assert (back.topic, msg.topic, msg.reconsume_times, back.attempts) == ("%RETRY%pop-group_PopTopic", T, 1, 1)
    assert ReceiptHandle.parse(msg.properties[MessageConst.POP_CK]) == back.handle
    assert back.handle.mark == "1"
    # the original is done with: its queue's offset moved past it
    assert bk.ctx.offsets.query(G, T, 0) == r.messages[1].queue_offset + 1
    assert bk.ctx.pop.ack(G, T, back.handle) is AckStatus.OK
    later(bk, 10)
    assert not pop(bk).found


def test_retry_topic_v2_name(make_bk):
    bk = make_bk(enableRetryTopicV2=True)
    bk.send(T, b"x")
    r = bk.ctx.pop.pop(G, T, 0, 1, 1000, init_mode=INIT_MIN)
    later(bk, 2)
    again = bk.ctx.pop.pop(G, T, -1, 1, 1000)
    assert again.messages[0].topic == "%RETRY%pop-group+PopTopic" and again.messages[0].handle.mark == "2"
    assert bk.ctx.pop.ack(G, T, again.messages[0].handle) is AckStatus.OK
    assert r.found


def test_past_max_reconsume_times_the_message_goes_to_the_dlq(bk):
    bk.ctx.groups.find(G).retry_max_times = 2
    sent(bk, 1)
    for attempt in range(3):
        r = pop(bk, invisible_ms=1000)
        assert [m.attempts for m in r.messages] == [attempt]
        later(bk, 1.1)
    assert not pop(bk).found
    dlq = bk.store.get_message("", "%DLQ%pop-group", 0, 0, 32, 1 << 20, None)
    (msg,) = [decode_record(v)[0] for v in dlq.messages]
    assert (msg.body, msg.reconsume_times) == (b"m0", 3)


def test_change_invisible_renews_the_handle(bk):
    sent(bk, 1)
    (m,) = pop(bk, invisible_ms=1000).messages
    renewed = bk.ctx.pop.change_invisible(G, T, m.handle, 5000)
    assert renewed is not None and renewed.invisible_ms == 5000
    later(bk, 2)
    assert not pop(bk).found  # still invisible
    assert bk.ctx.pop.ack(G, T, m.handle) is AckStatus.NOT_FOUND  # the old handle is stale
    assert bk.ctx.pop.ack(G, T, renewed) is AckStatus.OK
    later(bk, 10)
    assert not pop(bk).found


def test_fifo_locks_the_queue_until_acked_and_redelivers_in_order(bk):
    sent(bk, 3)
    r = pop(bk, queue_id=0, fifo=True, invisible_ms=1000, max_nums=2)
    assert bodies(r) == [b"m0", b"m1"] and r.revive_qid == 999
    assert not pop(bk, queue_id=0, fifo=True).found  # locked
    bk.ctx.pop.ack(G, T, r.messages[0].handle)
    assert not pop(bk, queue_id=0, fifo=True).found  # m1 still in flight
    later(bk, 1.1)
    again = pop(bk, queue_id=0, fifo=True, invisible_ms=1000)
    assert bodies(again) == [b"m1", b"m2"]
    assert [m.attempts for m in again.messages] == [1, 0]
    assert "qo0%" in again.order_count_info
    for m in again.messages:
        assert bk.ctx.pop.ack(G, T, m.handle) is AckStatus.OK
    assert bk.ctx.offsets.query(G, T, 0) == again.messages[-1].queue_offset + 1
    assert not pop(bk, queue_id=0, fifo=True).found


def test_fifo_message_out_of_attempts_goes_to_the_dlq_and_the_queue_moves_on(bk):
    bk.ctx.groups.find(G).retry_max_times = 1
    sent(bk, 2)
    for _ in range(2):
        assert bodies(pop(bk, queue_id=0, fifo=True, invisible_ms=1000, max_nums=1)) == [b"m0"]
        later(bk, 1.1)
    assert bodies(pop(bk, queue_id=0, fifo=True, max_nums=1)) == [b"m1"]
    dlq = bk.store.get_message("", "%DLQ%pop-group", 0, 0, 32, 1 << 20, None)
    assert [decode_record(v)[0].body for v in dlq.messages] == [b"m0"]


def test_tag_expression_filters(bk):
    sent(bk, 2, tags="a", prefix="a")
    sent(bk, 2, tags="b", prefix="b")
    assert bodies(pop(bk, queue_id=0, expression="b")) == [b"b0", b"b1"]


def test_long_polling_answers_when_a_message_arrives(bk):
    d = pop(bk, poll_ms=5000)
    assert isinstance(d, defer.Deferred) and not d.called
    sent(bk, 1, queue_id=2)
    assert d.called
    assert bodies(d.result) == [b"m0"]


def test_long_polling_times_out_empty(bk):
    d = pop(bk, poll_ms=1000)
    bk.clock.advance(1.0)
    assert d.called and not d.result.found


def test_refusals(bk):
    with pytest.raises(PopError) as e:
        bk.ctx.pop.pop(G, "NoSuchTopic")
    assert e.value.kind == "topic"
    with pytest.raises(PopError):
        pop(bk, max_nums=33)
    with pytest.raises(PopError):
        pop(bk, queue_id=9)
    with pytest.raises(PopError) as e:
        pop(bk, expression="a >", expression_type="SQL92")
    assert e.value.kind == "filter"


def test_state_survives_a_restart(bk):
    sent(bk, 3)
    r = pop(bk, queue_id=0, invisible_ms=10_000)
    bk.ctx.pop.ack(G, T, r.messages[0].handle)
    saved_pop, saved_offsets = bk.ctx.pop.to_json_obj(), bk.ctx.offsets.to_json_obj()
    topics = bk.ctx.topics.to_json_obj()
    bk.ctx.pop.stop()
    # a new broker over the same files, its clock started over
    bk.store.shutdown()
    again = Bk(bk.config.storePathRootDir)
    try:
        again.ctx.topics.load_json_obj(topics)
        again.ctx.offsets.load_json_obj(saved_offsets)
        again.ctx.pop.load_json_obj(saved_pop)
        assert not again.ctx.pop.pop(G, T, 0).found  # m1, m2 still in flight
        again.clock.advance(11)
        assert again.ctx.pop.revive() == 2
        back = again.ctx.pop.pop(G, T, -1, 32, 1000)
        assert sorted(bodies(back)) == [b"m1", b"m2"]
        assert all(m.attempts == 1 for m in back.messages)
    finally:
        again.close()


def test_without_saved_state_a_restart_pops_again_from_the_consumer_offset(bk):
    sent(bk, 2)
    r = pop(bk, queue_id=0, invisible_ms=10_000)
    fresh = PopService(bk.ctx)  # what a broker that lost popState.json starts with
    again = fresh.pop(G, T, 0)
    assert bodies(again) == bodies(r)
