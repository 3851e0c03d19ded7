"""Typed JSON bodies (fastjson-compatible): ``X.decode(bytes)`` validates and builds, ``x.encode()`` writes.

Grouped by who uses them: :mod:`.route` (name server), :mod:`.client` (heartbeat, connections, locks,
offsets), :mod:`.admin` (stats and admin tables). Import from here: ``from wire.bodies import X``.
"""

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
]
