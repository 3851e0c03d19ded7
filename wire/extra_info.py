"""POP receipt handles: the ``ExtraInfo`` string a client sends back with ACK_MESSAGE and
CHANGE_MESSAGE_INVISIBLETIME, and the offset summaries of a POP_MESSAGE answer it is built from.

An ExtraInfo is eight space-separated fields (Apache's ExtraInfoUtil)::

    <start offset> <pop time> <invisible ms> <revive qid> <retry mark> <broker name> <queue id> <queue offset>

The retry mark names the topic the message was popped from: ``0`` the topic itself, ``1`` its
``%RETRY%group_topic``, ``2`` its ``%RETRY%group+topic``. The Java client composes it per message from
the answer's ``startOffsetInfo`` / ``msgOffsetInfo`` (``mark queueId offsets;...``) unless the message
already carries it in its ``POP_CK`` property.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from . import topics as names

NORMAL, RETRY_V1, RETRY_V2 = "0", "1", "2"


def retry_mark(topic: str) -> str:
    if names.is_pop_retry_topic_v2(topic):
        return RETRY_V2
    if topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX):
        return RETRY_V1
    return NORMAL


def real_topic(topic: str, group: str, mark: str) -> str:
    """The topic a handle's message lives in, from the topic it was popped for and its retry mark."""
    if mark == NORMAL:
        return topic
    if mark == RETRY_V1:
        return names.pop_retry_topic(topic, group, v2=False)
    if mark == RETRY_V2:
        return names.pop_retry_topic(topic, group, v2=True)
    raise ValueError(f"bad retry mark {mark!r} in extraInfo")


@dataclass(frozen=True)
class ReceiptHandle:
    start_offset: int
    pop_time: int
    invisible_ms: int
    revive_qid: int
    mark: str
    broker_name: str
    queue_id: int
    queue_offset: int

    @classmethod
    def parse(cls, text: str) -> ReceiptHandle:
        """Raises ValueError for a string that is no ExtraInfo (a 7-field one, which older clients send
        for the first message of a queue, takes its queue offset from the start offset)."""
        parts = (text or "").split(" ")
        if len(parts) not in (7, 8):
            raise ValueError(f"extraInfo {text!r} has {len(parts)} fields, expected 8")
        start, pop_time, invisible, revive_qid = (int(p) for p in parts[:4])
        mark = parts[4]
        if mark not in (NORMAL, RETRY_V1, RETRY_V2):
            raise ValueError(f"bad retry mark {mark!r} in extraInfo")
        offset = int(parts[7]) if len(parts) == 8 else start
        return cls(start, pop_time, invisible, revive_qid, mark, parts[5], int(parts[6]), offset)

    def __str__(self) -> str:
        return " ".join(str(v) for v in (self.start_offset, self.pop_time, self.invisible_ms, self.revive_qid,
                                          self.mark, self.broker_name, self.queue_id, self.queue_offset))

    @property
    def is_order(self) -> bool:
        return self.revive_qid == names.POP_ORDER_REVIVE_QUEUE

    def renewed(self, pop_time: int, invisible_ms: int) -> ReceiptHandle:
        """The handle after CHANGE_MESSAGE_INVISIBLETIME: the old one no longer acks."""
        return replace(self, pop_time=pop_time, invisible_ms=invisible_ms)


def offset_info(entries: list[tuple[str, int, str]]) -> str:
    """``mark queueId value;...`` for startOffsetInfo, msgOffsetInfo and orderCountInfo."""
    return ";".join(f"{retry_mark(topic)} {queue_id} {value}" for topic, queue_id, value in entries)
