"""Sends to a broker of this process (``BrokerAPI.local_brokers``): the client's request, answered by the
broker's request table without a socket, as the HTTP gateway served by a broker process publishes."""

from __future__ import annotations

import time

import pytest
from twisted.internet import defer

from ferrymq.remoting import RemotingTimeoutError
from ferrymq.remoting.local import LocalChannel, LocalPeer
from ferrymq.server.broker.processors.send import SendProcessor
from ferrymq.server.store.status import PutMessageStatus
from ferrymq.sdk.broker_api import BrokerAPI
from ferrymq.sdk.errors import MQResponseError
from ferrymq.sdk.message import SendStatus
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.errors import Refusal
from ferrymq.wire.headers import SendMessageRequestHeader
from ferrymq.wire.message import MessageExt, decode_record, encode_batch, encode_properties
from ferrymq.wire.msgid import parse_offset_msg_id

ADDR = "127.0.0.1:10911"


def _api(bk) -> BrokerAPI:
    api = BrokerAPI(client=None)  # every call here is answered in process: no connection is ever opened
    api.local_brokers[ADDR] = LocalPeer(bk.table, "10.1.2.3:0", clock=bk.clock)
    return api


def _header(topic: str, queue_id: int = 1, **props: str) -> SendMessageRequestHeader:
    return SendMessageRequestHeader(
        producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
        sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties=encode_properties(props),
        reconsume_times=0, unit_mode=False, batch=False, broker_name="broker-a")


def _result(d: defer.Deferred):
    out = []
    d.addBoth(out.append)
    assert out, "the in-process answer is synchronous for a stored message"
    return out[0]


def test_send_is_stored_and_answered_as_over_the_wire(bk):
    result = _result(_api(bk).send_message(ADDR, "broker-a", _header("LocalT", TAGS="a", UNIQ_KEY="C0FFEE"),
                                           b"payload", uniq_key="C0FFEE"))
    assert result.status is SendStatus.SEND_OK
    assert (result.msg_id, result.transaction_id) == ("C0FFEE", "C0FFEE")
    assert (result.message_queue.topic, result.message_queue.queue_id, result.queue_offset) == ("LocalT", 1, 0)
    _, phys = parse_offset_msg_id(result.offset_msg_id)
    msg, _ = decode_record(bk.store.select_one_message_by_offset(phys))
    assert (msg.body, msg.tags, msg.uniq_key) == (b"payload", "a", "C0FFEE")
    assert msg.born_host == ("10.1.2.3", 0)  # the in-process caller's address
    assert bk.ctx.topics.get("LocalT").write_queue_nums == 4  # auto-created as for a remote producer


def test_batch_goes_in_process_too(bk):
    body = encode_batch([(0, b"one", {"UNIQ_KEY": "A1"}), (0, b"two", {"UNIQ_KEY": "A2"})])
    header = _header("LocalB", queue_id=0)
    header.batch = True
    result = _result(_api(bk).send_message(ADDR, "broker-a", header, body, batch=True, uniq_key="A1,A2"))
    assert result.status is SendStatus.SEND_OK and result.queue_offset == 0
    assert bk.ctx.store.get_max_offset("LocalB", 0) == 2


def test_refusal_keeps_the_brokers_code_and_remark(make_bk):
    bk = make_bk(autoCreateTopicEnable=False)
    failure = _result(_api(bk).send_message(ADDR, "broker-a", _header("Nowhere"), b"x"))
    assert isinstance(failure.value, MQResponseError)
    assert failure.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert "topic[Nowhere] not exist" in failure.value.remark


def test_an_answer_that_does_not_come_times_out_as_a_remote_one(bk):
    bk.ctx.registration_pending = lambda _seconds: defer.Deferred()  # the name servers never answer
    d = _api(bk).send_message(ADDR, "broker-a", _header("Unregistered"), b"x", timeout=2.0)
    assert not d.called
    bk.clock.advance(2.5)
    with pytest.raises(RemotingTimeoutError):
        _result(d).raiseException()



# ---------------------------------------------------------------- SendProcessor.store: no request at all


def _ext(topic: str, body: bytes = b"payload", **props: str) -> MessageExt:
    return MessageExt(topic=topic, body=body, properties=dict(props), born_timestamp=int(time.time() * 1000),
                      born_host=("10.1.2.3", 0))


def _store(bk, msg: MessageExt, queue_of=lambda queues: 1):
    return SendProcessor(bk.ctx).store(msg, queue_of, "TBW102", 4, LocalChannel("10.1.2.3:0"))


def test_store_writes_the_record_a_send_request_writes(bk):
    props = {"mqttTopic": "Same/a", "TAGS": "a", "WAIT": "true", "region": "eu"}
    _result(_api(bk).send_message(ADDR, "broker-a", _header("Same", **props, UNIQ_KEY="C0FFEE"), b"payload"))
    queues = []
    result = _store(bk, _ext("Same", **props, UNIQ_KEY="C0FFEE"), lambda n: queues.append(n) or 1)
    assert result.status is PutMessageStatus.PUT_OK and result.queue_offset == 1 and queues == [4]
    sent, stored = (decode_record(bk.store.select_one_message_by_offset(
        bk.ctx.store.get_unit("Same", 1, offset)[0]))[0] for offset in (0, 1))
    assert stored.properties == sent.properties and list(stored.properties) == list(sent.properties)
    assert stored.properties["CLUSTER"] == "DefaultCluster"
    assert (stored.body, stored.flag, stored.sys_flag, stored.born_host, stored.queue_id) == \
        (sent.body, sent.flag, sent.sys_flag, sent.born_host, sent.queue_id)


def test_store_refuses_with_the_code_and_remark_a_send_is_answered(make_bk):
    bk = make_bk(autoCreateTopicEnable=False, maxMessageSize=16)
    answer = _result(_api(bk).send_message(ADDR, "broker-a", _header("Nowhere"), b"x")).value
    with pytest.raises(Refusal) as refused:
        _store(bk, _ext("Nowhere", b"x"))
    assert (refused.value.code, refused.value.remark) == (answer.code, answer.remark) == \
        (ResponseCode.TOPIC_NOT_EXIST, answer.remark)
    bk.ctx.topics.create_if_absent("Small", 4, 6)
    answer = _result(_api(bk).send_message(ADDR, "broker-a", _header("Small"), b"x" * 17)).value
    with pytest.raises(Refusal) as refused:
        _store(bk, _ext("Small", b"x" * 17))
    assert (refused.value.code, refused.value.remark) == (answer.code, answer.remark)
    assert answer.code == ResponseCode.MESSAGE_ILLEGAL
    assert bk.ctx.store.get_max_offset("Small", 1) == 0
