"""The commit log: every record of every topic, appended to fixed-size segments.

A record never spans two segments. When ``record + 8`` bytes do not fit in what is left of the
current segment, an 8-byte end marker (``int32 remaining | BLANK_MAGIC``) is written and the record
goes to the start of the next segment; readers skip from a blank marker to the next segment.

Writers go through :meth:`CommitLog.reserve` (where the bytes go: the write position, or the next
segment) and :meth:`CommitLog.commit` (write them there and advance the write position). The commit log
alone keeps that bookkeeping: what is committed is :attr:`CommitLog.max_offset`, which is what readers
see and what a flush covers, so a record is never flushed or read half-written.
"""

from __future__ import annotations

import logging
import struct
import time
from typing import Callable, NamedTuple

from ferrymq.server.histogram import Histogram
from ferrymq.wire.message import (
    BLANK_MAGIC,
    MAGIC_V1,
    MAGIC_V2,
    POS_STORETIMESTAMP_V4,
    POS_STORETIMESTAMP_V6,
    RecordError,
    RecordInfo,
    blank_record,
    body_crc,
    peek_record,
)

from .mapped_file import Allocator, MappedFile, MappedFileQueue

log = logging.getLogger(__name__)

#: an end-of-segment marker needs this much room, so every record leaves at least this much
END_FILE_MIN_BLANK_LENGTH = 8
_HEAD = struct.Struct(">iI")
_Q = struct.Struct(">q")
_I32 = struct.Struct(">i")
#: an :attr:`CommitLog.ahead_due` no commit reaches
_NEVER = 1 << 62


class ScanStop(NamedTuple):
    """Where a recovery scan stopped and why."""

    offset: int
    reason: str


class CommitLog:
    def __init__(self, directory: str, segment_size: int, allocator: Allocator | None = None):
        self.queue = MappedFileQueue(directory, segment_size, allocator, preallocate_next=allocator is not None)
        self.segment_size = segment_size
        #: the segment :meth:`reserve` last handed out (None until the first reservation after a load or
        #: truncation)
        self.tail: MappedFile | None = None
        #: how long the flushes that wrote something took (seconds): what /metrics shows as flush latency
        self.flush_times = Histogram()
        #: called (by the writer) once a commit ends at or past :attr:`ahead_due`, a commit-log offset: the
        #: store's work ahead of the writer (:meth:`MessageStore._prefault_task`) runs when there is some,
        #: which sets the next offset; until then it is not called again
        self.on_ahead: Callable[[], None] | None = None
        self.ahead_due = 0

    # --- positions ---
    @property
    def max_offset(self) -> int:
        """End of the committed data: readable, and what the next flush covers."""
        return self.queue.max_offset

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def flushed_offset(self) -> int:
        return self.queue.flushed_offset

    def flush(self) -> int:
        """fsync everything committed (any thread); returns :attr:`flushed_offset`."""
        before, started = self.queue.flushed_offset, time.perf_counter()
        flushed = self.queue.flush()
        if flushed != before:  # a periodic flush with nothing to write is not a flush worth timing
            self.flush_times.observe(time.perf_counter() - started)
        return flushed

    def fits(self, size: int) -> bool:
        """Whether a record (or contiguous batch) of ``size`` bytes can be stored at all."""
        return size + END_FILE_MIN_BLANK_LENGTH <= self.segment_size

    # --- writing (writer thread only) ---
    def reserve(self, size: int, now_ms: int) -> int:
        """The commit-log offset where ``size`` bytes (a record, or a batch: never split) go next.

        That is the write position, or the start of the next segment when the bytes and an end marker
        do not fit in this one (the rest of it is closed with the marker). Nothing reserved is readable
        or flushed before :meth:`commit`. Raises AllocationError (or OSError) when no segment can be
        created.
        """
        mf = self.tail
        if mf is None or size + END_FILE_MIN_BLANK_LENGTH > mf.size - mf.wrote:
            mf = self.queue.last_for_write()
            if size + END_FILE_MIN_BLANK_LENGTH > mf.size - mf.wrote:
                mf.mm[mf.wrote : mf.wrote + 8] = blank_record(mf.size - mf.wrote)
                mf.wrote = mf.size
                mf.last_write_ms = now_ms
                mf = self.queue.last_for_write()
            self.tail = mf
        return mf.start + mf.wrote

    def commit(self, offset: int, data: bytes | bytearray, now_ms: int) -> int:
        """Write ``data`` at ``offset`` (what :meth:`reserve` just returned) and make it part of the log:
        readable, and covered by the next flush (:attr:`max_offset` moves past it). Returns that end.
        Raises OSError from the write: nothing is committed then and the reservation stands."""
        mf = self.tail
        pos = offset - mf.start
        if pos != mf.wrote:
            raise ValueError(f"commit at {offset}, but the commit log's write position is {mf.start + mf.wrote}")
        mf.write_at(pos, data)  # not through the mapping: see MappedFile.write_at
        mf.wrote = end = pos + len(data)
        mf.last_write_ms = now_ms
        end += mf.start
        if end >= self.ahead_due and self.on_ahead is not None:
            self.ahead_due = _NEVER
            self.on_ahead()
        return end

    # --- reading ---
    def read(self, phys: int, size: int) -> memoryview | None:
        """Zero-copy view of ``size`` bytes at ``phys``; None if not (or no longer) stored."""
        mf = self.queue.find(phys)
        if mf is None:
            return None
        pos = phys - mf.start
        if pos + size > mf.wrote:
            return None
        try:
            return mf.view[pos : pos + size]
        except ValueError:  # the segment was deleted by retention meanwhile
            return None

    def segment_of(self, phys: int) -> tuple[memoryview, int, int] | None:
        """(view of the segment holding ``phys``, its start offset, end of its written part), or None.

        For readers taking many records in a row: they slice the view themselves while offsets stay in
        range, instead of looking the segment up for each record (slicing raises ValueError once the
        segment is deleted).
        """
        mf = self.queue.find(phys)
        if mf is None:
            return None
        return mf.view, mf.start, mf.start + mf.wrote

    def read_record(self, phys: int) -> memoryview | None:
        """The whole record starting at ``phys`` (size read from its TOTALSIZE)."""
        mf = self.queue.find(phys)
        if mf is None:
            return None
        pos = phys - mf.start
        if pos + 8 > mf.wrote:
            return None
        try:
            total, magic = _HEAD.unpack_from(mf.view, pos)
            if magic not in (MAGIC_V1, MAGIC_V2) or total <= 0 or pos + total > mf.wrote:
                return None
            return mf.view[pos : pos + total]
        except ValueError:  # the segment was deleted by retention meanwhile
            return None

    def store_timestamp(self, phys: int, size: int) -> int:
        """STORETIMESTAMP of the record at ``phys``, or -1 if it is gone."""
        view = self.read(phys, size)
        if view is None or size < 72:
            return -1
        (sys_flag,) = _I32.unpack_from(view, 36)
        pos = POS_STORETIMESTAMP_V6 if sys_flag & 0x10 else POS_STORETIMESTAMP_V4
        return _Q.unpack_from(view, pos)[0]

    def read_data(self, offset: int, max_bytes: int) -> memoryview | None:
        """Raw bytes from ``offset`` to at most ``max_bytes`` further, within one segment's written part
        (for replication: records, blank markers and all)."""
        mf = self.queue.find(offset)
        if mf is None:
            return None
        pos = offset - mf.start
        end = min(mf.wrote, pos + max_bytes)
        if end <= pos:
            return None
        try:
            return mf.view[pos:end]
        except ValueError:
            return None

    def append_data(self, offset: int, data) -> None:
        """Append raw bytes replicated from a master at ``offset`` (= :attr:`max_offset`, or anything for
        an empty log, which then starts at that offset's segment). Splits at segment ends."""
        view = memoryview(data)
        if self.queue.files and offset != self.max_offset:
            raise ValueError(f"replicated data starts at {offset} but the commit log ends at {self.max_offset}")
        if not self.queue.files:
            mf = self.queue.last_for_write(offset)
            mf.wrote = offset - mf.start  # a slave joining mid-segment: nothing before is readable
        while view:
            mf = self.queue.last_for_write(offset)
            if not self.queue.files or mf.start + mf.wrote != offset:
                raise ValueError(f"replicated data at {offset} does not continue segment {mf.path}")
            n = min(len(view), mf.size - mf.wrote)
            mf.mm[mf.wrote : mf.wrote + n] = view[:n]
            mf.wrote += n
            offset += n
            view = view[n:]
        self.tail = None
        self.ahead_due = 0

    def roll_next_file(self, phys: int) -> int:
        return phys + self.segment_size - phys % self.segment_size

    # --- recovery ---
    def scan(self, start: int, check_crc: bool, on_record: Callable[[RecordInfo, int], None] | None = None,
             limit: int | None = None) -> ScanStop:
        """Walk valid records from ``start`` (a record boundary) to the end of the valid data.

        Calls ``on_record(info, phys)`` for each. Stops at the first zero word (end of data), a bad
        magic, an impossible size or a CRC mismatch; returns where and why. Blank markers move to the
        next segment.
        """
        files = self.queue.files
        if not files:
            return ScanStop(start, "empty")
        phys = max(start, files[0].start)
        while True:
            mf = self.queue.find(phys)
            if mf is None:
                return ScanStop(phys, "end of segments")
            buf = mf.mm
            pos = phys - mf.start
            size_limit = mf.size
            while True:
                if limit is not None and mf.start + pos + 8 > limit:
                    return ScanStop(mf.start + pos, "incomplete")
                if pos + 8 > size_limit:
                    return ScanStop(mf.start + pos, "segment ended without a blank marker")
                total, magic = _HEAD.unpack_from(buf, pos)
                if total == 0 and magic == 0:
                    return ScanStop(mf.start + pos, "end of data")
                if magic == BLANK_MAGIC:
                    if total != size_limit - pos:
                        return ScanStop(mf.start + pos, f"blank marker says {total} bytes remain, {size_limit - pos} do")
                    phys = mf.end
                    break
                if limit is not None and magic != BLANK_MAGIC and mf.start + pos + total > limit:
                    return ScanStop(mf.start + pos, "incomplete")
                try:
                    info = peek_record(buf, pos)
                except RecordError as exc:
                    return ScanStop(mf.start + pos, f"invalid record: {exc.reason}")
                if info.commitlog_offset != mf.start + pos:
                    return ScanStop(mf.start + pos, f"PHYSICALOFFSET {info.commitlog_offset} does not match its position")
                if check_crc:
                    b = pos + info.body_pos
                    if body_crc(buf[b : b + info.body_len]) != info.body_crc:
                        return ScanStop(mf.start + pos, "body CRC mismatch")
                if on_record is not None:
                    on_record(info, mf.start + pos)
                pos += info.size

    def set_end(self, offset: int, clean: bool = False) -> None:
        """After recovery: everything before ``offset`` is valid, everything from it is dropped.

        ``clean``: the log was closed cleanly at ``offset``, so nothing past it needs zeroing.
        """
        self.tail = None
        self.ahead_due = 0
        files = self.queue.files
        for mf in files:
            if mf.end <= offset:
                mf.wrote = mf.flushed = mf.size
        self.queue.truncate(offset, zero_tail=not clean)
        files = self.queue.files
        if files and offset >= files[-1].end:
            pass  # the last segment is exactly full; the next append creates a new one
