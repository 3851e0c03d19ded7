"""Push consumer decisions against scripted servers: start-up requests, reactions to broker requests,
and the send-back fallback of RECONSUME_LATER."""

from __future__ import annotations

import time

import pytest

from ferrymq.sdk import reactor_thread
from ferrymq.sdk.blocking_clients import BlockingPushConsumer
from ferrymq.sdk.client_config import ClientConfig
from ferrymq.sdk.consumer import ConsumeConcurrentlyStatus
from ferrymq.wire.bodies import ConsumerRunningInfo, HeartbeatData, MessageQueue
from ferrymq.wire.codes import PullSysFlag, RequestCode, ResponseCode
from ferrymq.wire.command import request
from ferrymq.wire.requests import decode_request_header
from ferrymq.wire.message import build_record, decode_properties

from .fake_cluster import FakeBroker, FakeNamesrv


@pytest.fixture
def cluster():
    ns, a = FakeNamesrv(), FakeBroker("broker-a")
    ns.set_route("T", [a], queues=2)
    yield ns, a
    ns.stop()
    a.stop()


def start_consumer(ns, listener=lambda msgs, ctx: None, **kwargs) -> BlockingPushConsumer:
    config = ClientConfig(ns.addr, poll_name_server_interval=0.5, heartbeat_broker_interval=0.5,
                          persist_consumer_offset_interval=0.3, rebalance_interval=60)
    c = BlockingPushConsumer("cg", config=config, pull_time_delay_when_exception=0.2, **kwargs)
    c.subscribe("T", "TagA || TagB")
    c.register_listener(listener)
    c.start()
    return c


def owned(c: BlockingPushConsumer) -> set:
    return reactor_thread.call(lambda: set(c.wrapped.rebalancer.pq_table))


def wait_until(pred, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_start_heartbeats_rebalances_and_long_polls(cluster):
    ns, a = cluster
    c = start_consumer(ns)
    try:
        (hb, *_) = a.wait_for(RequestCode.HEART_BEAT)
        data = HeartbeatData.decode(hb.body)
        (cd,) = data.consumer_data_set
        subs = {s.topic: s for s in cd.subscription_data_set}
        assert cd.group_name == "cg" and cd.consume_type == "CONSUME_PASSIVELY" and cd.message_model == "CLUSTERING"
        assert set(subs) == {"T", "%RETRY%cg"} and subs["%RETRY%cg"].sub_string == "*"
        assert subs["T"].tags_set == ["TagA", "TagB"]
        pulls = a.wait_for(RequestCode.PULL_MESSAGE, 2)
        headers = [decode_request_header(p) for p in pulls]
        assert {h.queue_id for h in headers} == {0, 1}
        for h in headers:
            assert h.sys_flag & PullSysFlag.SUSPEND and not h.sys_flag & PullSysFlag.SUBSCRIPTION
            assert h.subscription is None, "push consumers rely on the heartbeat's subscription"
            assert h.sub_version == subs["T"].sub_version and h.suspend_timeout_millis == 15000
            assert h.queue_offset == 0 and h.consumer_group == "cg"
        assert len(a.of(RequestCode.QUERY_CONSUMER_OFFSET)) >= 2
    finally:
        c.shutdown()
    (unreg,) = a.wait_for(RequestCode.UNREGISTER_CLIENT)
    assert unreg.ext("consumerGroup") == "cg"


def test_notify_consumer_ids_changed_rebalances_at_once(cluster):
    ns, a = cluster
    c = start_consumer(ns)
    try:
        wait_until(lambda: len(owned(c)) == 2, "both queues owned")
        before = len(a.of(RequestCode.GET_CONSUMER_LIST_BY_GROUP))
        a.consumer_ids.append("0.0.0.0@another")  # sorts first: it takes queue 0
        channel = a.channels[-1]
        reactor_thread.call(channel.invoke_oneway,
                            request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "cg"}))
        wait_until(lambda: owned(c) == {MessageQueue("T", "broker-a", 1)}, "queue 0 released")
        assert len(a.of(RequestCode.GET_CONSUMER_LIST_BY_GROUP)) > before
        # the released queue's offset is persisted (a oneway request: it may land just after the release)
        wait_until(lambda: any(decode_request_header(r).queue_id == 0 for r in a.of(RequestCode.UPDATE_CONSUMER_OFFSET)),
                   "the released queue's offset is persisted")
    finally:
        c.shutdown()


def test_running_info_is_answered(cluster):
    ns, a = cluster
    c = start_consumer(ns)
    try:
        wait_until(lambda: len(owned(c)) == 2, "both queues owned")
        channel = a.channels[-1]
        cmd = request(RequestCode.GET_CONSUMER_RUNNING_INFO,
                      {"consumerGroup": "cg", "clientId": "x", "jstackEnable": "false"})
        resp = reactor_thread.call(channel.invoke, cmd, 3.0)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        info = ConsumerRunningInfo.decode(resp.body)
        assert info.properties["PROP_CONSUME_TYPE"] == "CONSUME_PASSIVELY"
        assert {s.topic for s in info.subscription_set} == {"T", "%RETRY%cg"}
        assert set(info.mq_table) == {MessageQueue("T", "broker-a", 0), MessageQueue("T", "broker-a", 1)}
        other = request(RequestCode.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "nope", "clientId": "x"})
        assert reactor_thread.call(channel.invoke, other, 3.0).code == ResponseCode.SYSTEM_ERROR
    finally:
        c.shutdown()


def test_reconsume_later_falls_back_to_resending_to_the_retry_topic(cluster):
    ns, a = cluster
    ns.set_route("%RETRY%cg", [a], queues=1)
    port = int(a.addr.rsplit(":", 1)[1])
    served = set()

    def pull(cmd, ch):
        h = decode_request_header(cmd)
        if h.topic != "T" or h.queue_id != 0 or (h.topic, h.queue_id) in served:
            from twisted.internet import defer

            return defer.Deferred()
        served.add((h.topic, h.queue_id))
        records = b"".join(
            bytes(build_record("T", body, {"TAGS": tag, "UNIQ_KEY": f"{i:032X}"}, queue_id=0, queue_offset=i,
                               commitlog_offset=1000 + i, store_host=("127.0.0.1", port)))
            for i, (body, tag) in enumerate([(b"keep", "TagA"), (b"filtered", "TagC"), (b"fail", "TagB")])
        )
        ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": "3", "minOffset": "0", "maxOffset": "3"}
        return cmd.response(ResponseCode.SUCCESS, "FOUND", ext, records)

    a.handlers[RequestCode.PULL_MESSAGE] = pull
    a.handlers[RequestCode.CONSUMER_SEND_MSG_BACK] = lambda cmd, ch: cmd.response(ResponseCode.SYSTEM_ERROR, "no")
    seen = []

    def listener(msgs, ctx):
        seen.extend(m.body for m in msgs)
        return ConsumeConcurrentlyStatus.RECONSUME_LATER if msgs[0].body == b"fail" else None

    c = start_consumer(ns, listener)
    try:
        (back,) = a.wait_for(RequestCode.CONSUMER_SEND_MSG_BACK)
        hb = decode_request_header(back)
        assert (hb.offset, hb.group, hb.delay_level, hb.origin_topic) == (1002, "cg", 0, "T")
        assert hb.max_reconsume_times == 16
        resend = next(r for r in a.wait_for(RequestCode.SEND_MESSAGE_V2) if decode_request_header(r).topic == "%RETRY%cg")
        h = decode_request_header(resend)
        props = decode_properties(h.properties)
        assert resend.body == b"fail" and h.reconsume_times == 1 and h.max_reconsume_times == 16
        assert props["RETRY_TOPIC"] == "T" and props["DELAY"] == "3" and props["ORIGIN_MESSAGE_ID"] == f"{2:032X}"
        assert sorted(seen) == [b"fail", b"keep"], f"TagC is re-filtered on the client: {seen}"

        def committed():
            return [decode_request_header(r).commit_offset for r in a.of(RequestCode.UPDATE_CONSUMER_OFFSET)
                    if decode_request_header(r).queue_id == 0]

        wait_until(lambda: 3 in committed(), "offset 3 committed for queue 0")
    finally:
        c.shutdown()


def test_offset_moved_stores_the_new_offset_and_restarts_the_queue_there(cluster):
    ns, a = cluster
    ns.set_route("T", [a], queues=1)

    def pull(cmd, ch):
        h = decode_request_header(cmd)
        if h.queue_offset != 5:
            ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": "5", "minOffset": "5", "maxOffset": "9"}
            return cmd.response(ResponseCode.PULL_OFFSET_MOVED, "OFFSET_TOO_SMALL", ext)
        from twisted.internet import defer

        return defer.Deferred()

    a.handlers[RequestCode.PULL_MESSAGE] = pull
    c = start_consumer(ns)
    try:
        wait_until(lambda: any(decode_request_header(p).queue_offset == 5 for p in a.of(RequestCode.PULL_MESSAGE)),
                   "a pull at the moved-to offset 5")
        assert a.offsets[("cg", "T", 0)] == 5, "the new offset is committed before the queue restarts"
        moved = [u for u in a.of(RequestCode.UPDATE_CONSUMER_OFFSET) if u.ext("commitOffset") == "5"]
        assert any(not u.is_oneway for u in moved), "the moved offset is written synchronously"
    finally:
        c.shutdown()


def test_sql92_refused_by_the_broker_fails_start(cluster):
    ns, a = cluster
    a.handlers[RequestCode.CHECK_CLIENT_CONFIG] = lambda cmd, ch: cmd.response(
        ResponseCode.SYSTEM_ERROR, "The broker does not support consumer to filter message by SQL92")
    config = ClientConfig(ns.addr)
    c = BlockingPushConsumer("cg", config=config)
    c.subscribe("T", "a > 1", "SQL92")
    c.register_listener(lambda msgs, ctx: None)
    from ferrymq.sdk.client_instance import MQClientError

    with pytest.raises(MQClientError, match="does not support consumer to filter message by SQL92"):
        c.start()
    body = a.of(RequestCode.CHECK_CLIENT_CONFIG)[0].body
    assert b'"expressionType":"SQL92"' in body and b'"subString":"a > 1"' in body
    assert not a.of(RequestCode.PULL_MESSAGE), "no pulls after a refused start"


def test_reset_consumer_client_offset_restarts_the_queue_at_the_given_offset(cluster):
    from ferrymq.wire.bodies import ResetOffsetBody

    ns, a = cluster
    ns.set_route("T", [a], queues=1)
    c = start_consumer(ns)
    try:
        mq = MessageQueue("T", "broker-a", 0)
        wait_until(lambda: owned(c) == {mq}, "the queue owned")
        ext = {"topic": "T", "group": "cg", "timestamp": "0", "isForce": "true"}
        cmd = request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, ext, ResetOffsetBody({mq: 7}).encode())
        reactor_thread.call(a.channels[-1].invoke_oneway, cmd)
        wait_until(lambda: any(decode_request_header(p).queue_offset == 7 for p in a.of(RequestCode.PULL_MESSAGE)),
                   "a pull from the reset offset 7")
        assert a.offsets[("cg", "T", 0)] == 7
    finally:
        c.shutdown()


def test_twisted_native_api_inside_the_reactor(cluster):
    """The Deferred API used from reactor code directly (no blocking facade)."""
    from twisted.internet import defer

    from ferrymq.sdk import Message, Producer

    ns, a = cluster

    @defer.inlineCallbacks
    def scenario():
        p = Producer("native_pg", ns.addr)
        yield p.start()
        try:
            results = yield defer.gatherResults([p.send(Message("T", f"m{i}".encode())) for i in range(5)])
        finally:
            yield p.shutdown()
        return results

    results = reactor_thread.call(scenario)
    assert len({r.offset_msg_id for r in results}) == 5 and all(r.status.value == "SEND_OK" for r in results)


def test_orderly_suspend_redelivers_in_place_then_hands_over_to_the_dlq(cluster):
    from twisted.internet import defer

    from ferrymq.sdk.consumer import ConsumeOrderlyStatus

    ns, a = cluster
    ns.set_route("T", [a], queues=1)
    ns.set_route("%RETRY%cg", [a], queues=1)
    port = int(a.addr.rsplit(":", 1)[1])
    served = []

    def pull(cmd, ch):
        h = decode_request_header(cmd)
        if h.topic != "T" or served:
            return defer.Deferred()
        served.append(h)
        record = build_record("T", b"stuck", {"TAGS": "TagA", "UNIQ_KEY": "CD" * 16}, queue_offset=0,
                              commitlog_offset=77, store_host=("127.0.0.1", port))
        ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1"}
        return cmd.response(ResponseCode.SUCCESS, "FOUND", ext, bytes(record))

    a.handlers[RequestCode.PULL_MESSAGE] = pull
    attempts = []

    def listener(msgs, ctx):
        attempts.append(msgs[0].reconsume_times)
        return ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT

    config = ClientConfig(ns.addr, persist_consumer_offset_interval=0.2, rebalance_interval=60)
    c = BlockingPushConsumer("cg", config=config, max_reconsume_times=1, suspend_current_queue_time=0.05)
    c.subscribe("T", "*")
    c.register_listener(listener, orderly=True)
    c.start()
    try:
        locks = a.wait_for(RequestCode.LOCK_BATCH_MQ)
        assert b'"topic":"T"' in b"".join(r.body for r in locks), "the queue is locked before it is consumed"
        sent = next(r for r in a.wait_for(RequestCode.SEND_MESSAGE_V2) if decode_request_header(r).topic == "%RETRY%cg")
        h = decode_request_header(sent)
        assert attempts == [0, 1], f"delivered in place once more before giving up: {attempts}"
        assert h.reconsume_times == 2 and h.max_reconsume_times == 1, "over the maximum: the broker DLQs it"
        assert decode_properties(h.properties)["RETRY_TOPIC"] == "T"
        wait_until(lambda: a.offsets.get(("cg", "T", 0)) == 1, "offset committed past the handed-over message")
    finally:
        c.shutdown()


def test_consume_message_directly_runs_the_listener(cluster):
    from ferrymq.wire.bodies import ConsumeMessageDirectlyResult

    ns, a = cluster
    seen = []
    c = start_consumer(ns, lambda msgs, ctx: seen.extend(m.body for m in msgs))
    try:
        wait_until(lambda: len(owned(c)) == 2, "both queues owned")
        record = build_record("T", b"direct", {"TAGS": "TagA"}, store_host=("127.0.0.1", 10911))
        ext = {"consumerGroup": "cg", "clientId": "x", "msgId": "m", "brokerName": "broker-a"}
        resp = reactor_thread.call(a.channels[-1].invoke, request(RequestCode.CONSUME_MESSAGE_DIRECTLY, ext,
                                                                  bytes(record)), 3.0)
        assert resp.code == ResponseCode.SUCCESS, resp.remark
        result = ConsumeMessageDirectlyResult.decode(resp.body)
        assert result.consume_result == "CR_SUCCESS" and not result.order
        assert b"direct" in seen
    finally:
        c.shutdown()


@pytest.mark.parametrize("where, code, expected_offset", [
    ("CONSUME_FROM_LAST_OFFSET", RequestCode.GET_MAX_OFFSET, 40),
    ("CONSUME_FROM_FIRST_OFFSET", None, 0),
    ("CONSUME_FROM_TIMESTAMP", RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, 17),
])
def test_consume_from_where_applies_when_the_group_has_no_offset(cluster, where, code, expected_offset):
    ns, a = cluster
    ns.set_route("T", [a], queues=1)
    a.handlers[RequestCode.QUERY_CONSUMER_OFFSET] = lambda cmd, ch: cmd.response(ResponseCode.QUERY_NOT_FOUND, "none")
    a.handlers[RequestCode.GET_MAX_OFFSET] = lambda cmd, ch: cmd.response(ResponseCode.SUCCESS, None, {"offset": "40"})
    a.handlers[RequestCode.SEARCH_OFFSET_BY_TIMESTAMP] = lambda cmd, ch: cmd.response(
        ResponseCode.SUCCESS, None, {"offset": "17"})
    c = start_consumer(ns, consume_from_where=where, consume_timestamp="20260102030405")
    try:
        wait_until(lambda: any(decode_request_header(p).topic == "T" for p in a.of(RequestCode.PULL_MESSAGE)),
                   "the first pull")
        first = next(decode_request_header(p) for p in a.of(RequestCode.PULL_MESSAGE)
                     if decode_request_header(p).topic == "T")
        assert first.queue_offset == expected_offset
        if code == RequestCode.SEARCH_OFFSET_BY_TIMESTAMP:
            (search,) = a.of(code)
            expected_ms = int(time.mktime((2026, 1, 2, 3, 4, 5, 0, 0, -1)) * 1000)  # local time, as Java parses it
            assert int(search.ext("timestamp")) == expected_ms
        elif code is not None:
            assert a.of(code)
        else:
            assert not a.of(RequestCode.GET_MAX_OFFSET) and not a.of(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP)
    finally:
        c.shutdown()


def test_a_pull_held_across_a_widened_subscription_keeps_what_the_new_one_selects(cluster):
    """The broker answers a held pull after the consumer re-subscribed `*` (it got the heartbeat by then):
    the TagC message, which the old `TagA || TagB` would filter out, reaches the listener instead of being
    skipped for good."""
    from twisted.internet import defer

    ns, a = cluster
    ns.set_route("T", [a], queues=1)
    port = int(a.addr.rsplit(":", 1)[1])
    held: list[tuple[defer.Deferred, object]] = []

    def pull(cmd, ch):
        d = defer.Deferred()
        if decode_request_header(cmd).queue_offset == 0:
            held.append((d, cmd))
        return d

    a.handlers[RequestCode.PULL_MESSAGE] = pull
    seen = []
    c = start_consumer(ns, lambda msgs, ctx: seen.extend(m.body for m in msgs))
    try:
        wait_until(lambda: held, "a held pull")
        c.subscribe("T", "*")
        wait_until(lambda: any(s.sub_string == "*" for hb in a.of(RequestCode.HEART_BEAT)
                               for cd in HeartbeatData.decode(hb.body).consumer_data_set
                               for s in cd.subscription_data_set if s.topic == "T"), "the widened heartbeat")
        record = build_record("T", b"widened", {"TAGS": "TagC", "UNIQ_KEY": f"{0:032X}"}, queue_id=0, queue_offset=0,
                              commitlog_offset=1000, store_host=("127.0.0.1", port))
        ext = {"suggestWhichBrokerId": "0", "nextBeginOffset": "1", "minOffset": "0", "maxOffset": "1"}
        d, cmd = held[0]
        reactor_thread.call(d.callback, cmd.response(ResponseCode.SUCCESS, "FOUND", ext, bytes(record)))
        wait_until(lambda: seen == [b"widened"], "the TagC message consumed")
    finally:
        c.shutdown()
