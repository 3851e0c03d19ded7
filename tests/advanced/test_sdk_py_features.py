"""sdk_py's producer and push consumer against ``ferrymq standalone``: a transaction answered UNKNOW and
then COMMIT on check-back, a SQL92 push subscription, a delay level, and retries through the delay levels."""

from __future__ import annotations

import threading
import time

import pytest

from ferrymq.sdk.blocking_clients import BlockingProducer, BlockingPushConsumer
from ferrymq.sdk.client_config import ClientConfig
from ferrymq.sdk.message import Message
from ferrymq.sdk.producer import LocalTransactionState
from ferrymq.testing import FerryMQServer
from tests.advanced.broker_session import wait_for

CONFIG = {
    "enablePropertyFilter": "true",
    "messageDelayLevel": "1s 1s 1s",
    "transactionTimeOut": "500",
    "transactionCheckInterval": "200",
    "transactionCheckMax": "5",
}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    with FerryMQServer(tmp_path_factory.mktemp("sdk"), CONFIG) as server:
        yield server


def config(broker) -> ClientConfig:
    return ClientConfig(broker.namesrv_addr, poll_name_server_interval=1.0, heartbeat_broker_interval=1.0,
                        rebalance_interval=0.5, persist_consumer_offset_interval=0.5)


class Inbox:
    def __init__(self):
        self.got: list = []
        self.lock = threading.Lock()

    def __call__(self, msgs, _context):
        with self.lock:
            self.got.extend(msgs)
        return "CONSUME_SUCCESS"

    def bodies(self) -> list[bytes]:
        with self.lock:
            return sorted(m.body for m in self.got)


def test_transaction_checked_back_then_committed_and_sql92_push(broker):
    asked = []

    def checker(msg):
        asked.append(msg.body)
        return LocalTransactionState.UNKNOW if len(asked) == 1 else LocalTransactionState.COMMIT_MESSAGE

    inbox = Inbox()
    consumer = BlockingPushConsumer("sdk_sql_group", config=config(broker), consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe("SdkTx", "kind = 'keep' OR TAGS = 'vip'", "SQL92")
    consumer.register_listener(inbox)
    with BlockingProducer("sdk_tx_group", config=config(broker), transaction_checker=checker) as producer, consumer:
        consumer.start()
        _, state = producer.send_message_in_transaction(
            Message("SdkTx", b"tx-later", properties={"kind": "keep"}), lambda m, a: LocalTransactionState.UNKNOW)
        assert state is LocalTransactionState.UNKNOW
        _, rolled = producer.send_message_in_transaction(
            Message("SdkTx", b"tx-rollback", properties={"kind": "keep"}),
            lambda m, a: LocalTransactionState.ROLLBACK_MESSAGE)
        assert rolled is LocalTransactionState.ROLLBACK_MESSAGE
        for body, props, tags in ((b"plain-keep", {"kind": "keep"}, None), (b"plain-drop", {"kind": "drop"}, None),
                                  (b"vip", {}, "vip"), (b"no-props", {}, None)):
            assert producer.send(Message("SdkTx", body, tags=tags, properties=dict(props))).status.name == "SEND_OK"
        wait_for(lambda: len(inbox.bodies()) >= 3, 15, "the filtered and committed messages")
        time.sleep(1.0)  # more check rounds: the committed transaction is not asked about again
    assert inbox.bodies() == [b"plain-keep", b"tx-later", b"vip"]
    assert asked == [b"tx-later", b"tx-later"]


def test_delay_level_and_retry_go_through_the_schedule_topic(broker):
    inbox = Inbox()
    attempts: dict[bytes, int] = {}

    def flaky(msgs, context):
        for m in msgs:
            attempts[m.body] = attempts.get(m.body, 0) + 1
            if m.body == b"retry-me" and m.reconsume_times == 0:
                return "RECONSUME_LATER"
        return inbox(msgs, context)

    consumer = BlockingPushConsumer("sdk_delay_group", config=config(broker),
                                    consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe("SdkDelay", "*")
    consumer.register_listener(flaky)
    with BlockingProducer("sdk_delay_producer", config=config(broker)) as producer, consumer:
        consumer.start()
        sent_at = time.time()
        producer.send(Message("SdkDelay", b"delayed", delay_level=2))
        producer.send(Message("SdkDelay", b"retry-me"))
        wait_for(lambda: len(inbox.bodies()) >= 2, 20, "the delayed and the retried message")
    delayed = next(m for m in inbox.got if m.body == b"delayed")
    assert delayed.store_timestamp / 1000 - sent_at >= 0.95  # level 2 is 1 s here
    retried = next(m for m in inbox.got if m.body == b"retry-me")
    assert retried.reconsume_times == 1 and attempts[b"retry-me"] == 2
