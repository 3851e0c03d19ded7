"""Hostile requests: every code the broker serves, with random header values and bodies, gets an answer
with a response code (never an exception), and the broker keeps serving normal requests afterwards."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.internet import defer

from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.message import decode_records

KEYS = ["topic", "queueId", "queueOffset", "consumerGroup", "group", "offset", "maxMsgNums", "sysFlag",
        "commitOffset", "suspendTimeoutMillis", "subVersion", "subscription", "expressionType", "delayLevel",
        "timestamp", "key", "maxNum", "beginTimestamp", "endTimestamp", "clientID", "producerGroup", "a", "b",
        "c", "d", "e", "f", "g", "h", "i", "j", "l", "readQueueNums", "writeQueueNums", "perm", "order",
        "topicFilterType", "defaultTopic", "groupName", "maxReconsumeTimes", "clientId", "isForce"]
VALUES = st.one_of(st.sampled_from(["", "0", "-1", "1", "99999999999999999999", "T", "%RETRY%", "true", "*",
                                    "TagA || TagB", "SQL92", "a b", "\x01\x02"]),
                   st.integers(-2**63, 2**63).map(str), st.text(max_size=20))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(code=st.sampled_from(sorted(RequestCode)), ext=st.dictionaries(st.sampled_from(KEYS), VALUES, max_size=12),
       body=st.one_of(st.just(b""), st.binary(max_size=64), st.just(b'{"mqSet":[{"topic":null}]}'),
                      st.just(b'{"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{}]}]}')))
def test_random_requests_always_get_an_answer(bk, caplog, code, ext, body):
    caplog.clear()
    resp = bk.call(code, ext, body)
    if isinstance(resp, defer.Deferred):  # a held pull: time it out
        bk.clock.advance(60)
        assert resp.called
        resp = resp.result
    assert resp is None or isinstance(resp.code, int)
    if resp is not None and resp.code == ResponseCode.SYSTEM_ERROR:
        assert resp.remark
    # bad input is rejected by the checks, not by a processor crashing on it
    assert "failed in its handler" not in caplog.text


def test_broker_still_serves_after_garbage(bk):
    for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE, RequestCode.HEART_BEAT,
                 RequestCode.SEND_BATCH_MESSAGE, RequestCode.CONSUMER_SEND_MSG_BACK, RequestCode.LOCK_BATCH_MQ):
        bk.call(code, {"b": "x", "topic": "T", "queueId": "nope"}, b"\xff" * 40)
    assert bk.send("Fine", b"ok").code == 0
    pulled = bk.pull("g", "Fine", sys_flag=4, subscription="*")
    assert [m.body for m in decode_records(pulled.body)] == [b"ok"]
