"""POP_MESSAGE, ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, QUERY_ASSIGNMENT and SET_MESSAGE_REQUEST_MODE
through the broker's dispatch, with the handles built the way the Java client builds them."""

from __future__ import annotations

import base64
import json

import pytest

from ferrymq.server.broker.processors.pop import allocate_averagely, allocate_by_circle
from ferrymq.wire.bodies import (
    BatchAck,
    BatchAckMessageRequestBody,
    QueryAssignmentRequestBody,
    SetMessageRequestModeRequestBody,
)
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.message import MessageConst, decode_records

from .conftest import FakeChannel

G, T = "pop-group", "PopTopic"


def pop(bk, queue_id=-1, n=32, invisible=3000, poll=0, init_mode=0, **extra):
    ext = {"consumerGroup": G, "topic": T, "queueId": queue_id, "maxMsgNums": n, "invisibleTime": invisible,
           "pollTime": poll, "bornTime": 0, "initMode": init_mode, **extra}
    return bk.call(RequestCode.POP_MESSAGE, ext)


def java_handles(bk, response) -> list[tuple[str, object]]:
    """(real topic, extraInfo) per message, as MQClientAPIImpl.processPopResponse and ackAsync compose them."""
    h = response.ext_fields
    starts = {tuple(p.split(" ")[:2]): p.split(" ")[2] for p in h["startOffsetInfo"].split(";")}
    out = []
    for msg in decode_records(response.body):
        ck = msg.properties.get(MessageConst.POP_CK)
        if ck is None:
            start = starts[("0", str(msg.queue_id))]
            ck = " ".join([start, h["popTime"], h["invisibleTime"], h["reviveQid"], "0", "broker-a",
                           str(msg.queue_id), str(msg.queue_offset)])
        mark = ck.split(" ")[4]
        real = T if mark == "0" else f"%RETRY%{G}_{T}"
        out.append((real, ck, msg))
    return out


def ack(bk, real, ck):
    parts = ck.split(" ")
    return bk.call(RequestCode.ACK_MESSAGE, {"consumerGroup": G, "topic": real, "queueId": parts[6],
                                             "extraInfo": ck, "offset": parts[7]})


@pytest.fixture
def topic(bk):
    bk.send(T, b"m0")
    return bk


def test_pop_ack_and_retry_round_trip(topic):
    bk = topic
    r = pop(bk)
    assert r.code == ResponseCode.SUCCESS
    ((real, ck, msg),) = java_handles(bk, r)
    assert msg.body == b"m0" and real == T
    assert pop(bk).code == ResponseCode.POLLING_TIMEOUT  # invisible now
    bk.clock.advance(3.1)
    bk.ctx.pop.revive()
    again = pop(bk)
    ((real, ck, msg),) = java_handles(bk, again)
    assert (msg.topic, msg.reconsume_times, real) == (T, 1, f"%RETRY%{G}_{T}")
    assert ack(bk, real, ck).code == ResponseCode.SUCCESS
    bk.clock.advance(10)
    bk.ctx.pop.revive()
    assert pop(bk).code == ResponseCode.POLLING_TIMEOUT


def test_batch_ack_acks_the_offsets_of_its_bit_set(bk):
    for i in range(3):
        bk.send(T, f"b{i}".encode())
    r = pop(bk, queue_id=0)
    handles = java_handles(bk, r)
    start, pop_time, invisible = (int(x) for x in handles[0][1].split(" ")[:3])
    acked = [m.queue_offset for _real, _ck, m in handles[::2]]  # the first and the third
    bits = sum(1 << (o - start) for o in acked).to_bytes(1, "little")
    batch = BatchAckMessageRequestBody(broker_name="broker-a", acks=[BatchAck(
        consumer_group=G, topic=T, retry="0", start_offset=start, queue_id=0, revive_queue_id=0,
        pop_time=pop_time, invisible_time=invisible, bit_set=base64.b64encode(bits).decode())])
    assert json.loads(batch.encode())["acks"][0]["so"] == start  # Apache's short keys
    assert bk.call(RequestCode.BATCH_ACK_MESSAGE, body=batch.encode()).code == 0
    bk.clock.advance(3.1)
    bk.ctx.pop.revive()
    assert [m.body for m in decode_records(pop(bk).body)] == [b"b1"]


def test_change_invisible_answers_the_new_pop_time(topic):
    bk = topic
    ((real, ck, _msg),) = java_handles(bk, pop(bk))
    bk.clock.advance(1)
    parts = ck.split(" ")
    r = bk.call(RequestCode.CHANGE_MESSAGE_INVISIBLETIME, {
        "consumerGroup": G, "topic": real, "queueId": parts[6], "extraInfo": ck, "offset": parts[7],
        "invisibleTime": 10000})
    assert r.code == 0 and r.ext_fields["invisibleTime"] == "10000" and r.ext_fields["popTime"] == "1000"
    bk.clock.advance(5)
    bk.ctx.pop.revive()
    assert pop(bk).code == ResponseCode.POLLING_TIMEOUT


def test_long_polling_pop_answers_on_arrival(topic):
    bk = topic
    pop(bk)
    d = pop(bk, poll=5000)
    assert not d.called
    bk.send(T, b"m1", queue_id=1)
    assert d.called and d.result.code == 0
    assert [m.body for m in decode_records(d.result.body)] == [b"m1"]


def test_held_pop_of_a_closed_connection_takes_nothing(topic):
    bk = topic
    pop(bk)
    gone = FakeChannel(remote_address="127.0.0.1:50002")
    ext = {"consumerGroup": G, "topic": T, "queueId": -1, "maxMsgNums": 32, "invisibleTime": 3000,
           "pollTime": 5000, "bornTime": 0, "initMode": 0}
    held = bk.call(RequestCode.POP_MESSAGE, ext, channel=gone)
    gone.close()
    bk.send(T, b"m1")
    assert held.called and held.result.code == ResponseCode.POLLING_TIMEOUT
    assert [m.body for m in decode_records(pop(bk).body)] == [b"m1"]


def test_fifo_pop_sets_order_count_info(topic):
    bk = topic
    r = pop(bk, queue_id=0, invisible=1000, order="true")
    assert r.ext_fields["reviveQid"] == "999"
    bk.clock.advance(1.1)
    bk.ctx.pop.revive()
    again = pop(bk, queue_id=0, order="true")
    assert "0 qo0%0 1" in again.ext_fields["orderCountInfo"]


def test_refusals(topic):
    bk = topic
    assert pop(bk, n=33).code == ResponseCode.INVALID_PARAMETER
    r = bk.call(RequestCode.POP_MESSAGE, {"consumerGroup": G, "topic": "Nope", "queueId": -1, "maxMsgNums": 1,
                                          "invisibleTime": 1, "pollTime": 0, "bornTime": 0, "initMode": 0})
    assert r.code == ResponseCode.TOPIC_NOT_EXIST
    r = bk.call(RequestCode.ACK_MESSAGE, {"consumerGroup": G, "topic": T, "queueId": 0, "extraInfo": "garbage",
                                          "offset": 0})
    assert r.code == ResponseCode.SYSTEM_ERROR


def assignment(bk, client_id="c1", strategy="AVG"):
    body = QueryAssignmentRequestBody(topic=T, consumer_group=G, client_id=client_id, strategy_name=strategy,
                                      message_model="CLUSTERING")
    r = bk.call(RequestCode.QUERY_ASSIGNMENT, body=body.encode())
    assert r.code == 0
    return json.loads(r.body)["messageQueueAssignments"]


def test_set_consume_mode_switches_query_assignment_to_pop(topic):
    bk = topic
    bk.heartbeat(G, T, client_id="c1")
    pulled = assignment(bk)
    assert {a["mode"] for a in pulled} == {"PULL"} and sorted(a["messageQueue"]["queueId"] for a in pulled) == [0, 1, 2, 3]
    mode = SetMessageRequestModeRequestBody(topic=T, consumer_group=G, mode="POP", pop_share_queue_num=0)
    assert bk.call(RequestCode.SET_MESSAGE_REQUEST_MODE, body=mode.encode()).code == 0
    popped = assignment(bk)
    assert popped == [{"messageQueue": {"brokerName": "broker-a", "queueId": -1, "topic": T}, "mode": "POP"}]
    saved = bk.ctx.request_modes.to_json_obj()
    assert saved["messageRequestModeMap"][T][G]["mode"] == "POP"


def test_set_consume_mode_refusals(topic):
    bk = topic
    for topic_name, code in (("%RETRY%x", ResponseCode.NO_PERMISSION), ("Nope", ResponseCode.TOPIC_NOT_EXIST)):
        body = SetMessageRequestModeRequestBody(topic=topic_name, consumer_group=G, mode="POP")
        assert bk.call(RequestCode.SET_MESSAGE_REQUEST_MODE, body=body.encode()).code == code


def test_allocation_strategies_match_apache():
    mqs = list(range(5))
    cids = ["a", "b"]
    assert allocate_averagely(mqs, cids, "a") == [0, 1, 2] and allocate_averagely(mqs, cids, "b") == [3, 4]
    assert allocate_by_circle(mqs, cids, "a") == [0, 2, 4] and allocate_by_circle(mqs, cids, "b") == [1, 3]
    assert allocate_averagely(mqs, cids, "zz") == []
