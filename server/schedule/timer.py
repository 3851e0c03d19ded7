"""Timer messages (RocketMQ 5): delivery at an arbitrary time given by the producer.

A send carrying TIMER_DELIVER_MS (absolute), TIMER_DELAY_MS or TIMER_DELAY_SEC is parked in topic
``rmq_sys_wheel_timer`` queue 0 with TIMER_OUT_MS (the due time, rounded down to
``timerPrecisionMs`` as Apache does) and its real destination in REAL_TOPIC / REAL_QID.

The wheel holds only 8-byte consume-queue offsets, bucketed by due slot, never bodies: a million
pending timers cost a few tens of MB. Slots are delivered in time order; ``config/timercheck``
records how far delivery has got and the lowest queue offset still pending, and is rewritten after
every tick that delivered something, so a restart rebuilds the wheel from the parked messages and
neither loses a timer nor fires one twice (a crash can only repeat the few deliveries of the tick it
interrupted). Rebuilding by reading every parked message costs seconds per million, so the wheel itself
(its offsets and how far it had scanned) is also written to ``config/timerwheel`` at stop and every
``WHEEL_SNAPSHOT_INTERVAL_MS`` while it changes; a restart loads it, drops what timercheck says was
delivered since, and reads only the messages parked after it: recovery costs what changed since. The delivered copy keeps the parked properties string plus TIMER_ENQUEUE_MS /
TIMER_DEQUEUE_MS, as Apache's does.
"""

from __future__ import annotations

import heapq
import logging
import os
import time
import zlib
from array import array
from dataclasses import dataclass
from typing import Callable

from ferrymq.server.schedule.delay import delay_level
from ferrymq.server.store.config_files import config_file
from ferrymq.wire.message import MessageConst, decode_properties, decode_record, encode_properties, peek_record
from ferrymq.wire.topics import TIMER_TOPIC

log = logging.getLogger("ferrymq.timer")

TIMER_CHECK_FILE = "timercheck"
WHEEL_FILE = "timerwheel"
#: How often a changing wheel is written (a crash rescans at most what was parked in this time).
WHEEL_SNAPSHOT_INTERVAL_MS = 30_000
_WHEEL_MAGIC, _WHEEL_VERSION = 0x4645525254494D52, 1  # "FERRTIMR"
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
        self.file = config_file(config_dir or store.config_dir, TIMER_CHECK_FILE)
        self.slots: dict[int, array] = {}
        self._due: list[int] = []  # heap of slot keys present in ``slots``
        self.pending = 0
        self.delivered_through = 0  # every timer due at or before this (ms) has been delivered
        self.scanned = 0  # next timer-queue offset not yet taken into the wheel
        self.enqueued = 0
        self.delivered = 0
        self.running = False
        self._call = None
        self.wheel_path = os.path.join(os.path.dirname(self.file.path), WHEEL_FILE)
        self._snapshot_at_ms = 0
        self._snapshot_marks = (0, 0, 0)  # (scanned, enqueued, delivered) when the wheel was last written
        self.recovery = (0, 0)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        state = self.file.load() or {}
        self.delivered_through = int(state.get("deliveredThroughMs", 0))
        self.scanned = int(state.get("lowWaterOffset", 0))
        restored = self._restore_wheel(self.scanned)
        rescanned = self._scan()  # everything parked since the snapshot (or the low-water mark) comes back
        #: how the last start rebuilt the wheel: (timers from the snapshot, timers read back from the store)
        self.recovery = (restored, rescanned)
        log.info("timer wheel started: %d pending timers (%d from %s, %d read from the store), delivered through %d",
                 self.pending, restored, WHEEL_FILE, rescanned, self.delivered_through)
        self._snapshot_at_ms = int(self.clock() * 1000)
        self._snapshot_marks = (self.scanned, self.enqueued, self.delivered) if restored else (-1, 0, 0)
        self.running = True
        self._call = self.reactor.callLater(TICK_MS / 1000, self._tick)

    def stop(self) -> None:
        self.running = False
        if self._call is not None and self._call.active():
            self._call.cancel()
        self.checkpoint()
        self.snapshot()

    def checkpoint(self) -> None:
        low = min((min(offsets) for offsets in self.slots.values() if offsets), default=self.scanned)
        self.file.save({"deliveredThroughMs": self.delivered_through, "lowWaterOffset": low})

    # ------------------------------------------------------------------ wheel snapshot

    def snapshot(self) -> None:
        """Write the wheel (slot -> offsets) and how far it has scanned, atomically (tmp, fsync, rename)."""
        words = array("q", (_WHEEL_MAGIC, _WHEEL_VERSION, self.config.timerPrecisionMs, self.scanned,
                            self.delivered_through, len(self.slots)))
        for key, offsets in self.slots.items():
            words.append(key)
            words.append(len(offsets))
            words.extend(offsets)
        data = words.tobytes()
        data += zlib.crc32(data).to_bytes(4, "little")
        tmp = self.wheel_path + ".tmp"
        os.makedirs(os.path.dirname(self.wheel_path), exist_ok=True)
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.wheel_path)
        dfd = os.open(os.path.dirname(self.wheel_path), os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
        self._snapshot_at_ms = int(self.clock() * 1000)
        self._snapshot_marks = (self.scanned, self.enqueued, self.delivered)

    def _maybe_snapshot(self) -> None:
        marks = (self.scanned, self.enqueued, self.delivered)
        if marks != self._snapshot_marks and \
                int(self.clock() * 1000) - self._snapshot_at_ms >= WHEEL_SNAPSHOT_INTERVAL_MS:
            self.snapshot()

    def _read_wheel(self) -> array | None:
        try:
            with open(self.wheel_path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return None
        body, crc = data[:-4], data[-4:]
        if len(data) < 52 or len(body) % 8 or zlib.crc32(body).to_bytes(4, "little") != crc:
            log.error("%s is damaged; rebuilding the timer wheel from the store", self.wheel_path)
            return None
        words = array("q")
        words.frombytes(body)
        if words[0] != _WHEEL_MAGIC or words[1] != _WHEEL_VERSION:
            log.error("%s has an unknown format; rebuilding the timer wheel from the store", self.wheel_path)
            return None
        return words

    def _restore_wheel(self, low_water: int) -> int:
        """Load the snapshot when it fits this store and precision; returns how many timers it gave.

        Kept: slots not fully delivered (timercheck may be newer than the snapshot) and offsets at or above
        timercheck's low-water mark (below it nothing was pending any more). Scanning resumes where the
        snapshot had got to."""
        words = self._read_wheel()
        if words is None:
            return 0
        precision, scanned, delivered_through, nslots = words[2], words[3], words[4], words[5]
        min_offset, max_offset = self.store.queue_range(TIMER_TOPIC, 0) or (0, 0)
        if precision != self.config.timerPrecisionMs or scanned > max_offset:
            log.warning("%s does not match this store or timerPrecisionMs; rebuilding the timer wheel from the store",
                        self.wheel_path)
            return 0
        self.delivered_through = max(self.delivered_through, delivered_through)
        floor = max(low_water, min_offset)
        restored = 0
        pos = 6
        for _ in range(nslots):
            key, count = words[pos], words[pos + 1]
            offsets = words[pos + 2: pos + 2 + count]
            pos += 2 + count
            if key * precision + precision - 1 <= self.delivered_through or not offsets:
                continue
            if min(offsets) < floor:
                offsets = array("q", (o for o in offsets if o >= floor))
                if not offsets:
                    continue
            self.slots[key] = offsets
            restored += len(offsets)
        self._due = list(self.slots)
        heapq.heapify(self._due)
        self.pending += restored
        self.scanned = max(scanned, low_water)
        return restored

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
        bounds = self.store.queue_range(TIMER_TOPIC, 0)
        if bounds is None:
            return 0
        start = max(self.scanned, bounds[0])
        end = bounds[1]
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
            self._maybe_snapshot()
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
        unit = self.store.get_unit(TIMER_TOPIC, 0, cq_offset)
        view = self.store.read_record(unit[0], unit[1]) if unit else None
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
        result = self.store.append(
            real_topic, real_queue, msg.body, encode_properties(props), flag=msg.flag, sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp, born_host=msg.born_host, reconsume_times=msg.reconsume_times,
        )
        if not result.ok:
            log.error("timer delivery to %s/%d failed: %s (%s); retrying", real_topic, real_queue, result.status.name, result.remark)
            return _RETRY
        return _DELIVERED
