"""PULL_MESSAGE: status -> code mapping, the four offsets, heartbeat subscriptions, tags, long polling."""

from __future__ import annotations

from twisted.internet import defer

from ferrymq.wire.codes import PullSysFlag, ResponseCode
from ferrymq.wire.message import decode_records

SUSPEND = PullSysFlag.SUSPEND
SUB = PullSysFlag.SUBSCRIPTION
COMMIT = PullSysFlag.COMMIT_OFFSET
OFFSETS = ("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId")


def offsets(resp):
    return tuple(int(resp.ext_fields[k]) for k in OFFSETS)


def test_pull_with_header_subscription_returns_records_and_offsets(bk):
    for i in range(3):
        bk.send("T1", f"m{i}".encode())
    resp = bk.pull("g", "T1", sys_flag=SUB, subscription="*")
    assert resp.code == 0 and resp.remark == "FOUND"
    assert offsets(resp) == (3, 0, 3, 0)
    assert [m.body for m in decode_records(resp.body)] == [b"m0", b"m1", b"m2"]


def test_status_to_code_mapping(bk):
    bk.send("T2")
    bk.send("T2")
    at_end = bk.pull("g", "T2", offset=2, sys_flag=SUB, subscription="*")
    assert at_end.code == ResponseCode.PULL_NOT_FOUND and offsets(at_end)[:3] == (2, 0, 2)
    beyond = bk.pull("g", "T2", offset=9, sys_flag=SUB, subscription="*")
    assert beyond.code == ResponseCode.PULL_OFFSET_MOVED and offsets(beyond)[0] == 2
    bk.send("T3", queue_id=1)
    empty_queue = bk.pull("g", "T3", queue_id=0, offset=0, sys_flag=SUB, subscription="*")
    assert empty_queue.code == ResponseCode.PULL_NOT_FOUND and offsets(empty_queue) == (0, 0, 0, 0)
    moved = bk.pull("g", "T3", queue_id=0, offset=5, sys_flag=SUB, subscription="*")
    assert moved.code == ResponseCode.PULL_OFFSET_MOVED and offsets(moved)[0] == 0


def test_bad_requests_get_apache_codes(bk):
    assert bk.pull("g", "Missing", sys_flag=SUB, subscription="*").code == ResponseCode.TOPIC_NOT_EXIST
    bk.send("T4")
    bad = bk.pull("g", "T4", queue_id=7, sys_flag=SUB, subscription="*")
    assert bad.code == ResponseCode.INVALID_PARAMETER and "queueId[7] is illegal" in bad.remark
    assert bk.pull("bad group!", "T4", sys_flag=SUB).code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    # a push consumer (no subscription bit) that never sent a heartbeat
    assert bk.pull("g", "T4").code == ResponseCode.SUBSCRIPTION_NOT_EXIST
    sql = bk.pull("g", "T4", sys_flag=SUB, subscription="a > 1", expressionType="SQL92")
    assert sql.code == ResponseCode.SYSTEM_ERROR and "SQL92" in sql.remark


def test_heartbeat_subscription_filters_by_tag_and_version_rule(bk):
    for tag in ("TagA", "TagB", "TagC", "TagA"):
        bk.send("T5", tag.encode(), tags=tag)
    assert bk.heartbeat("g5", "T5", "TagA || TagC", sub_version=10).code == 0
    resp = bk.pull("g5", "T5", sub_version=10)
    assert resp.code == 0
    assert [m.tags for m in decode_records(resp.body)] == ["TagA", "TagC", "TagA"]
    assert bk.pull("g5", "T5", sub_version=11).code == ResponseCode.SUBSCRIPTION_NOT_LATEST
    bk.send("Other")
    assert bk.pull("g5", "Other").code == ResponseCode.SUBSCRIPTION_NOT_EXIST


def test_all_filtered_is_retry_immediately_past_the_filtered_units(bk):
    bk.send("T6", tags="TagB")
    bk.send("T6", tags="TagB")
    resp = bk.pull("g", "T6", sys_flag=SUB, subscription="TagA")
    assert resp.code == ResponseCode.PULL_RETRY_IMMEDIATELY and offsets(resp)[0] == 2


def test_commit_offset_side_effect_only_on_suspendable_first_arrival(bk):
    bk.send("T7")
    bk.pull("g", "T7", sys_flag=SUB | COMMIT | SUSPEND, subscription="*", commit_offset=1)
    assert bk.ctx.offsets.query("g", "T7", 0) == 1
    assert bk.ctx.offsets.query_pull_offset("g", "T7", 0) == 1


def test_long_poll_is_held_then_woken_by_a_send(bk):
    bk.send("T8")
    held = bk.pull("g", "T8", offset=1, sys_flag=SUB | SUSPEND, subscription="*")
    assert isinstance(held, defer.Deferred) and not held.called
    assert len(bk.ctx.holder) == 1
    bk.send("T8", b"late")
    assert held.called
    resp = held.result
    assert resp.code == 0 and [m.body for m in decode_records(resp.body)] == [b"late"]
    assert len(bk.ctx.holder) == 0


def test_long_poll_times_out_with_pull_not_found(bk):
    bk.send("T9")
    held = bk.pull("g", "T9", offset=1, sys_flag=SUB | SUSPEND, subscription="*", suspend_ms=15000)
    bk.clock.advance(14.9)
    assert not held.called
    bk.clock.advance(0.2)
    assert held.called and held.result.code == ResponseCode.PULL_NOT_FOUND and offsets(held.result)[0] == 1


def test_long_poll_ignores_other_tags_and_drops_vanished_clients(bk):
    from tests.broker.conftest import FakeChannel

    bk.send("T10", tags="TagA")
    ch = FakeChannel("127.0.0.1:50002")
    held = bk.pull("g", "T10", offset=1, sys_flag=SUB | SUSPEND, subscription="TagA", channel=ch)
    bk.send("T10", tags="TagB")
    assert not held.called
    other = bk.pull("g", "T10", offset=2, sys_flag=SUB | SUSPEND, subscription="*")
    ch.close()  # the first client vanishes mid-pull
    assert held.called and held.result is None
    bk.send("T10", tags="TagA")
    assert other.called and other.result.code == 0
    assert len(bk.ctx.holder) == 0


def test_long_poll_woken_by_a_batch_holding_a_matching_tag(bk):
    from ferrymq.wire.codes import RequestCode
    from ferrymq.wire.headers import SendMessageRequestHeader
    from ferrymq.wire.message import encode_batch, encode_properties

    def send_batch(tags):
        body = encode_batch([(0, f"m{i}".encode(), {"TAGS": t}) for i, t in enumerate(tags)])
        h = SendMessageRequestHeader("pg", "T11", "TBW102", 4, 0, 0, 1, 0, properties=encode_properties({}),
                                     batch=True)
        assert bk.call(RequestCode.SEND_BATCH_MESSAGE, h.to_ext_v2(), body).code == 0

    bk.send("T11", tags="TagA")
    held = bk.pull("g", "T11", offset=1, sys_flag=SUB | SUSPEND, subscription="TagA")
    send_batch(["TagB", "TagB"])
    assert not held.called  # nothing it wants
    send_batch(["TagB", "TagA"])  # mixed tags: the held pull is answered, with the matching message
    assert held.called and held.result.code == 0
    assert [m.body for m in decode_records(held.result.body)] == [b"m1"]


def test_long_polls_answered_on_one_connection_are_not_kept_alive(bk):
    """A push consumer holds a pull for almost every message: the broker must watch its connection's close
    once, not once per hold (that kept every answered pull alive until the client disconnected)."""
    import gc
    import weakref

    from tests.broker.conftest import FakeChannel

    ch = FakeChannel("127.0.0.1:50003")
    answered = []
    bk.send("T11")
    for offset in range(1, 51):
        held = bk.pull("g", "T11", offset=offset, sys_flag=SUB | SUSPEND, subscription="*", channel=ch)
        assert not held.called
        answered.append(weakref.ref(bk.ctx.holder._held[("T11", 0)][0]))
        bk.send("T11")
        assert held.called and held.result.code == 0
    gc.collect()
    assert len(ch.closers) == 1
    assert all(ref() is None for ref in answered)
    assert len(bk.ctx.holder) == 0
    still = bk.pull("g", "T11", offset=51, sys_flag=SUB | SUSPEND, subscription="*", channel=ch)
    ch.close()
    assert still.called and still.result is None
    assert len(bk.ctx.holder) == 0


def test_a_changed_subscription_answers_the_pulls_its_connection_holds_at_once(bk):
    """A held pull waits for what its subscription selects: when the consumer's heartbeat widens it
    (TagA to *), the pulls that connection holds on the topic are answered with what the new one selects
    rather than at the hold's timeout; a heartbeat that changes nothing, or another connection's pull, is
    left held."""
    from tests.broker.conftest import FakeChannel

    ch, other = FakeChannel("127.0.0.1:50010"), FakeChannel("127.0.0.1:50011")
    bk.send("T20", b"consumed", tags="TagA")
    assert bk.heartbeat("gw", "T20", "TagA", channel=ch, sub_version=1).code == 0
    assert bk.heartbeat("gw", "T20", "TagA", channel=other, client_id="c2", sub_version=1).code == 0
    held = bk.pull("gw", "T20", offset=1, sys_flag=SUSPEND, sub_version=1, channel=ch)
    bystander = bk.pull("gw", "T20", offset=1, sys_flag=SUSPEND, sub_version=1, channel=other)
    bk.send("T20", b"widened", tags="TagB")
    assert not held.called
    bk.heartbeat("gw", "T20", "TagA", channel=ch, sub_version=1)
    assert not held.called
    bk.heartbeat("gw", "T20", "*", channel=ch, sub_version=2)
    assert held.called and [m.body for m in decode_records(held.result.body)] == [b"widened"]
    assert not bystander.called
