"""What the broker remembers of one group's POP consumption of one queue, and how it is saved.

A queue's consumer offset (the one consumerProgress shows) is the lowest offset not yet acked: the
oldest in-flight message, else the next offset to pop. Everything the group acked past it, and what is
in flight with its deadline, is this state; it goes to ``popState.json`` next to consumerOffset.json.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: (group, topic, queue id)
QueueKey = tuple[str, str, int]


@dataclass
class Inflight:
    """A popped, unacked message: visible again at ``pop_time + invisible_ms``."""

    pop_time: int
    invisible_ms: int
    #: the start offset of the pop that handed it out (the handle's first field)
    start_offset: int

    @property
    def deadline(self) -> int:
        return self.pop_time + self.invisible_ms


@dataclass
class OrderBatch:
    """What a FIFO pop handed out of one queue: the queue stays locked to it until all of it is acked
    or its invisible time passes, then the unacked rest is handed out again, counted one more attempt."""

    offsets: list[int]
    #: the offset after the batch (the read's next begin offset: it skips filtered-out messages too)
    end: int
    pop_time: int
    invisible_ms: int
    #: offset -> earlier deliveries (0 for a first delivery)
    attempts: dict[int, int] = field(default_factory=dict)
    acked: set[int] = field(default_factory=set)

    @property
    def deadline(self) -> int:
        return self.pop_time + self.invisible_ms

    def first_unacked(self) -> int:
        return next((o for o in self.offsets if o not in self.acked), self.end)


@dataclass
class QueueState:
    #: next offset to pop (not used by FIFO pops, which read from ``committed``)
    next: int
    #: the consumer offset last written to the offset table (a differing table value means a reset)
    committed: int
    inflight: dict[int, Inflight] = field(default_factory=dict)
    order: OrderBatch | None = None

    def commit_offset(self) -> int:
        if self.order is not None:
            return self.order.first_unacked()
        return min(self.inflight) if self.inflight else self.next


def to_json_obj(queues: dict[QueueKey, QueueState]) -> dict[str, Any]:
    out = []
    for (group, topic, queue_id), qs in queues.items():
        if not qs.inflight and qs.order is None:
            continue
        entry: dict[str, Any] = {
            "group": group, "topic": topic, "queueId": queue_id, "next": qs.next, "committed": qs.committed,
            "inflight": [[o, f.pop_time, f.invisible_ms, f.start_offset] for o, f in sorted(qs.inflight.items())],
        }
        if (b := qs.order) is not None:
            entry["order"] = {"offsets": b.offsets, "end": b.end, "popTime": b.pop_time,
                              "invisibleMs": b.invisible_ms, "acked": sorted(b.acked),
                              "attempts": [[o, n] for o, n in sorted(b.attempts.items())]}
        out.append(entry)
    return {"queues": out}


def from_json_obj(obj: dict[str, Any]) -> dict[QueueKey, QueueState]:
    queues: dict[QueueKey, QueueState] = {}
    for entry in obj.get("queues", ()):
        qs = QueueState(next=int(entry["next"]), committed=int(entry["committed"]))
        for offset, pop_time, invisible_ms, start in entry.get("inflight", ()):
            qs.inflight[int(offset)] = Inflight(int(pop_time), int(invisible_ms), int(start))
        if (o := entry.get("order")) is not None:
            qs.order = OrderBatch(
                offsets=[int(x) for x in o["offsets"]], end=int(o["end"]), pop_time=int(o["popTime"]),
                invisible_ms=int(o["invisibleMs"]), acked={int(x) for x in o.get("acked", ())},
                attempts={int(k): int(n) for k, n in o.get("attempts", ())},
            )
        queues[(entry["group"], entry["topic"], int(entry["queueId"]))] = qs
    return queues
