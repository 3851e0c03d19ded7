"""A device's message stored by the broker of the gateway's process without a request (store_send.py),
and sent by route when that broker does not have its topic."""

from __future__ import annotations

import os

import pytest

from ferrymq.gateways.mqtt import mapping
from ferrymq.gateways.mqtt.packets import Publish
from ferrymq.gateways.mqtt.store_send import StoreSend
from ferrymq.remoting.errors import ResponseCodeError
from ferrymq.remoting.local import LocalPeer
from ferrymq.sdk.client_config import ClientConfig
from ferrymq.sdk.client_instance import ClientInstance
from ferrymq.sdk.producer import Producer, select_by_hash
from ferrymq.sdk.route import TopicPublishInfo
from ferrymq.server.broker.processors.send import SendProcessor
from ferrymq.server.broker.service import LiveTable
from ferrymq.server.ha.roles import IN_SYNC_REPLICAS_REMARK, with_replicas_short
from ferrymq.wire.bodies import MessageQueue
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.message import decode_record

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


def _sender(here: Bk, there: Bk) -> StoreSend:
    instance = ClientInstance(ClientConfig("127.0.0.1:9876"))  # no name server is asked: routes are set below
    for bk, addr in ((here, HERE), (there, THERE)):
        instance.api.local_brokers[addr] = LocalPeer(LiveTable(bk), "127.0.0.1:0", clock=bk.clock)
        instance.broker_addrs[bk.config.brokerName] = {0: addr}
    producer = Producer("FERRYMQ_MQTT_PRODUCER", config=instance.config, instance=instance)
    producer.started = True
    producer.publish_table["elsewhere"] = TopicPublishInfo([MessageQueue("elsewhere", "broker-b", 0)],
                                                           have_route=True)
    return StoreSend(SendProcessor(here.ctx), LiveTable(here), HERE, "127.0.0.1:0", producer, reactor=here.clock)


def _publish(topic_name: str, payload: bytes = b"reading"):
    message = mapping.to_rocketmq(Publish(topic_name=topic_name, payload=payload, qos=1, packet_identifier=1), 0, "d1")
    return message, message.properties[mapping.MQTT_TOPIC]


def _outcome(d):
    out = []
    d.addBoth(out.append)
    assert out, "an ASYNC_FLUSH put and an in-process send answer at once"
    return out[0]


def test_stored_here_in_the_queue_the_producers_selector_picks(brokers):
    here, there = brokers
    here.ctx.topics.create_if_absent("sensors", 8, 6)
    message, key = _publish("sensors/room1/temp")
    result = _outcome(_sender(here, there).send_orderly(message, key))
    queue = select_by_hash(list(range(8)), message, key)
    assert result.queue_offset == 0 and here.ctx.store.get_max_offset("sensors", queue) == 1
    stored, _ = decode_record(here.store.select_one_message_by_offset(here.ctx.store.get_unit("sensors", queue, 0)[0]))
    assert (stored.body, stored.tags, stored.properties["mqttTopic"]) == (b"reading", "room1/temp", "sensors/room1/temp")
    assert stored.properties["UNIQ_KEY"] == message.uniq_key


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
