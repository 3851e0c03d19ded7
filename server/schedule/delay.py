"""Delay-level messages: parked in SCHEDULE_TOPIC_XXXX, one queue per level, re-put when due.

A send with property ``DELAY=L`` is stored in queue L-1 of SCHEDULE_TOPIC_XXXX with its real topic
and queue in REAL_TOPIC / REAL_QID; the consume-queue unit's tag field holds the delivery time, so
this service reads only 20-byte units until a message is due. Each level advances in order (a level
has one delay, so its queue is ordered by delivery time). Progress per level is kept in
``config/delayOffset.json``, rewritten after every tick that delivered something, so a restart
neither loses a delivery nor repeats one (beyond the few of a tick a crash interrupts).

As in Apache, the delivered copy keeps the parked message's properties string verbatim (REAL_TOPIC,
REAL_QID and DELAY included), with the original body, flag, born time/host and reconsume count.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

from ferrymq.server.store.config_files import DELAY_OFFSETS, config_file
from ferrymq.wire.message import MessageConst, MessageSysFlag, decode_properties, decode_record, peek_record
from ferrymq.wire.topics import SCHEDULE_TOPIC

log = logging.getLogger("ferrymq.schedule")

#: Apache's pacing: first run after 1 s, re-check every 100 ms, back off 10 s after a failed put.
FIRST_DELAY_MS = 1000
DELAY_FOR_A_WHILE_MS = 100
DELAY_FOR_A_PERIOD_MS = 10_000
#: Apache's ``flushDelayOffsetInterval``.
FLUSH_DELAY_OFFSET_INTERVAL_MS = 10_000

def delay_level(props: dict[str, str]) -> int:
    try:
        return int(props.get(MessageConst.DELAY_TIME_LEVEL, "0"))
    except ValueError:
        return 0


def park_delayed(topic: str, queue_id: int, props: dict[str, str], sys_flag: int, max_level: int) -> tuple[str, int] | None:
    """Where a message with a delay level is stored instead of ``topic``/``queue_id``, or None if it has none.

    Updates ``props`` in place: the level is clamped to ``max_level`` and the real destination saved.
    Prepared and rolled-back transaction records are never delayed.
    """
    tx = sys_flag & MessageSysFlag.TRANSACTION_MASK
    if tx not in (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE):
        return None
    level = delay_level(props)
    if level <= 0:
        return None
    if level > max_level:
        level = max_level
        props[MessageConst.DELAY_TIME_LEVEL] = str(level)
    props[MessageConst.REAL_TOPIC] = topic
    props[MessageConst.REAL_QUEUE_ID] = str(queue_id)
    return SCHEDULE_TOPIC, level - 1


class ScheduleMessageService:
    """Moves due messages from SCHEDULE_TOPIC_XXXX to their real topics.

    ``store`` is the broker's :class:`~server.broker.store_port.SystemStore`; ``reactor`` provides
    ``callLater`` (a ``twisted.internet.task.Clock`` in tests). Puts are synchronous store calls,
    so delivery never waits on the disk.
    """

    def __init__(
        self,
        store,
        reactor,
        delay_levels_ms: list[int] | None = None,
        clock: Callable[[], float] = time.time,
        config_dir: str | None = None,
    ):
        self.store = store
        #: ``messageDelayLevel`` in ms, index 0 = level 1 (from the store's config unless given).
        self.levels = delay_levels_ms or store.delay_levels_ms
        self.reactor = reactor
        self.clock = clock
        self.file = config_file(config_dir or store.config_dir, DELAY_OFFSETS)
        self.offsets: dict[int, int] = {}
        self._calls: dict[int, object] = {}
        self._persist_call = None
        self.running = False
        self.delivered = 0

    @property
    def max_level(self) -> int:
        return len(self.levels)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.load()
        self.running = True
        for level in range(1, self.max_level + 1):
            self._schedule(level, FIRST_DELAY_MS)
        self._persist_call = self.reactor.callLater(FLUSH_DELAY_OFFSET_INTERVAL_MS / 1000, self._persist_tick)

    def stop(self) -> None:
        self.running = False
        for call in list(self._calls.values()) + [self._persist_call]:
            if call is not None and call.active():
                call.cancel()
        self._calls.clear()
        self.persist()

    def load(self) -> None:
        obj = self.file.load() or {}
        table = obj.get("offsetTable") or {}
        self.offsets = {int(level): int(offset) for level, offset in table.items()}

    def persist(self) -> None:
        self.file.save({"offsetTable": {level: offset for level, offset in sorted(self.offsets.items())}})

    def _persist_tick(self) -> None:
        try:
            self.persist()
        except OSError as exc:
            log.error("cannot persist delay offsets to %s: %s", self.file.path, exc)
        if self.running:
            self._persist_call = self.reactor.callLater(FLUSH_DELAY_OFFSET_INTERVAL_MS / 1000, self._persist_tick)

    def _schedule(self, level: int, delay_ms: int) -> None:
        if self.running:
            self._calls[level] = self.reactor.callLater(delay_ms / 1000, self._deliver, level)

    # ------------------------------------------------------------------ delivery

    def _now_ms(self) -> int:
        return int(self.clock() * 1000)

    def _deliver(self, level: int) -> None:
        before = self.offsets.get(level)
        try:
            next_delay = self.deliver_due(level)
            if self.offsets.get(level) != before:
                self.persist()  # a crash right after a delivery must not deliver it again
        except Exception:
            log.exception("delivering delay level %d failed; retrying in %d ms", level, DELAY_FOR_A_PERIOD_MS)
            next_delay = DELAY_FOR_A_PERIOD_MS
        self._schedule(level, next_delay)

    def tick(self) -> int:
        """Deliver what is due on every level now (outside the reactor's pacing); returns how many."""
        before = self.delivered
        for level in range(1, self.max_level + 1):
            self.deliver_due(level)
        return self.delivered - before

    def deliver_due(self, level: int) -> int:
        """Deliver every due message of ``level``; return how long to wait before looking again (ms)."""
        bounds = self.store.queue_range(SCHEDULE_TOPIC, level - 1)
        if bounds is None:
            return DELAY_FOR_A_WHILE_MS
        low, end = bounds
        offset = self.offsets.get(level, 0)
        if offset < low:
            log.warning("delay level %d offset %d is below the queue's minimum %d; skipping ahead", level, offset, low)
            offset = low
        delay_ms = self.levels[level - 1]
        for unit_offset, deliver_at, view in self.store.iter_queue(SCHEDULE_TOPIC, level - 1, offset, end):
            now = self._now_ms()
            if deliver_at > now + delay_ms:  # the clock went back: deliver at most one delay from now
                deliver_at = now
            if deliver_at > now:
                self.offsets[level] = unit_offset
                return max(1, min(deliver_at - now, DELAY_FOR_A_WHILE_MS))
            if not self._deliver_one(level, unit_offset, view):
                self.offsets[level] = unit_offset
                return DELAY_FOR_A_PERIOD_MS
        self.offsets[level] = max(offset, end)
        return DELAY_FOR_A_WHILE_MS

    def _deliver_one(self, level: int, offset: int, view) -> bool:
        if view is None:  # the commit log no longer has it: nothing to deliver
            log.warning("delay level %d offset %d: the message is gone from the commit log", level, offset)
            return True
        info = peek_record(view)
        props = decode_properties(info.properties)
        real_topic = props.get(MessageConst.REAL_TOPIC)
        try:
            real_queue = int(props.get(MessageConst.REAL_QUEUE_ID, ""))
        except ValueError:
            real_queue = -1
        if not real_topic or real_queue < 0:
            log.error("delay level %d offset %d: message has no REAL_TOPIC/REAL_QID; dropped", level, offset)
            return True
        msg, _ = decode_record(view)
        result = self.store.append(
            real_topic,
            real_queue,
            msg.body,
            info.properties,
            flag=msg.flag,
            sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp,
            born_host=msg.born_host,
            reconsume_times=msg.reconsume_times,
        )
        if not result.ok:
            log.error(
                "delay level %d offset %d: re-put to %s/%d failed with %s (%s); retrying in %d ms",
                level, offset, real_topic, real_queue, result.status.name, result.remark, DELAY_FOR_A_PERIOD_MS,
            )
            return False
        self.delivered += 1
        return True
