"""A topic's message queues as QueryRoute and QueryAssignment answer them (the proxy's RouteActivity).

The queues are those of every broker the name server routes the topic to (this broker's as its own
table has them: fresher than the name server's), each broker (master and slaves) named with the
endpoints the client used: as in the proxy's local mode, every request of the client comes to this
listener, and a send or a receive is served by this broker whichever broker's queue it names.
Read-only, write-only and read-write queues are listed apart, numbered in that order from 0 on each
broker, and each carries the message types the topic accepts (its ``message.type`` attribute on this
broker, NORMAL when absent).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from twisted.internet import defer

from ferrymq.wire.bodies import TopicConfig, TopicRouteData
from ferrymq.wire.codes import Perm

from .protocol import pb

log = logging.getLogger("ferrymq.grpc")

#: the topic attribute holding its message type (Apache's TopicAttributes)
MESSAGE_TYPE_ATTRIBUTE = "message.type"

_ACCEPTED = {
    "NORMAL": [pb.NORMAL],
    "FIFO": [pb.FIFO],
    "DELAY": [pb.DELAY],
    "TRANSACTION": [pb.TRANSACTION],
    "MIXED": [pb.NORMAL, pb.FIFO, pb.DELAY, pb.TRANSACTION],
}


def topic_message_type(config: TopicConfig | None) -> str:
    """NORMAL, FIFO, DELAY, TRANSACTION, MIXED; UNSPECIFIED for a topic this broker does not have."""
    if config is None:
        return "UNSPECIFIED"
    return (config.attributes or {}).get(MESSAGE_TYPE_ATTRIBUTE, "NORMAL")


def accepted_types(message_type: str) -> list[int]:
    return _ACCEPTED.get(message_type, [pb.MESSAGE_TYPE_UNSPECIFIED])


@dataclass(frozen=True, slots=True)
class BrokerQueues:
    """One broker's queues of a topic: its name, its ids (0 the master), its queue counts and permission."""

    name: str
    ids: tuple[int, ...]
    read_queue_nums: int
    write_queue_nums: int
    perm: int


@defer.inlineCallbacks
def ask_route(namesrvs: Sequence, topic: str):
    """The topic's route from the first name server (a :class:`~ferrymq.server.broker.namesrv_peer.NamesrvPeer`)
    that answers; None when it has none or none answers. Call in the reactor thread."""
    for namesrv in namesrvs:
        try:
            route = yield namesrv.topic_route(topic)
        except Exception as exc:  # noqa: BLE001 - the next name server
            log.info("route of %s from name server %s: %s", topic, namesrv.addr, exc)
            continue
        return route
    return None


def cluster_queues(broker_name: str, config: TopicConfig, route: TopicRouteData | None) -> list[BrokerQueues]:
    """The topic's queues on each broker: ``broker_name``'s from its ``config``, the others' from the
    name server's ``route`` (a broker it routes the topic to but lists no address of is left out)."""
    ids = {data.broker_name: tuple(sorted(data.broker_addrs)) for data in route.broker_datas} if route else {}
    local = BrokerQueues(broker_name, ids.get(broker_name) or (0,), config.read_queue_nums,
                         config.write_queue_nums, config.perm)
    brokers = [local]
    for queue in route.queue_datas if route else ():
        if queue.broker_name != broker_name and ids.get(queue.broker_name):
            brokers.append(BrokerQueues(queue.broker_name, ids[queue.broker_name], queue.read_queue_nums,
                                        queue.write_queue_nums, queue.perm))
    return brokers


def message_queues(brokers: Sequence[BrokerQueues], topic: pb.Resource, endpoints: pb.Endpoints,
                   message_type: str) -> list[pb.MessageQueue]:
    accepted = accepted_types(message_type)
    return [queue for broker in brokers for broker_id in broker.ids
            for queue in _queues(broker, topic, pb.Broker(name=broker.name, id=broker_id, endpoints=endpoints),
                                 accepted)]


def _queues(broker: BrokerQueues, topic: pb.Resource, named: pb.Broker, accepted: list[int]) -> list[pb.MessageQueue]:
    perm = broker.perm
    readable, writable = bool(perm & Perm.READ), bool(perm & Perm.WRITE)
    reads, writes = broker.read_queue_nums, broker.write_queue_nums
    groups: list[tuple[int, int]] = []  # (permission, how many)
    if readable and writable:
        both = min(reads, writes)
        groups = [(pb.READ, reads - both), (pb.WRITE, writes - both), (pb.READ_WRITE, both)]
    elif writable:
        groups = [(pb.WRITE, writes)]
    elif readable:
        groups = [(pb.READ, reads)]
    else:
        groups = [(pb.NONE, max(1, reads, writes))]
    queues: list[pb.MessageQueue] = []
    for permission, count in groups:
        for _ in range(count):
            queues.append(pb.MessageQueue(topic=topic, id=len(queues), permission=permission, broker=named,
                                          accept_message_types=accepted))
    return queues


_PERMISSION = {Perm.READ: pb.READ, Perm.WRITE: pb.WRITE, Perm.READ | Perm.WRITE: pb.READ_WRITE}


def assignments(brokers: Sequence[BrokerQueues], topic: pb.Resource, endpoints: pb.Endpoints,
                fifo: bool) -> list[pb.Assignment]:
    """What a PushConsumer receives from: on each readable broker's master, one queue (id -1: every queue
    of the broker), or each queue for a FIFO group."""
    out = []
    for broker in brokers:
        if not broker.perm & Perm.READ or broker.read_queue_nums <= 0 or 0 not in broker.ids:
            continue
        named = pb.Broker(name=broker.name, id=0, endpoints=endpoints)
        permission = _PERMISSION.get(broker.perm & (Perm.READ | Perm.WRITE), pb.NONE)
        for queue_id in range(broker.read_queue_nums) if fifo else (-1,):
            out.append(pb.Assignment(message_queue=pb.MessageQueue(topic=topic, id=queue_id, permission=permission,
                                                                   broker=named)))
    return out


#: Perm.WRITE as a plain int: ``perm & _WRITE`` is an int operation, where a Perm operand costs an enum
#: member's construction (every send asks)
_WRITE = int(Perm.WRITE)


def writable_queues(config: TopicConfig) -> int:
    """How many queues a send may go to (ids 0 to n-1): the broker's write queues, none when the topic is
    not writable."""
    return config.write_queue_nums if config.perm & _WRITE else 0
