"""Queues and offsets as the data source names them: one Spark partition per message queue.

A queue is ``(topic, broker, queueId)``; a set of per-queue offsets travels as JSON shaped like
rocketmq-spark's, ``{"TopicA": {"broker-a": {"0": 23, "1": -2}}}``, where ``-2`` means the queue's earliest
offset and ``-1`` its latest. The same JSON is what a streaming query keeps in its checkpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ferrymq.sdk.message import MessageQueue

#: the JSON placeholders for a queue's first and end offsets (Kafka's and rocketmq-spark's numbers)
EARLIEST = -2
LATEST = -1


@dataclass(frozen=True, order=True, slots=True)
class QueueRef:
    """One message queue; orders by topic, broker, queue id (the order partitions are listed in)."""

    topic: str
    broker: str
    queue_id: int

    @classmethod
    def of(cls, mq: MessageQueue) -> QueueRef:
        return cls(mq.topic or "", mq.broker_name or "", mq.queue_id)

    def message_queue(self) -> MessageQueue:
        return MessageQueue(self.topic, self.broker, self.queue_id)

    def __str__(self) -> str:
        return f"{self.topic}/{self.broker}/{self.queue_id}"


@dataclass(frozen=True, slots=True)
class QueueRange:
    """The offsets ``[start, end)`` of one queue: what one task reads."""

    queue: QueueRef
    start: int
    end: int

    @property
    def empty(self) -> bool:
        return self.start >= self.end


class OffsetsJSONError(ValueError):
    """Offsets JSON that is not ``{topic: {broker: {queueId: offset}}}``."""


def offsets_to_json(offsets: Mapping[QueueRef, int]) -> str:
    nested: dict[str, dict[str, dict[str, int]]] = {}
    for q in sorted(offsets):
        nested.setdefault(q.topic, {}).setdefault(q.broker, {})[str(q.queue_id)] = offsets[q]
    return json.dumps(nested, separators=(",", ":"))


def offsets_from_json(text: str) -> dict[QueueRef, int]:
    try:
        nested = json.loads(text)
    except json.JSONDecodeError as exc:
        raise OffsetsJSONError(f"not JSON ({exc})") from None
    out: dict[QueueRef, int] = {}
    if not isinstance(nested, dict):
        raise OffsetsJSONError('expected {"topic": {"broker": {"queueId": offset}}}')
    for topic, brokers in nested.items():
        if not isinstance(brokers, dict):
            raise OffsetsJSONError(f'topic {topic!r}: expected {{"broker": {{"queueId": offset}}}}')
        for broker, queues in brokers.items():
            if not isinstance(queues, dict):
                raise OffsetsJSONError(f'{topic}/{broker}: expected {{"queueId": offset}}')
            for queue_id, offset in queues.items():
                if not str(queue_id).isdigit():
                    raise OffsetsJSONError(f"{topic}/{broker}: queue id {queue_id!r} is not a number")
                if not isinstance(offset, int) or isinstance(offset, bool) or offset < EARLIEST:
                    raise OffsetsJSONError(f"{topic}/{broker}/{queue_id}: offset {offset!r} is not an offset, "
                                           f"{EARLIEST} (earliest) or {LATEST} (latest)")
                out[QueueRef(topic, broker, int(queue_id))] = offset
    return out


def sorted_queues(queues: Iterable[QueueRef]) -> list[QueueRef]:
    return sorted(set(queues))
