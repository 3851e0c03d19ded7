"""From a topic's route to the queues a client may write or read (pure logic, no I/O).

Java ``MQClientInstance.topicRouteData2TopicPublishInfo`` / ``topicRouteData2TopicSubscribeInfo`` and
``TopicPublishInfo.selectOneMessageQueue``: write queues only on brokers that have a master and the
WRITE bit, read queues on brokers with the READ bit, round-robin selection that avoids the broker the
last attempt failed on.
"""

from __future__ import annotations

import itertools
import random
from dataclasses import dataclass, field

from ferrymq.wire.bodies import MessageQueue, TopicRouteData
from ferrymq.wire.codes import Perm

MASTER_ID = 0


def master_addr(route: TopicRouteData, broker_name: str) -> str | None:
    for bd in route.broker_datas:
        if bd.broker_name == broker_name:
            return bd.broker_addrs.get(MASTER_ID)
    return None


def _order_conf(route: TopicRouteData) -> list[tuple[str, int]] | None:
    """``brokerName:queueNum;...`` of an ordered topic configured in the name server's KV store."""
    if not route.order_topic_conf:
        return None
    out = []
    for item in route.order_topic_conf.split(";"):
        name, _, num = item.partition(":")
        if name and num.isdigit():
            out.append((name, int(num)))
    return out


@dataclass(slots=True)
class TopicPublishInfo:
    """The write queues of one topic and the round-robin cursor over them."""

    queues: list[MessageQueue] = field(default_factory=list)
    order_topic: bool = False
    have_route: bool = False
    _cursor: itertools.count = field(default_factory=lambda: itertools.count(random.randrange(1 << 16)))

    @property
    def ok(self) -> bool:
        return bool(self.queues)

    def select_queue(self, last_broker: str | None = None) -> MessageQueue:
        """Next queue round-robin; on a retry (``last_broker`` set) prefer a queue on another broker."""
        if not self.queues:
            raise ValueError("no writable queue in this topic's route")
        n = len(self.queues)
        if last_broker is not None:
            for _ in range(n):
                mq = self.queues[next(self._cursor) % n]
                if mq.broker_name != last_broker:
                    return mq
        return self.queues[next(self._cursor) % n]


def publish_info(route: TopicRouteData, topic: str, max_queues: int | None = None) -> TopicPublishInfo:
    """Write queues of ``topic`` from ``route``; ``max_queues`` caps queues per broker (the TBW102
    fallback uses min(defaultTopicQueueNums, the template's queues), as Java does)."""
    info = TopicPublishInfo(have_route=True)
    conf = _order_conf(route)
    if conf is not None:
        info.order_topic = True
        for name, num in conf:
            info.queues.extend(MessageQueue(topic, name, i) for i in range(num))
        return info
    for qd in sorted(route.queue_datas, key=lambda q: q.broker_name or ""):
        if not qd.perm & Perm.WRITE or master_addr(route, qd.broker_name) is None:
            continue
        num = qd.write_queue_nums if max_queues is None else min(max_queues, qd.write_queue_nums)
        info.queues.extend(MessageQueue(topic, qd.broker_name, i) for i in range(num))
    return info


def subscribe_queues(route: TopicRouteData, topic: str) -> set[MessageQueue]:
    """Read queues of ``topic``: what a consumer's rebalance shares out."""
    out: set[MessageQueue] = set()
    for qd in route.queue_datas:
        if qd.perm & Perm.READ:
            out.update(MessageQueue(topic, qd.broker_name, i) for i in range(qd.read_queue_nums))
    return out
