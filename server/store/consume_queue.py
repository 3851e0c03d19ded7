"""Consume queues: per (topic, queue id), 20-byte units ``int64 commitLogOffset | int32 size | int64 tagsCode``.

The queue (logical) offset of a unit is its byte position / 20. Segment files live under
``consumequeue/<topic>/<queueId>/`` and are named by their first unit's byte position.
"""

from __future__ import annotations

import os
from typing import Callable

from ferrymq.wire.batch import CQ_UNIT

from .mapped_file import MappedFileQueue

UNIT_SIZE = 20
UNIT = CQ_UNIT  #: commit-log offset, size, tag code
#: unit used to pad a fresh queue whose first offset is not at a segment start (Apache's blank unit)
PAD_SIZE = 0x7FFFFFFF


class ConsumeQueue:
    __slots__ = ("topic", "queue_id", "queue", "min_logic_offset", "unit_bytes", "tail")

    def __init__(self, root: str, topic: str, queue_id: int, file_size: int):
        if file_size % UNIT_SIZE:
            raise ValueError(f"mappedFileSizeConsumeQueue {file_size} must be a multiple of {UNIT_SIZE}")
        self.topic = topic
        self.queue_id = queue_id
        self.queue = MappedFileQueue(os.path.join(root, topic, str(queue_id)), file_size)
        self.min_logic_offset = 0  # in bytes, as Apache keeps it
        self.unit_bytes = file_size
        #: the last segment, once one was appended to or recovered (None before)
        self.tail = None

    # --- offsets (in units) ---
    @property
    def max_offset(self) -> int:
        t = self.tail  # the last segment whenever it is set
        return (t.start + t.wrote if t is not None else self.queue.max_offset) // UNIT_SIZE

    @property
    def min_offset(self) -> int:
        return max(self.min_logic_offset, self.queue.min_offset) // UNIT_SIZE

    # --- writing ---
    def append(self, queue_offset: int, units: bytes) -> None:
        """Write packed units (one, or a batch's run) for consecutive offsets from ``queue_offset``.

        The common case, units continuing the queue within its last segment, is one slice store. Else
        unit by unit: across a segment end; padding the gap before a fresh queue's first unit; and, for
        recovery re-dispatching records, rewriting units the queue holds and ignoring those below its
        minimum (their segments are deleted).
        """
        pos = queue_offset * UNIT_SIZE
        mf = self.tail
        n = len(units)
        if mf is not None and mf.start + mf.wrote == pos and mf.wrote + n <= mf.size:
            mf.mm[mf.wrote : mf.wrote + n] = units
            mf.wrote += n
            return
        for phys, size, tags_code in UNIT.iter_unpack(units):
            self._append_one(phys, size, tags_code, pos)
            pos += UNIT_SIZE

    def _append_one(self, phys: int, size: int, tags_code: int, pos: int) -> None:
        q = self.queue
        cur = q.max_offset
        if pos < cur:  # a unit the queue holds (recovery)
            mf = q.find(pos)
            if mf is not None and pos >= self.min_logic_offset:
                UNIT.pack_into(mf.mm, pos - mf.start, phys, size, tags_code)
            return
        if not q.files:
            mf = q.last_for_write(pos)
            if pos > mf.start:
                self.min_logic_offset = pos
            cur = mf.start
        while cur < pos:  # pad a gap (fresh queue starting at a non-zero offset)
            mf = q.last_for_write()
            UNIT.pack_into(mf.mm, mf.wrote, 0, PAD_SIZE, 0)
            mf.wrote += UNIT_SIZE
            cur += UNIT_SIZE
        mf = q.last_for_write()
        UNIT.pack_into(mf.mm, mf.wrote, phys, size, tags_code)
        mf.wrote += UNIT_SIZE
        self.tail = mf

    # --- reading ---
    def get_unit(self, offset: int) -> tuple[int, int, int] | None:
        pos = offset * UNIT_SIZE
        mf = self.queue.find(pos)
        if mf is None or pos - mf.start + UNIT_SIZE > mf.wrote:
            return None
        try:
            return UNIT.unpack_from(mf.view, pos - mf.start)
        except ValueError:  # the segment was deleted by retention meanwhile
            return None

    def units_from(self, offset: int):
        """(memoryview over the units from ``offset`` to the end of its segment's written part, count)."""
        pos = offset * UNIT_SIZE
        mf = self.queue.find(pos)
        if mf is None:
            return None, 0
        rel = pos - mf.start
        n = (mf.wrote - rel) // UNIT_SIZE
        if n <= 0:
            return None, 0
        try:
            return mf.view[rel : rel + n * UNIT_SIZE], n
        except ValueError:  # the segment was deleted by retention meanwhile
            return None, 0

    def roll_next_file(self, offset: int) -> int:
        per = self.unit_bytes // UNIT_SIZE
        return offset + per - offset % per

    def search_offset_by_time(self, timestamp: int, store_ts: Callable[[int, int], int], min_phys: int, lower: bool = True) -> int:
        """Binary search by store time. LOWER (default): the first offset whose message was stored at or
        after ``timestamp`` (max offset if none); UPPER: the last stored at or before (min if none)."""
        lo, hi = self.min_offset, self.max_offset - 1
        if hi < lo:
            return lo

        def ts(off: int) -> int:
            u = self.get_unit(off)
            if u is None or u[0] < min_phys or u[1] == PAD_SIZE:
                return -1
            return store_ts(u[0], u[1])

        # skip units whose messages are gone
        while lo <= hi and ts(lo) < 0:
            lo += 1
        if lo > hi:
            return self.max_offset
        if lower:
            ans = hi + 1
            a, b = lo, hi
            while a <= b:
                mid = (a + b) // 2
                if ts(mid) >= timestamp:
                    ans, b = mid, mid - 1
                else:
                    a = mid + 1
            return ans
        ans = lo
        a, b = lo, hi
        while a <= b:
            mid = (a + b) // 2
            if ts(mid) <= timestamp:
                ans, a = mid, mid + 1
            else:
                b = mid - 1
        return ans

    # --- recovery and trimming ---
    def load(self) -> None:
        self.queue.load()

    def recover(self) -> None:
        """Find the written end: units are dense, so binary search for the first all-zero unit in the
        last segment (a torn unit reads as zero size and is dropped too)."""
        files = self.queue.files
        # drop trailing empty segments except the first
        while len(files) > 1 and UNIT.unpack_from(files[-1].mm, 0)[1] == 0:
            files[-1].destroy()
            files = files[:-1]
        self.queue.files = files
        if not files:
            return
        for mf in files[:-1]:
            mf.wrote = mf.flushed = mf.size
        last = files[-1]
        n = last.size // UNIT_SIZE
        lo, hi = 0, n  # first index whose size field is 0
        while lo < hi:
            mid = (lo + hi) // 2
            if UNIT.unpack_from(last.mm, mid * UNIT_SIZE)[1] != 0:
                lo = mid + 1
            else:
                hi = mid
        last.wrote = last.flushed = lo * UNIT_SIZE
        self._fix_tail()
        self.tail = last
        # first real unit: padding units are skipped for the minimum
        if self.min_logic_offset == 0:
            first = files[0]
            pos = 0
            while pos < first.wrote and UNIT.unpack_from(first.mm, pos)[1] == PAD_SIZE:
                pos += UNIT_SIZE
            self.min_logic_offset = first.start + pos

    def _fix_tail(self) -> None:
        """Zero whatever follows the written end in the last segment (e.g. a half-written unit)."""
        last = self.queue.files[-1]
        end = last.wrote
        if end < last.size and last.mm[end : end + UNIT_SIZE] != bytes(UNIT_SIZE):
            last.mm[end : last.size] = bytes(last.size - end)

    def truncate_beyond(self, phys_end: int) -> int:
        """Drop units whose record ends past commit-log offset ``phys_end`` (they point at data that
        recovery truncated); returns how many were dropped. Units are in commit-log order, so the
        boundary is found by binary search."""
        lo, hi = self.min_offset, self.max_offset  # first unit whose record ends past phys_end
        old_max = hi
        while lo < hi:
            mid = (lo + hi) // 2
            u = self.get_unit(mid)
            if u is None or u[1] == PAD_SIZE or u[0] + u[1] <= phys_end:
                lo = mid + 1
            else:
                hi = mid
        if lo >= old_max:
            return 0
        self.queue.truncate(lo * UNIT_SIZE)
        files = self.queue.files
        self.tail = files[-1] if files else None
        return old_max - lo

    def correct_min_offset(self, min_phys: int) -> None:
        """Advance the minimum past units whose messages were deleted from the commit log."""
        lo, hi = self.min_offset, self.max_offset
        while lo < hi:
            mid = (lo + hi) // 2
            u = self.get_unit(mid)
            if u is not None and u[1] != PAD_SIZE and u[0] < min_phys:
                lo = mid + 1
            elif u is None or u[1] == PAD_SIZE:
                lo = mid + 1
            else:
                hi = mid
        self.min_logic_offset = max(self.min_logic_offset, lo * UNIT_SIZE)

    def delete_expired_files(self, min_phys: int) -> int:
        """Delete segments whose last unit points before ``min_phys``; returns how many."""
        files = self.queue.files
        n = 0
        for mf in files[:-1]:
            if mf.wrote < UNIT_SIZE:
                break
            phys, _size, _tags = UNIT.unpack_from(mf.mm, mf.wrote - UNIT_SIZE)
            if phys < min_phys:
                n += 1
            else:
                break
        if n:
            self.queue.delete_first(n)
        return n

    def flush(self) -> None:
        self.queue.flush()

    def destroy(self) -> None:
        self.queue.destroy()
        try:
            os.rmdir(os.path.dirname(self.queue.dir))
        except OSError:
            pass
