"""What a gateway publishes, stored by the broker of its process without a request (gateways/store_send.py):
each outcome beside the one the same send gets as a request through the broker's request table."""

from __future__ import annotations

import os

import pytest

from ferrymq.gateways.mqtt import mapping
from ferrymq.gateways.mqtt.packets import Publish
from ferrymq.gateways.store_send import StoreSend
from ferrymq.remoting.errors import ResponseCodeError
from ferrymq.remoting.local import LocalPeer
from ferrymq.sdk.client_config import ClientConfig
from ferrymq.sdk.client_instance import ClientInstance
from ferrymq.sdk.message import Message, SendStatus
from ferrymq.sdk.producer import Producer, select_by_hash
from ferrymq.sdk.route import TopicPublishInfo
from ferrymq.server.broker.processors.send import SendProcessor
from ferrymq.server.broker.service import LiveTable
from ferrymq.server.ha.roles import IN_SYNC_REPLICAS_REMARK, with_replicas_short
from ferrymq.server.store.status import PutMessageResult, PutMessageStatus
from ferrymq.wire.bodies import MessageQueue
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.message import MessageConst, MessageExt, decode_record
from ferrymq.wire.msgid import parse_offset_msg_id

from tests.broker.conftest import Bk

HERE, THERE = "127.0.0.1:10911", "127.0.0.1:20911"


@pytest.fixture
def brokers(tmp_path):
    """This process's broker (no topic auto-creation) and another of the cluster, both answered in process."""
    here = Bk(tmp_path / "a", autoCreateTopicEnable=False, maxMessageSize=4096)
    there = Bk(tmp_path / "b")
    there.config.brokerName = "broker-b"
    yield here, there
    here.close()
    there.close()


def _producer(here: Bk, there: Bk, group: str = "FERRYMQ_MQTT_PRODUCER") -> Producer:
    instance = ClientInstance(ClientConfig("127.0.0.1:9876"))  # no name server is asked: routes are set below
    for bk, addr in ((here, HERE), (there, THERE)):
        instance.api.local_brokers[addr] = LocalPeer(LiveTable(bk), "127.0.0.1:0", clock=bk.clock)
        instance.broker_addrs[bk.config.brokerName] = {0: addr}
    producer = Producer(group, config=instance.config, instance=instance)
    producer.started = True
    producer.publish_table["elsewhere"] = TopicPublishInfo([MessageQueue("elsewhere", "broker-b", 0)],
                                                           have_route=True)
    return producer


def _sender(here: Bk, there: Bk) -> StoreSend:
    return StoreSend(SendProcessor(here.ctx), LiveTable(here), HERE, "127.0.0.1:0", _producer(here, there),
                     reactor=here.clock)


def _publish(topic_name: str, payload: bytes = b"reading"):
    message = mapping.to_rocketmq(Publish(topic_name=topic_name, payload=payload, qos=1, packet_identifier=1), 0, "d1")
    return message, message.properties[mapping.MQTT_TOPIC]


def _outcome(d):
    out = []
    d.addBoth(out.append)
    assert out, "an ASYNC_FLUSH put and an in-process send answer at once"
    return out[0]


def _stored(bk: Bk, offset_msg_id: str):
    _, phys = parse_offset_msg_id(offset_msg_id)
    return decode_record(bk.store.select_one_message_by_offset(phys))[0]


# ---------------------------------------------------------------------- the MQTT gateway's orderly sends


def test_stored_here_in_the_queue_the_producers_selector_picks(brokers):
    here, there = brokers
    here.ctx.topics.create_if_absent("sensors", 8, 6)
    message, key = _publish("sensors/room1/temp")
    result = _outcome(_sender(here, there).send_orderly(message, key))
    queue = select_by_hash(list(range(8)), message, key)
    assert (result.message_queue.queue_id, result.queue_offset) == (queue, 0)
    assert here.ctx.store.get_max_offset("sensors", queue) == 1
    stored, _ = decode_record(here.store.select_one_message_by_offset(here.ctx.store.get_unit("sensors", queue, 0)[0]))
    assert (stored.body, stored.tags, stored.properties["mqttTopic"]) == (b"reading", "room1/temp", "sensors/room1/temp")
    assert stored.properties["UNIQ_KEY"] == message.uniq_key == result.msg_id


def test_without_an_answer_the_outcome_is_the_stores_put_of_the_same_record(brokers):
    here, there = brokers
    here.ctx.topics.create_if_absent("sensors", 8, 6)
    message, key = _publish("sensors/room1/temp")
    put = _sender(here, there).store_orderly(message, key, answer=False)
    assert isinstance(put, PutMessageResult) and put.status is PutMessageStatus.PUT_OK
    queue = select_by_hash(list(range(8)), message, key)
    assert here.ctx.store.get_unit("sensors", queue, put.queue_offset)[0] == put.commitlog_offset
    assert _stored(here, put.msg_id).properties["UNIQ_KEY"] == message.uniq_key


def test_a_topic_this_broker_does_not_have_goes_by_route(brokers):
    here, there = brokers
    there.ctx.topics.create_if_absent("elsewhere", 1, 6)
    message, key = _publish("elsewhere/x")
    result = _outcome(_sender(here, there).send_orderly(message, key))
    assert result.message_queue.broker_name == "broker-b"
    assert there.ctx.store.get_max_offset("elsewhere", 0) == 1 and "elsewhere" not in here.ctx.topics


def test_a_refusal_fails_as_the_producers_send_would(brokers):
    here, there = brokers
    here.ctx.topics.create_if_absent("sensors", 4, 6)
    message, key = _publish("sensors/big", os.urandom(6000))  # still over the limit once compressed
    failure = _outcome(_sender(here, there).send_orderly(message, key))
    assert isinstance(failure.value, ResponseCodeError)
    assert failure.value.code == ResponseCode.MESSAGE_ILLEGAL and "msg body length limit 4096B" in failure.value.remark


def test_a_master_short_of_in_sync_replicas_refuses_as_it_refuses_a_send_request(brokers):
    """The controller swaps a master's request table while its sync state set is smaller than
    minInSyncReplicas (server/ha/controller/broker_role.py): the device's message is refused with the
    answer a send request gets, and nothing is stored; once the table is back, it is stored again."""
    here, there = brokers
    here.ctx.topics.create_if_absent("sensors", 4, 6)
    sender = _sender(here, there)
    sender.producer.publish_table["sensors"] = TopicPublishInfo(
        [MessageQueue("sensors", "broker-a", i) for i in range(4)], have_route=True)
    enough = here.table
    here.table = with_replicas_short(enough)
    message, key = _publish("sensors/room1/temp")
    failure = _outcome(sender.send_orderly(message, key))
    assert isinstance(failure.value, ResponseCodeError)
    assert (failure.value.code, failure.value.remark) == (ResponseCode.SYSTEM_ERROR, IN_SYNC_REPLICAS_REMARK)
    assert here.store.get_max_phy_offset() == 0
    request = here.send("sensors", b"by request")
    assert (request.code, request.remark) == (ResponseCode.SYSTEM_ERROR, IN_SYNC_REPLICAS_REMARK)

    here.table = enough  # the sync state set grew back
    result = _outcome(sender.send_orderly(message, key))
    assert result.queue_offset == 0 and here.store.get_max_phy_offset() > 0


# ---------------------------------------------------------------------- the producer's sends (HTTP gateway)


def _both(brokers, tmp_path, **config):
    """The same producer's send two ways: through the request table of a broker (``"request"``) and
    stored by another, alike, broker through the producer's ``store_in_process`` (``"store"``)."""
    request_bk, _ = brokers
    store_bk = Bk(tmp_path / "c", autoCreateTopicEnable=False, maxMessageSize=4096, **config)
    alike = {}
    for name, bk in (("request", request_bk), ("store", store_bk)):
        bk.ctx.topics.create_if_absent("orders", 4, 6)
        producer = _producer(bk, brokers[1], group="FERRYMQ_HTTP_PRODUCER")
        producer.publish_table["orders"] = TopicPublishInfo([MessageQueue("orders", "broker-a", 2)], have_route=True)
        if name == "store":
            producer.store_in_process = StoreSend(SendProcessor(bk.ctx), bk.table, HERE, "127.0.0.1:0", producer,
                                                  reactor=bk.clock)
            del producer.instance.api.local_brokers[HERE]  # a request would go to a socket, and not be answered
        alike[name] = (bk, producer)
    return alike, store_bk


def _message(**kwargs) -> Message:
    message = Message("orders", kwargs.pop("body", b"order 1"), tags="paid", keys=["o1", "c7"],
                      properties={"amount": "12", "contentType": "text/plain"}, **kwargs)
    message.properties[MessageConst.UNIQ_KEY] = "0A0B0C0D000000000000000000000001"
    return message


@pytest.mark.parametrize("delay_level", [0, 3])
def test_a_send_stored_here_is_answered_and_stored_as_its_request(brokers, tmp_path, delay_level):
    alike, store_bk = _both(brokers, tmp_path)
    results, records = {}, {}
    for name, (bk, producer) in alike.items():
        results[name] = result = _outcome(producer.send(_message(delay_level=delay_level)))
        assert result.status is SendStatus.SEND_OK, result
        records[name] = _stored(bk, result.offset_msg_id)
    request, store = results["request"], results["store"]
    assert (store.msg_id, store.transaction_id, store.message_queue, store.queue_offset, store.region_id,
            store.trace_on) == (request.msg_id, request.transaction_id, request.message_queue, request.queue_offset,
                                request.region_id, request.trace_on)
    assert store.message_queue.queue_id == 2  # the producer's pick, answered even where a delay parks it
    assert (records["store"].topic != "orders") == (delay_level > 0)  # parked
    by_request, by_store = records["request"], records["store"]
    assert (by_store.topic, by_store.queue_id, by_store.body, by_store.flag, by_store.sys_flag, by_store.born_host) == (
        by_request.topic, by_request.queue_id, by_request.body, by_request.flag, by_request.sys_flag,
        by_request.born_host)
    timing = {MessageConst.TIMER_OUT_MS}  # when the parked message is due: the time of its put
    assert ({k: v for k, v in by_store.properties.items() if k not in timing}
            == {k: v for k, v in by_request.properties.items() if k not in timing})
    store_bk.close()


def test_a_refused_send_fails_as_its_request(brokers, tmp_path):
    alike, store_bk = _both(brokers, tmp_path)
    failures = {name: _outcome(producer.send(_message(body=os.urandom(6000)))).value
                for name, (_bk, producer) in alike.items()}
    assert all(isinstance(f, ResponseCodeError) for f in failures.values())
    assert (failures["store"].code, failures["store"].remark) == (failures["request"].code, failures["request"].remark)
    assert failures["store"].code == ResponseCode.MESSAGE_ILLEGAL
    store_bk.close()


def test_a_queue_the_topic_does_not_have_is_refused_as_its_request(brokers, tmp_path):
    alike, store_bk = _both(brokers, tmp_path)
    failures = {}
    for name, (_bk, producer) in alike.items():
        producer.publish_table["orders"] = TopicPublishInfo([MessageQueue("orders", "broker-a", 9)], have_route=True)
        failures[name] = _outcome(producer.send(_message())).value
    assert failures["store"].code == failures["request"].code == ResponseCode.INVALID_PARAMETER
    assert failures["store"].remark == failures["request"].remark
    store_bk.close()


def test_what_this_broker_does_not_take_so_goes_as_a_request(brokers):
    here, there = brokers
    sender = _sender(here, there)
    message = _message()
    queue = MessageQueue("orders", "broker-a", 0)
    assert sender(THERE, message, queue, b"x", 0, 3.0) is None  # another broker's queue
    retry = Message("%RETRY%g1", b"x")
    assert sender(HERE, retry, MessageQueue("%RETRY%g1", "broker-a", 0), b"x", 0, 3.0) is None  # rewritten to a DLQ
    refusing = StoreSend(SendProcessor(here.ctx), {}, HERE, "127.0.0.1:0", sender.producer)  # no send route: a slave's
    assert refusing(HERE, message, queue, b"x", 0, 3.0) is None


# ---------------------------------------------------------------------- a read's PUBLISHes stored together


def _read(*payloads: bytes, topic_name: str = "sensors/room1/temp"):
    """A device's PUBLISHes of one read, each with its UNIQ_KEY fixed (so that two brokers store alike)."""
    messages = []
    for n, payload in enumerate(payloads):
        publish = Publish(topic_name=topic_name, payload=payload, qos=1, packet_identifier=n + 1)
        message = mapping.to_rocketmq(publish, 0, "d1")
        message.properties[MessageConst.UNIQ_KEY] = f"0A0B0C0D0000000000000000{n:08X}"
        messages.append(message)
    return messages


def test_messages_stored_together_are_the_records_each_stored_alone_would_be(brokers, tmp_path):
    """Apart from their store and born times, the records, consume-queue units, index entries and
    outcomes are those of the same messages stored one by one."""
    here, there = brokers
    alone = Bk(tmp_path / "c", autoCreateTopicEnable=False, maxMessageSize=4096)
    payloads = (b"21.5", b"21.6", os.urandom(300), b"21.8")
    key = "sensors/room1/temp"
    outcomes = {}
    for name, bk in (("together", here), ("alone", alone)):
        bk.ctx.topics.create_if_absent("sensors", 8, 6)
        sender = _sender(bk, there)
        if name == "together":
            outcomes[name] = sender.store_orderly_many(_read(*payloads), key)
        else:
            outcomes[name] = [sender.store_orderly(m, key, answer=False) for m in _read(*payloads)]
    queue = select_by_hash(list(range(8)), _read(b"x")[0], key)
    timing = ("store_timestamp", "born_timestamp")
    for together, alone_put in zip(outcomes["together"], outcomes["alone"], strict=True):
        assert isinstance(together, PutMessageResult) and together.status is PutMessageStatus.PUT_OK
        assert {k: getattr(together, k) for k in together.__slots__ if k not in timing} == {
            k: getattr(alone_put, k) for k in alone_put.__slots__ if k not in timing}
    assert [p.queue_offset for p in outcomes["together"]] == [0, 1, 2, 3]
    for offset, put in enumerate(outcomes["together"]):
        units = [bk.ctx.store.get_unit("sensors", queue, offset) for bk in (here, alone)]
        assert units[0] == units[1] and units[0][0] == put.commitlog_offset
        records = [_stored(bk, put.msg_id) for bk in (here, alone)]
        fields = [{k: getattr(r, k) for k in r.__slots__ if k not in timing} for r in records]
        assert fields[0] == fields[1] and records[0].body == payloads[offset]
        assert list(records[0].properties.items()) == list(records[1].properties.items())  # the same string
        uniq = records[0].properties[MessageConst.UNIQ_KEY]
        assert [bk.store.query_message("sensors", uniq, 4, 0, 2**62).commitlog_offsets for bk in (here, alone)] \
            == [[put.commitlog_offset]] * 2
    assert here.ctx.stats.put.total == alone.ctx.stats.put.total == 4
    alone.close()


def test_a_message_a_single_send_refuses_is_refused_alone_and_the_others_keep_their_order(brokers):
    here, there = brokers
    here.ctx.topics.create_if_absent("sensors", 8, 6)
    messages = _read(b"first", os.urandom(6000), b"third")  # the second over the limit once compressed
    outcomes = _sender(here, there).store_orderly_many(messages, "sensors/room1/temp")
    failure = _outcome(outcomes[1])
    assert isinstance(failure.value, ResponseCodeError) and failure.value.code == ResponseCode.MESSAGE_ILLEGAL
    assert [outcomes[0].queue_offset, outcomes[2].queue_offset] == [0, 1]
    assert [_stored(here, outcomes[i].msg_id).body for i in (0, 2)] == [b"first", b"third"]


def test_messages_of_a_topic_this_broker_does_not_have_go_by_route_each(brokers):
    here, there = brokers
    there.ctx.topics.create_if_absent("elsewhere", 1, 6)
    outcomes = _sender(here, there).store_orderly_many(_read(b"a", b"b", topic_name="elsewhere/x"), "elsewhere/x")
    assert [_outcome(o).queue_offset for o in outcomes] == [0, 1]
    assert there.ctx.store.get_max_offset("elsewhere", 0) == 2 and "elsewhere" not in here.ctx.topics


def test_a_delayed_message_among_others_is_parked_alone_and_the_others_stored_together(brokers):
    here, _there = brokers
    here.ctx.topics.create_if_absent("orders", 1, 6)
    msgs = [MessageExt(topic="orders", body=b"m%d" % i, properties={MessageConst.UNIQ_KEY: f"0A0B0C0D{i:024X}"},
                       born_timestamp=1, born_host=("127.0.0.1", 1)) for i in range(3)]
    msgs[1].properties[MessageConst.DELAY_TIME_LEVEL] = "3"
    puts = SendProcessor(here.ctx).store_many(msgs, lambda _queues: 0, "TBW102", 4, here.channel)
    assert [p.status for p in puts] == [PutMessageStatus.PUT_OK] * 3
    assert [puts[0].queue_offset, puts[2].queue_offset] == [0, 1] and here.ctx.store.get_max_offset("orders", 0) == 2
    parked = _stored(here, puts[1].msg_id)
    assert parked.topic == "SCHEDULE_TOPIC_XXXX" and parked.properties["REAL_TOPIC"] == "orders"


def test_messages_that_together_exceed_the_size_limit_are_put_in_several_batches(brokers):
    here, there = brokers  # maxMessageSize 4096: two of these records fit in one batch put, not three
    here.ctx.topics.create_if_absent("sensors", 8, 6)
    payloads = [os.urandom(1000) for _ in range(5)]
    puts = _sender(here, there).store_orderly_many(_read(*payloads), "sensors/room1/temp")
    assert [p.status for p in puts] == [PutMessageStatus.PUT_OK] * 5 and [p.queue_offset for p in puts] == list(range(5))
    assert [_stored(here, p.msg_id).body for p in puts] == payloads
