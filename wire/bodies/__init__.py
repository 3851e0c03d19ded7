"""Typed JSON bodies (fastjson-compatible): ``X.decode(bytes)`` validates and builds, ``x.encode()`` writes.

Grouped by who uses them: :mod:`.route` (name server), :mod:`.client` (heartbeat, connections, locks),
:mod:`.admin` (offset and stats tables, resets, subscription groups). Import from here:
``from wire.bodies import X``.
"""

from .admin import (
    ConsumeByWho,
    ConsumeStats,
    GetConsumerStatusBody,
    MessageQueueForC,
    OffsetWrapper,
    QueryConsumeTimeSpanBody,
    QuerySubscriptionResponseBody,
    QueueTimeSpan,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicOffset,
    TopicStatsTable,
)
from .client import (
    CheckClientRequestBody,
    Connection,
    ConsumerConnection,
    ConsumerData,
    GetConsumerListByGroupResponseBody,
    GroupList,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    ProducerConnection,
    ProducerData,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from .model import body, wire
from .route import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)

__all__ = [
    "body",
    "wire",
    # route
    "BrokerData",
    "ClusterInfo",
    "DataVersion",
    "KVTable",
    "QueueData",
    "RegisterBrokerBody",
    "TopicConfig",
    "TopicConfigSerializeWrapper",
    "TopicList",
    "TopicRouteData",
    # client
    "CheckClientRequestBody",
    "Connection",
    "ConsumerConnection",
    "ConsumerData",
    "GetConsumerListByGroupResponseBody",
    "GroupList",
    "HeartbeatData",
    "LockBatchRequestBody",
    "LockBatchResponseBody",
    "MessageQueue",
    "ProducerConnection",
    "ProducerData",
    "SubscriptionData",
    "UnlockBatchRequestBody",
    # admin
    "ConsumeByWho",
    "ConsumeStats",
    "GetConsumerStatusBody",
    "MessageQueueForC",
    "OffsetWrapper",
    "QueryConsumeTimeSpanBody",
    "QuerySubscriptionResponseBody",
    "QueueTimeSpan",
    "ResetOffsetBody",
    "ResetOffsetBodyForC",
    "SubscriptionGroupConfig",
    "SubscriptionGroupWrapper",
    "TopicOffset",
    "TopicStatsTable",
]
