"""Consumers: push (concurrent or orderly, clustering or broadcasting) and pull."""

from .allocate import allocate_average
from .offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteOffsetStore
from .pull import PullConsumer
from .push import (
    ConsumeConcurrentlyContext,
    ConsumeConcurrentlyStatus,
    ConsumeOrderlyContext,
    ConsumeOrderlyStatus,
    PushConsumer,
)
from .rebalance import ConsumeFromWhere, MessageModel
from .subscription import build_subscription

__all__ = [
    "ConsumeConcurrentlyContext",
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyContext",
    "ConsumeOrderlyStatus",
    "LocalFileOffsetStore",
    "MessageModel",
    "PullConsumer",
    "PushConsumer",
    "ReadOffsetType",
    "RemoteOffsetStore",
    "allocate_average",
    "build_subscription",
]
