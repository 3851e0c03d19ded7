"""FerryMQ's Python client SDK: one Deferred-based client in three styles.

Messaging clients (Twisted-native; every call returns a Deferred): :class:`Producer`,
:class:`PushConsumer`, :class:`PullConsumer`, :class:`MQAdmin`. Blocking facades for scripts:
:class:`BlockingProducer`, :class:`BlockingPushConsumer`, :class:`BlockingPullConsumer`,
:class:`BlockingMQAdmin`. The same clients for asyncio (``await``, ``async with``, ``async for``) are in
:mod:`ferrymq.sdk.aio`. Settings shared by all clients: :class:`ClientConfig`. docs/sdk.md shows each style.
"""

from ferrymq.wire.signature import Credentials

from .blocking_clients import BlockingMQAdmin, BlockingProducer, BlockingPullConsumer, BlockingPushConsumer
from .client_config import ClientConfig
from .consumer import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeFromWhere,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    MessageModel,
    PullConsumer,
    PushConsumer,
)
from .message import Message, MessageExt, MessageQueue, PullResult, PullStatus, SendResult, SendStatus
from .mq_admin import MQAdmin
from .producer import LocalTransactionState, Producer, select_by_hash

__all__ = [
    "BlockingMQAdmin",
    "BlockingProducer",
    "BlockingPullConsumer",
    "BlockingPushConsumer",
    "ClientConfig",
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "Credentials",
    "LocalTransactionState",
    "MQAdmin",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "select_by_hash",
]
