"""INVOKE_BROKER_TO_RESET_OFFSET in both of Apache's modes (``useServerSideResetOffset``).

Server-side (default): the broker keeps the reset until the group's next pull of the queue, which is
answered PULL_OFFSET_MOVED / OFFSET_RESET; meanwhile queries report it and the consumer's stale commits
are dropped. Client-push: RESET_CONSUMER_CLIENT_OFFSET to the online consumers, refused for a group with
no stored offset.
"""

from __future__ import annotations

from tests.broker.conftest import FakeChannel
from ferrymq.wire.bodies import MessageQueue, ResetOffsetBody, SubscriptionGroupConfig
from ferrymq.wire.codes import PullSysFlag, RequestCode, ResponseCode
from ferrymq.wire.headers import CreateTopicRequestHeader

C = RequestCode


def setup(bk, topic="RT", queues=2, messages=3, group="rg"):
    h = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=queues,
                                 write_queue_nums=queues, perm=6, topic_filter_type="SINGLE_TAG", order=False)
    assert bk.call(C.UPDATE_AND_CREATE_TOPIC, h.to_ext()).code == 0
    if group:
        body = SubscriptionGroupConfig(group_name=group).encode()
        assert bk.call(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body).code == 0
    for qid in range(queues):
        for _ in range(messages):
            assert bk.send(topic, queue_id=qid).code == 0


def reset(bk, topic="RT", group="rg", timestamp=0, force=True, **extra):
    req = {"topic": topic, "group": group, "timestamp": timestamp, "isForce": str(force).lower(), **extra}
    return bk.call(C.INVOKE_BROKER_TO_RESET_OFFSET, req)


def query(bk, qid, group="rg", topic="RT"):
    return bk.call(C.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": qid})


def update(bk, qid, offset, group="rg", topic="RT"):
    return bk.call(C.UPDATE_CONSUMER_OFFSET,
                   {"consumerGroup": group, "topic": topic, "queueId": qid, "commitOffset": offset})


# ---------------------------------------------------------------------------------------------- server side


def test_server_side_reset_needs_no_consumer_and_no_stored_offset(bk):
    assert bk.config.useServerSideResetOffset is True  # Apache 5.5's default
    setup(bk)
    consumer = FakeChannel("127.0.0.1:7100")
    resp = reset(bk)
    assert resp.code == 0, resp.remark
    assert ResetOffsetBody.decode(resp.body).offset_table == {
        MessageQueue("RT", "broker-a", 0): 0, MessageQueue("RT", "broker-a", 1): 0}
    assert consumer.sent == []  # nothing is pushed to clients
    # The reset is also committed: an offline group finds it when it comes back.
    assert bk.ctx.offsets.offsets_of("rg", "RT") == {0: 0, 1: 0}
    to_end = reset(bk, timestamp=-1)
    assert ResetOffsetBody.decode(to_end.body).offset_table[MessageQueue("RT", "broker-a", 1)] == 3


def test_pending_reset_wins_over_stale_commits_until_a_pull_takes_it(bk):
    setup(bk)
    update(bk, 0, 3)
    update(bk, 1, 3)
    assert reset(bk).code == 0
    assert query(bk, 0).ext_fields["offset"] == "0"
    stale = update(bk, 0, 3)
    assert (stale.code, stale.remark) == (0, "Offset has been previously reset")
    assert query(bk, 0).ext_fields["offset"] == "0"

    bk.heartbeat("rg", "RT")
    moved = bk.pull("rg", "RT", queue_id=0, offset=3)
    assert (moved.code, moved.remark) == (ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET")
    assert moved.ext_fields["nextBeginOffset"] == "0" and moved.ext_fields["maxOffset"] == "3"
    assert moved.body == b""
    # Taken once: the consumer's commit counts again and the next pull reads messages.
    assert update(bk, 0, 1).remark is None
    assert query(bk, 0).ext_fields["offset"] == "1"
    found = bk.pull("rg", "RT", queue_id=0, offset=0)
    assert found.code == 0 and found.ext_fields["nextBeginOffset"] == "3"
    # Queue 1 still holds its own reset.
    assert update(bk, 1, 3).remark == "Offset has been previously reset"
    assert bk.pull("rg", "RT", queue_id=1, offset=3).remark == "OFFSET_RESET"


def test_server_side_reset_refusals(bk):
    setup(bk, group=None)
    unknown_group = reset(bk, group="nobody")
    assert (unknown_group.code, unknown_group.remark) == (ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                                                          "Group nobody does not exist")
    unknown_topic = reset(bk, topic="NoSuchTopic")
    assert (unknown_topic.code, unknown_topic.remark) == (ResponseCode.TOPIC_NOT_EXIST,
                                                          "Topic NoSuchTopic does not exist")
    setup(bk, topic="RT", messages=0)  # creates the group
    out_of_range = reset(bk, queueId=1, offset=9)
    assert (out_of_range.code, out_of_range.remark) == (ResponseCode.SYSTEM_ERROR,
                                                        "Target offset 9 not in consume queue range [0-3]")
    assert bk.ctx.offsets.reset_offset_table == {}


def test_reset_of_one_queue_to_an_explicit_offset(bk):
    setup(bk)
    resp = reset(bk, queueId=1, offset=2)
    assert ResetOffsetBody.decode(resp.body).offset_table == {MessageQueue("RT", "broker-a", 1): 2}
    assert bk.ctx.offsets.reset_offset_table == {"RT@rg": {1: 2}}


def test_deleting_the_group_drops_its_pending_reset(bk):
    setup(bk)
    assert reset(bk).code == 0
    assert bk.call(C.DELETE_SUBSCRIPTIONGROUP, {"groupName": "rg", "cleanOffset": "true"}).code == 0
    assert bk.ctx.offsets.take_reset("rg", "RT", 0) is None


def test_piggy_backed_commit_of_the_reset_pull_is_overridden_by_the_client_adopting_the_reset(bk):
    """Apache commits a pull's piggy-backed offset even on the reset answer; the client then commits
    nextBeginOffset (the reset), which is accepted because the pull took the pending reset."""
    setup(bk, queues=1)
    update(bk, 0, 3)
    assert reset(bk).code == 0
    bk.heartbeat("rg", "RT")
    moved = bk.pull("rg", "RT", offset=3, sys_flag=int(PullSysFlag.COMMIT_OFFSET), commit_offset=3)
    assert moved.remark == "OFFSET_RESET"
    assert query(bk, 0).ext_fields["offset"] == "3"
    update(bk, 0, int(moved.ext_fields["nextBeginOffset"]))
    assert query(bk, 0).ext_fields["offset"] == "0"


# ---------------------------------------------------------------------------------------------- client push


def test_client_push_mode_refuses_a_group_without_stored_offsets(make_bk):
    bk = make_bk(useServerSideResetOffset=False)
    setup(bk, queues=1)
    consumer = FakeChannel("127.0.0.1:7100")
    bk.heartbeat("rg", "RT", channel=consumer)
    refused = reset(bk)
    assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, "THe consumer group <rg> not exist")
    assert consumer.sent == [] and bk.ctx.offsets.query("rg", "RT", 0) == -1


def test_client_push_mode_tells_the_online_consumers(make_bk):
    bk = make_bk(useServerSideResetOffset=False)
    setup(bk, topic="RT2", queues=1)
    bk.ctx.offsets.commit("rg", "RT2", 0, 3)
    offline = reset(bk, topic="RT2")
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
    assert offline.remark == "Consumer not online, so can not reset offset, Group: rg Topic: RT2 Timestamp: 0"
    consumer = FakeChannel("127.0.0.1:7100")
    bk.heartbeat("rg", "RT2", channel=consumer)
    resp = reset(bk, topic="RT2")
    assert resp.code == 0
    assert ResetOffsetBody.decode(resp.body).offset_table == {MessageQueue("RT2", "broker-a", 0): 0}
    # The consumers commit the new offset themselves; the broker keeps no pending reset.
    assert bk.ctx.offsets.query("rg", "RT2", 0) == 3 and bk.ctx.offsets.reset_offset_table == {}
    (pushed,) = [c for c in consumer.sent if c.code == C.RESET_CONSUMER_CLIENT_OFFSET]
    assert pushed.ext_fields["group"] == "rg" and b'{{"brokerName":"broker-a","queueId":0,"topic":"RT2"}:0}' in pushed.body
    # Not forced and later than the stored offset: the stored one is kept.
    bk.ctx.offsets.commit("rg", "RT2", 0, 1)
    later = reset(bk, topic="RT2", timestamp=-1, force=False)
    assert ResetOffsetBody.decode(later.body).offset_table == {MessageQueue("RT2", "broker-a", 0): 1}
    assert bk.pull("rg", "RT2", offset=3).remark != "OFFSET_RESET"
