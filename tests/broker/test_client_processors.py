"""HEART_BEAT, consumer lists and notices, offsets, locks, send-back, message view and query."""

from __future__ import annotations

from tests.broker.conftest import FakeChannel
from ferrymq.wire.bodies import (
    CheckClientRequestBody,
    GetConsumerListByGroupResponseBody,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    SubscriptionData,
)
from ferrymq.wire.codes import CURRENT_VERSION, RequestCode, ResponseCode
from ferrymq.wire.message import decode_record, decode_records
from ferrymq.wire.msgid import parse_offset_msg_id

C = RequestCode


def test_heartbeat_registers_group_creates_retry_topic_and_answers_non_null_ext(bk):
    resp = bk.heartbeat("g1", "T")
    assert resp.code == 0 and resp.version == CURRENT_VERSION
    assert resp.ext_fields == {"IS_SUPPORT_HEART_BEAT_V2": "false", "IS_SUB_CHANGE": "true"}
    assert bk.ctx.topics.get("%RETRY%g1").read_queue_nums == 1
    assert bk.ctx.groups.get("g1").retry_max_times == 16
    assert bk.ctx.producers.connections("pg")[0].client_id == "c1"
    listed = bk.call(C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g1"})
    assert GetConsumerListByGroupResponseBody.decode(listed.body).consumer_id_list == ["c1"]


def test_membership_changes_notify_the_group(bk):
    a, b = FakeChannel("127.0.0.1:1"), FakeChannel("127.0.0.1:2")
    bk.heartbeat("g2", "T", channel=a, client_id="a")
    bk.heartbeat("g2", "T", channel=a, client_id="a")  # same member again: no notice
    bk.heartbeat("g2", "T", channel=b, client_id="b")
    assert bk.notified == [("g2", 1), ("g2", 2)]
    bk.call(C.UNREGISTER_CLIENT, {"clientID": "b", "consumerGroup": "g2"}, channel=b)
    assert bk.notified[-1] == ("g2", 1)
    bk.ctx.consumers.channel_closed(a)
    none = bk.call(C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "g2"})
    assert none.code == ResponseCode.SYSTEM_ERROR and none.remark == "no consumer for this group, g2"


def test_a_groups_sql92_filters_die_when_its_last_consumer_leaves(bk):
    a, b = FakeChannel("127.0.0.1:1"), FakeChannel("127.0.0.1:2")
    bk.heartbeat("g3", "T", channel=a, client_id="a")
    bk.heartbeat("g3", "T", channel=b, client_id="b")
    bk.ctx.filters.register("g3", "T", "a > 1", 1)
    bk.call(C.UNREGISTER_CLIENT, {"clientID": "b", "consumerGroup": "g3"}, channel=b)
    assert bk.ctx.filters.dead_since("g3", "T") is None  # one consumer is still there
    bk.ctx.consumers.channel_closed(a)
    assert bk.ctx.filters.dead_since("g3", "T") is not None


def test_heartbeat_with_garbage_body_is_an_error_for_that_client_only(bk):
    resp = bk.call(C.HEART_BEAT, None, b"{not json")
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert bk.heartbeat("g3", "T").code == 0


def test_check_client_config_refuses_sql92_unless_enabled(bk, make_bk):
    body = CheckClientRequestBody(client_id="c", group="g", subscription_data=SubscriptionData(
        topic="T", sub_string="a > 1", expression_type="SQL92")).encode()
    resp = bk.call(C.CHECK_CLIENT_CONFIG, None, body)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == "The broker does not support consumer to filter message by SQL92"
    tag = CheckClientRequestBody(group="g", subscription_data=SubscriptionData(topic="T", sub_string="*")).encode()
    assert bk.call(C.CHECK_CLIENT_CONFIG, None, tag).code == 0
    assert make_bk(enablePropertyFilter=True).call(C.CHECK_CLIENT_CONFIG, None, body).code == 0


def test_consumer_offsets_and_young_queue_rule(bk):
    q = {"consumerGroup": "g", "topic": "T", "queueId": 0}
    assert bk.call(C.QUERY_CONSUMER_OFFSET, q).code == ResponseCode.QUERY_NOT_FOUND  # empty queue
    bk.send("T")
    young = bk.call(C.QUERY_CONSUMER_OFFSET, q)
    assert young.code == 0 and young.ext_fields["offset"] == "0"
    assert bk.call(C.QUERY_CONSUMER_OFFSET, {**q, "setZeroIfNotFound": "false"}).code == ResponseCode.QUERY_NOT_FOUND
    assert bk.call(C.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 1}).code == ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST
    bk.heartbeat("g", "T")
    assert bk.call(C.UPDATE_CONSUMER_OFFSET, {**q, "topic": "Nope", "commitOffset": 1}).code == ResponseCode.TOPIC_NOT_EXIST
    assert bk.call(C.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 1}).code == 0
    assert bk.call(C.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "1"
    assert bk.ctx.offsets.changed


def test_queue_offsets_and_time_search(bk):
    for _ in range(3):
        bk.send("T")
    q = {"topic": "T", "queueId": 0}
    assert bk.call(C.GET_MAX_OFFSET, q).ext_fields["offset"] == "3"
    assert bk.call(C.GET_MIN_OFFSET, q).ext_fields["offset"] == "0"
    ts = int(bk.call(C.GET_EARLIEST_MSG_STORETIME, q).ext_fields["timestamp"])
    assert ts > 0
    assert bk.call(C.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": ts - 10_000}).ext_fields["offset"] == "0"
    assert bk.call(C.SEARCH_OFFSET_BY_TIMESTAMP, {**q, "timestamp": ts + 10_000}).ext_fields["offset"] == "3"
    assert bk.call(C.GET_MAX_OFFSET, {"topic": "T"}).code == ResponseCode.SYSTEM_ERROR  # queueId missing


def test_lock_batch_grants_free_queues_only(bk):
    mqs = [MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)]
    first = bk.call(C.LOCK_BATCH_MQ, None, LockBatchRequestBody("g", "c1", False, mqs).encode())
    assert set(LockBatchResponseBody.decode(first.body).lock_ok_mq_set) == set(mqs)
    second = bk.call(C.LOCK_BATCH_MQ, None, LockBatchRequestBody("g", "c2", False, mqs).encode())
    assert LockBatchResponseBody.decode(second.body).lock_ok_mq_set == []
    bk.call(C.UNLOCK_BATCH_MQ, None, LockBatchRequestBody("g", "c1", False, mqs[:1]).encode())
    third = bk.call(C.LOCK_BATCH_MQ, None, LockBatchRequestBody("g", "c2", False, mqs).encode())
    assert LockBatchResponseBody.decode(third.body).lock_ok_mq_set == mqs[:1]


def test_send_back_goes_to_retry_then_dlq(bk):
    sent = bk.send("T", b"payload", tags="TagA")
    _, phys = parse_offset_msg_id(sent.ext_fields["msgId"])
    back = {"offset": phys, "group": "g", "delayLevel": 0, "originMsgId": sent.ext_fields["msgId"], "originTopic": "T"}
    assert bk.call(C.CONSUMER_SEND_MSG_BACK, back).code == 0
    # delay level 3 + reconsumeTimes 0: parked in SCHEDULE_TOPIC_XXXX queue 2 for 10 s
    assert bk.store.get_max_offset("%RETRY%g", 0) == 0 and bk.store.get_max_offset("SCHEDULE_TOPIC_XXXX", 2) == 1
    assert bk.ctx.scheduler.tick() == 0
    bk.later_ms = 10_500
    assert bk.ctx.scheduler.tick() == 1
    got = bk.store.get_message("", "%RETRY%g", 0, 0, 32)
    retry = decode_records(got.body())[0]
    assert retry.body == b"payload" and retry.reconsume_times == 1
    assert retry.properties["RETRY_TOPIC"] == "T" and retry.properties["DELAY"] == "3"
    assert retry.properties["REAL_TOPIC"] == "%RETRY%g"
    assert retry.properties["ORIGIN_MESSAGE_ID"] == sent.ext_fields["msgId"]
    # maxReconsumeTimes reached -> DLQ
    back2 = {**back, "offset": retry.commitlog_offset, "maxReconsumeTimes": 1}
    assert bk.call(C.CONSUMER_SEND_MSG_BACK, back2).code == 0
    dlq = decode_records(bk.store.get_message("", "%DLQ%g", 0, 0, 32).body())[0]
    assert dlq.reconsume_times == 2 and dlq.properties["RETRY_TOPIC"] == "T"
    assert bk.call(C.CONSUMER_SEND_MSG_BACK, {**back, "offset": 123456}).code == ResponseCode.SYSTEM_ERROR


def test_view_by_id_and_query_by_key(bk):
    sent = bk.send("T", b"findme", keys="order-1 order-2")
    _, phys = parse_offset_msg_id(sent.ext_fields["msgId"])
    view = bk.call(C.VIEW_MESSAGE_BY_ID, {"offset": phys})
    assert decode_record(view.body)[0].body == b"findme"
    assert bk.call(C.VIEW_MESSAGE_BY_ID, {"offset": phys + 3}).code == ResponseCode.SYSTEM_ERROR
    q = {"topic": "T", "key": "order-2", "maxNum": 10, "beginTimestamp": 0, "endTimestamp": 2**62}
    found = bk.call(C.QUERY_MESSAGE, q)
    assert found.code == 0 and decode_records(found.body)[0].body == b"findme"
    assert int(found.ext_fields["indexLastUpdateTimestamp"]) > 0 and "indexLastUpdatePhyoffset" in found.ext_fields
    assert bk.call(C.QUERY_MESSAGE, {**q, "key": "nope"}).code == ResponseCode.QUERY_NOT_FOUND
