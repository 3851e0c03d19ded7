"""Delay levels: SCHEDULE_TOPIC_XXXX delivery (Apache's ScheduleMessageService).

A message with DELAY=L is parked in SCHEDULE_TOPIC_XXXX queue L-1 (see ``send.apply_delay``); the
store writes its due time (store time + the level's delay) as the consume-queue tag code. Every
100 ms each level's queue is read from its delivery offset: due messages are written to REAL_TOPIC /
REAL_QID with the parked record's properties, body, flag, born host/time and reconsume count, and the
offset advances. Offsets persist in ``config/delayOffset.json`` (``{"offsetTable":{level:offset}}``),
so delivery resumes after a restart without losing or repeating more than the last unsaved tick.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from wire import topics as names
from wire.errors import BodyError
from wire.message import MessageConst, MessageExt, decode_record

from .context import BrokerContext

log = logging.getLogger("ferrymq.broker.schedule")

#: Apache's DELAY_FOR_A_WHILE: how often each level looks for due messages, seconds.
TICK_S = 0.1
#: Most messages delivered per level and tick (the rest wait for the next tick).
BATCH = 256


def parse_delay_levels(text: str) -> list[int]:
    """``messageDelayLevel`` ("1s 5s 10s 30s 1m ...") as milliseconds, level 1 first."""
    unit = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
    out = []
    for token in text.split():
        try:
            out.append(int(token[:-1]) * unit[token[-1]])
        except (KeyError, ValueError):
            raise ValueError(f"messageDelayLevel entry {token!r} is not <number><s|m|h|d>") from None
    return out


class ScheduleService:
    def __init__(self, ctx: BrokerContext, now_ms: Callable[[], int] | None = None):
        self.ctx = ctx
        self.delays = parse_delay_levels(ctx.config.messageDelayLevel)
        self.max_level = len(self.delays)
        self.offsets: dict[int, int] = {}
        self.changed = False
        self.now_ms = now_ms or (lambda: int(time.time() * 1000))

    # ------------------------------------------------------------------ persistence

    def to_json_obj(self) -> dict:
        return {"offsetTable": {str(level): off for level, off in sorted(self.offsets.items())}}

    def load_json_obj(self, obj: dict) -> None:
        table = obj.get("offsetTable") or {}
        self.offsets = {int(level): int(off) for level, off in table.items()}

    # ------------------------------------------------------------------ delivery

    def tick(self) -> int:
        """Deliver what is due on every level; returns how many messages were delivered."""
        delivered = 0
        for level in range(1, self.max_level + 1):
            delivered += self.deliver(level)
        return delivered

    def deliver(self, level: int) -> int:
        store = self.ctx.store
        qid = level - 1
        end = store.get_max_offset(names.SCHEDULE_TOPIC, qid)
        offset = max(self.offsets.get(level, 0), store.get_min_offset(names.SCHEDULE_TOPIC, qid))
        if offset >= end:
            return 0
        now = self.now_ms()
        delivered = 0
        while offset < end and delivered < BATCH:
            unit = store.get_unit(names.SCHEDULE_TOPIC, qid, offset)
            if unit is None:
                break
            phys, _size, due = unit
            if due > now + self.delays[qid]:  # a due time from a skewed clock: deliver now (as Apache)
                due = now
            if due > now:
                break
            raw = store.look_message_by_offset(phys)
            if raw is not None and not self._put_real(raw, offset, level):
                break  # the store refused: try again next tick
            offset += 1
            delivered += 1
        if offset != self.offsets.get(level):
            self.offsets[level] = offset
            self.changed = True
        return delivered

    def _put_real(self, raw: bytes, offset: int, level: int) -> bool:
        try:
            parked, _ = decode_record(raw)
        except BodyError as exc:
            log.error("schedule level %d offset %d: unreadable record skipped: %s", level, offset, exc)
            return True
        props = parked.properties
        topic = props.get(MessageConst.REAL_TOPIC)
        try:
            queue_id = int(props.get(MessageConst.REAL_QUEUE_ID, ""))
        except ValueError:
            queue_id = -1
        if not topic or queue_id < 0:
            log.error("schedule level %d offset %d: no REAL_TOPIC/REAL_QID, message dropped", level, offset)
            return True
        # The record keeps its properties string as parked (Apache clears DELAY only in memory, after
        # encoding what it stores); delivery goes straight to the store, so it is not delayed again.
        real = MessageExt(
            topic=topic, body=parked.body, flag=parked.flag, properties=props, queue_id=queue_id,
            sys_flag=parked.sys_flag, born_timestamp=parked.born_timestamp, born_host=parked.born_host,
            store_host=self.ctx.store_host, reconsume_times=parked.reconsume_times,
        )
        result = self.ctx.store.put_message(real)
        status = getattr(result, "status", None)
        if status is not None and not result.ok:
            log.warning("schedule level %d: delivery to %s refused (%s); retrying", level, topic, status.name)
            return False
        return True
