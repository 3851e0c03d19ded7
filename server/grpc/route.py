"""A topic's message queues as QueryRoute answers them (the proxy's RouteActivity).

The broker is named with the endpoints the client used (the proxy's local mode does the same): every
request of the client goes to this listener. Read-only, write-only and read-write queues are listed
apart, numbered in that order, and each carries the message types the topic accepts (its
``message.type`` attribute, NORMAL when absent).
"""

from __future__ import annotations

from ferrymq.wire.bodies import TopicConfig
from ferrymq.wire.codes import Perm

from .protocol import pb

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


def message_queues(config: TopicConfig, topic: pb.Resource, broker: pb.Broker) -> list[pb.MessageQueue]:
    perm = config.perm
    readable, writable = bool(perm & Perm.READ), bool(perm & Perm.WRITE)
    reads, writes = config.read_queue_nums, config.write_queue_nums
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
    accepted = accepted_types(topic_message_type(config))
    queues: list[pb.MessageQueue] = []
    for permission, count in groups:
        for _ in range(count):
            queues.append(pb.MessageQueue(topic=topic, id=len(queues), permission=permission, broker=broker,
                                          accept_message_types=accepted))
    return queues


def writable_queue_ids(config: TopicConfig) -> list[int]:
    """The queue ids a send may go to: the broker's write queues, when the topic is writable."""
    return list(range(config.write_queue_nums)) if config.perm & Perm.WRITE else []
