"""Timer messages (RocketMQ 5): delivery at an arbitrary time given by the producer.

A send carrying TIMER_DELIVER_MS (absolute), TIMER_DELAY_MS or TIMER_DELAY_SEC is parked in topic
``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS (the due time, rounded down to
``timerPrecisionMs`` as Apache does) and its real destination in REAL_TOPIC / REAL_QID.

The wheel holds only 8-byte consume-queue offsets, bucketed by due slot, never bodies: a million
pending timers cost a few tens of MB. Slots are delivered in time order; ``config/timercheck``
records how far delivery has got and the lowest queue offset still pending, and is rewritten after
every tick that delivered something, so a restart rebuilds the wheel from the parked messages and
neither loses a timer nor fires one twice (a crash can only repeat the few deliveries of the tick it
interrupted). The delivered copy keeps the parked properties string plus TIMER_ENQUEUE_MS /
TIMER_DEQUEUE_MS, as Apache's does.
"""

from __future__ import annotations

import heapq
import logging
import time
from array import array
from dataclasses import dataclass
from typing import Callable

from server.schedule.delay import delay_level
from server.store.config_files import config_file
from wire.message import MessageConst, decode_properties, decode_record, encode_properties, peek_record
from wire.topics import TIMER_TOPIC

log = logging.getLogger("ferrymq.timer")

TIMER_CHECK_FILE = "timercheck"
TICK_MS = 100
_DELIVERED, _DROPPED, _RETRY = object(), object(), object()


@dataclass(slots=True)
class TimerConfig:
    """MessageStoreConfig keys of the timer (Apache names and defaults)."""

    timerWheelEnable: bool = True
    timerPrecisionMs: int = 1000
    timerMaxDelaySec: int = 3 * 24 * 3600


class TimerMessageError(ValueError):
    """Answered MESSAGE_ILLEGAL: unreadable timer property, or a due time beyond timerMaxDelaySec."""


_TIMER_KEYS = (MessageConst.TIMER_DELIVER_MS, MessageConst.TIMER_DELAY_MS, MessageConst.TIMER_DELAY_SEC)


def park_timer(topic: str, queue_id: int, props: dict[str, str], now_ms: int, config: TimerConfig) -> tuple[str, int] | None:
    """Where a timer message is stored instead of ``topic``/``queue_id``, or None to store it as sent.

    A delay level wins over timer properties (they are dropped). A due time already past is
    delivered at once, untransformed. Raises TimerMessageError for what Apache refuses.
    """
    if delay_level(props) > 0:
        for key in _TIMER_KEYS:
            props.pop(key, None)
        return None
    if topic == TIMER_TOPIC or MessageConst.TIMER_OUT_MS in props:
        return None
    if not any(key in props for key in _TIMER_KEYS):
        return None
    if not config.timerWheelEnable:
        raise TimerMessageError("accurate timer message is not enabled, timerWheelEnable is false")
    try:
        if MessageConst.TIMER_DELAY_SEC in props:
            deliver = now_ms + int(props[MessageConst.TIMER_DELAY_SEC]) * 1000
        elif MessageConst.TIMER_DELAY_MS in props:
            deliver = now_ms + int(props[MessageConst.TIMER_DELAY_MS])
        else:
            deliver = int(props[MessageConst.TIMER_DELIVER_MS])
    except ValueError:
        raise TimerMessageError("timer message illegal: the delivery time is not a number") from None
    if deliver <= now_ms:
        if MessageConst.TIMER_DEL_UNIQKEY in props:
            raise TimerMessageError("timer message illegal: a delete marker needs a delivery time in the future")
        return None
    if deliver - now_ms > config.timerMaxDelaySec * 1000:
        raise TimerMessageError(
            f"timer message illegal, the delay time should not be bigger than the max delay {config.timerMaxDelaySec * 1000}ms"
        )
    precision = config.timerPrecisionMs
    deliver = deliver - precision if deliver % precision == 0 else deliver // precision * precision
    props[MessageConst.TIMER_OUT_MS] = str(deliver)
    props[MessageConst.REAL_TOPIC] = topic
    props[MessageConst.REAL_QUEUE_ID] = str(queue_id)
    return TIMER_TOPIC, 0


class TimerMessageService:
    """The wheel: due slot -> consume-queue offsets of parked messages. Driven by ``reactor.callLater``."""

    def __init__(self, store, reactor, config: TimerConfig | None = None, clock: Callable[[], float] = time.time,
                 config_dir: str | None = None):
        self.store = store
        self.reactor = reactor
        self.config = config or TimerConfig()
        self.clock = clock
        self.file = config_file(config_dir or store.config.config_dir, TIMER_CHECK_FILE)
        self.slots: dict[int, array] = {}
        self._due: list[int] = []  # heap of slot keys present in ``slots``
        self.pending = 0
        self.delivered_through = 0  # every timer due at or before this (ms) has been delivered
        self.scanned = 0  # next timer-queue offset not yet taken into the wheel
        self.enqueued = 0
        self.delivered = 0
        self.running = False
        self._call = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        state = self.file.load() or {}
        self.delivered_through = int(state.get("deliveredThroughMs", 0))
        self.scanned = int(state.get("lowWaterOffset", 0))
        self._scan()  # rebuild: everything pending since the low-water mark comes back
        log.info("timer wheel started: %d pending timers, delivered through %d", self.pending, self.delivered_through)
        self.running = True
        self._call = self.reactor.callLater(TICK_MS / 1000, self._tick)

    def stop(self) -> None:
        self.running = False
        if self._call is not None and self._call.active():
            self._call.cancel()
        self.checkpoint()

    def checkpoint(self) -> None:
        low = min((min(offsets) for offsets in self.slots.values() if offsets), default=self.scanned)
        self.file.save({"deliveredThroughMs": self.delivered_through, "lowWaterOffset": low})

    def next_due_ms(self) -> int | None:
        """Start of the earliest slot still holding timers (None when the wheel is empty)."""
        return self._due[0] * self.config.timerPrecisionMs if self._due else None

    # ------------------------------------------------------------------ wheel

    def _slot(self, due_ms: int) -> int:
        return due_ms // self.config.timerPrecisionMs

    def _add(self, due_ms: int, cq_offset: int) -> None:
        key = self._slot(due_ms)
        offsets = self.slots.get(key)
        if offsets is None:
            offsets = self.slots[key] = array("q")
            heapq.heappush(self._due, key)
        offsets.append(cq_offset)
        self.pending += 1

    def _scan(self) -> int:
        """Take newly parked messages into the wheel; returns how many."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        if cq is None:
            return 0
        start = max(self.scanned, cq.min_offset)
        end = cq.max_offset
        added = 0
        for offset, _, view in self.store.iter_queue(TIMER_TOPIC, 0, start, end):
            if view is not None:
                props = decode_properties(peek_record(view).properties)
                try:
                    due = int(props.get(MessageConst.TIMER_OUT_MS, ""))
                except ValueError:
                    log.error("parked timer message at queue offset %d has no TIMER_OUT_MS; dropped", offset)
                    due = None
                if due is not None and due > self.delivered_through:
                    self._add(due, offset)
                    added += 1
        self.scanned = max(start, end)
        self.enqueued += added
        return added

    def _tick(self) -> None:
        try:
            self.run_once()
        except Exception:
            log.exception("timer tick failed; retrying")
        if self.running:
            self._call = self.reactor.callLater(self._next_tick_ms() / 1000, self._tick)

    def _next_tick_ms(self) -> int:
        """Every TICK_MS, and exactly at the next slot boundary when that comes sooner: a slot fires as
        soon as it has passed instead of up to a tick later."""
        precision = self.config.timerPrecisionMs
        to_boundary = precision - int(self.clock() * 1000) % precision
        return max(1, min(TICK_MS, to_boundary + 1))

    def run_once(self) -> int:
        """Scan new timers and deliver every slot now due; returns how many were delivered."""
        self._scan()
        now = int(self.clock() * 1000)
        precision = self.config.timerPrecisionMs
        fired = 0
        handled = 0
        # As Apache's wheel, a slot fires once it has fully passed: with due times rounded down to the slot
        # (an exact multiple to the slot before), a timer is never early and at most one slot late.
        while self._due and (self._due[0] + 1) * precision <= now:
            key = self._due[0]
            offsets = self.slots[key]
            for i, cq_offset in enumerate(offsets):
                outcome = self._fire(cq_offset, now)
                if outcome is _RETRY:  # keep the rest of the slot for the next tick
                    self.slots[key] = offsets[i:]
                    self.pending -= i
                    handled += i
                    self.delivered += fired
                    if handled:
                        self.checkpoint()
                    return fired
                fired += outcome is _DELIVERED
            heapq.heappop(self._due)
            del self.slots[key]
            self.pending -= len(offsets)
            handled += len(offsets)
            self.delivered_through = key * precision + precision - 1
        self.delivered += fired
        if handled:
            self.checkpoint()
        return fired

    def _fire(self, cq_offset: int, now: int) -> object:
        """_DELIVERED, _DROPPED (nothing deliverable there) or _RETRY (the store refused the put)."""
        cq = self.store.find_consume_queue(TIMER_TOPIC, 0)
        unit = cq.get_unit(cq_offset) if cq is not None else None
        view = self.store.select_one_message_by_offset(unit[0], unit[1]) if unit else None
        if view is None:
            log.warning("timer message at queue offset %d is gone from the store; not delivered", cq_offset)
            return _DROPPED
        msg, _ = decode_record(view)
        props = msg.properties
        props[MessageConst.TIMER_ENQUEUE_MS] = str(msg.store_timestamp)
        props[MessageConst.TIMER_DEQUEUE_MS] = str(now)
        try:
            real_queue = int(props.get(MessageConst.REAL_QUEUE_ID, ""))
        except ValueError:
            real_queue = -1
        real_topic = props.get(MessageConst.REAL_TOPIC)
        if not real_topic or real_queue < 0:
            log.error("timer message at queue offset %d has no REAL_TOPIC/REAL_QID; dropped", cq_offset)
            return _DROPPED
        result = self.store.put_message(
            real_topic, real_queue, msg.body, encode_properties(props), flag=msg.flag, sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp, born_host=msg.born_host, reconsume_times=msg.reconsume_times,
        )
        if not result.ok:
            log.error("timer delivery to %s/%d failed: %s (%s); retrying", real_topic, real_queue, result.status.name, result.remark)
            return _RETRY
        return _DELIVERED
