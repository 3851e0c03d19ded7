"""What a consumer holds of one queue: pulled-but-unfinished messages, by queue offset (Java
``ProcessQueue``).

The offset a consumer may commit is the lowest offset still in flight (or one past the highest pulled
when nothing is): a message finishing early never lets the committed offset skip one still running.
Orderly consumption takes messages out in offset order and commits past them only on success.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ferrymq.wire.message import MessageExt

#: Java ``rocketmq.client.rebalance.lockMaxLiveTime``: a client lock older than this is not trusted.
LOCK_MAX_LIVE_TIME = 30.0


@dataclass
class ProcessQueue:
    msgs: dict[int, MessageExt] = field(default_factory=dict)
    #: taken by the orderly consumer, not yet committed
    consuming: dict[int, MessageExt] = field(default_factory=dict)
    queue_offset_max: int = -1
    dropped: bool = False
    locked: bool = False
    last_lock_time: float = 0.0
    last_pull_time: float = 0.0
    last_consume_time: float = 0.0
    #: an orderly consumption loop is running for this queue
    consuming_orderly: bool = False
    #: where the next pull reads from (reported in running info)
    next_offset: int = 0
    #: wall-clock ms of the last pull and the last finished consumption (reported in running info)
    last_pull_ms: int = 0
    last_consume_ms: int = 0
    #: broker id the last pull answer suggested for the next one (0 = master)
    suggested_broker_id: int = 0

    @property
    def msg_count(self) -> int:
        return len(self.msgs) + len(self.consuming)

    def lock_expired(self, now: float | None = None) -> bool:
        return ((now or time.monotonic()) - self.last_lock_time) > LOCK_MAX_LIVE_TIME

    def put(self, msgs: list[MessageExt]) -> None:
        for m in msgs:
            self.msgs.setdefault(m.queue_offset, m)
            if m.queue_offset > self.queue_offset_max:
                self.queue_offset_max = m.queue_offset

    def remove(self, msgs: list[MessageExt]) -> int:
        """Forget finished messages; the offset now safe to commit, or -1 if nothing was held."""
        if not self.msgs:
            return -1
        for m in msgs:
            self.msgs.pop(m.queue_offset, None)
        self.last_consume_time = time.monotonic()
        self.last_consume_ms = int(time.time() * 1000)
        if self.msgs:
            return min(self.msgs)
        return self.queue_offset_max + 1

    # ------------------------------------------------------------------ orderly

    def take(self, batch: int) -> list[MessageExt]:
        """The next ``batch`` messages in offset order, moved to the consuming set."""
        out = []
        for off in sorted(self.msgs)[:batch]:
            m = self.msgs.pop(off)
            self.consuming[off] = m
            out.append(m)
        return out

    def commit(self) -> int:
        """Everything taken is done: the offset to commit (one past the highest), or -1 if none."""
        if not self.consuming:
            return -1
        offset = max(self.consuming) + 1
        self.consuming.clear()
        self.last_consume_time = time.monotonic()
        self.last_consume_ms = int(time.time() * 1000)
        return offset

    def make_available(self, msgs: list[MessageExt]) -> None:
        """Put taken messages back to be consumed again."""
        for m in msgs:
            self.consuming.pop(m.queue_offset, None)
            self.msgs[m.queue_offset] = m
