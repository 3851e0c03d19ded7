"""The commit log: every record of every topic, appended to fixed-size segments.

A record never spans two segments. When ``record + 8`` bytes do not fit in what is left of the
current segment, an 8-byte end marker (``int32 remaining | BLANK_MAGIC``) is written and the record
goes to the start of the next segment; readers skip from a blank marker to the next segment.
"""

from __future__ import annotations

import logging
import struct
from typing import Callable, Iterator, NamedTuple

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
    patch_record,
    peek_record,
)

from .mapped_file import Allocator, MappedFile, MappedFileQueue

log = logging.getLogger(__name__)

#: an end-of-segment marker needs this much room, so every record leaves at least this much
END_FILE_MIN_BLANK_LENGTH = 8
_HEAD = struct.Struct(">iI")
_Q = struct.Struct(">q")
_I32 = struct.Struct(">i")


class ScanStop(NamedTuple):
    """Where a recovery scan stopped and why."""

    offset: int
    reason: str


class CommitLog:
    def __init__(self, directory: str, segment_size: int, allocator: Allocator | None = None):
        self.queue = MappedFileQueue(directory, segment_size, allocator, preallocate_next=allocator is not None)
        self.segment_size = segment_size
        #: the segment being appended to (writer thread); callers may use it for a fast path:
        #: ``if size + 8 <= tail.size - tail.wrote`` the record goes at ``tail.wrote``
        self.tail: MappedFile | None = None

    # --- positions ---
    @property
    def max_offset(self) -> int:
        return self.queue.max_offset

    @property
    def min_offset(self) -> int:
        return self.queue.min_offset

    @property
    def flushed_offset(self) -> int:
        return self.queue.flushed_offset

    def fits(self, size: int) -> bool:
        """Whether a record (or contiguous batch) of ``size`` bytes can be stored at all."""
        return size + END_FILE_MIN_BLANK_LENGTH <= self.segment_size

    # --- writing (writer thread only) ---
    def _segment_for(self, size: int, now_ms: int) -> MappedFile:
        mf = self.queue.last_for_write()
        if size + END_FILE_MIN_BLANK_LENGTH > mf.remaining:
            remaining = mf.remaining
            mf.mm[mf.wrote : mf.wrote + 8] = blank_record(remaining)
            mf.wrote = mf.size
            mf.last_write_ms = now_ms
            mf = self.queue.last_for_write()
        self.tail = mf
        return mf

    def reserve(self, size: int, now_ms: int) -> tuple[MappedFile, int]:
        """(segment, position) where a record of ``size`` bytes goes; the caller writes it there and
        then sets ``segment.wrote = position + size`` (writer thread only)."""
        mf = self._segment_for(size, now_ms)
        return mf, mf.wrote

    def append(self, record: bytes | bytearray, queue_offset: int, store_ts: int) -> int:
        """Write one record (from :func:`wire.message.build_record`), patch its append-time fields in
        place, and return its physical offset. Raises AllocationError if no segment can be created."""
        size = len(record)
        mf = self._segment_for(size, store_ts)
        pos = mf.wrote
        phys = mf.start + pos
        mm = mf.mm
        mm[pos : pos + size] = record
        patch_record(mm, pos, queue_offset, phys, store_ts)
        mf.wrote = pos + size
        mf.last_write_ms = store_ts
        return phys

    def append_batch(self, records: list, queue_offsets: list[int], store_ts: int) -> list[int]:
        """Write records contiguously in one segment (a batch is never split); returns their offsets."""
        total = sum(len(r) for r in records)
        mf = self._segment_for(total, store_ts)
        mm = mf.mm
        pos = mf.wrote
        out = []
        for rec, qo in zip(records, queue_offsets):
            size = len(rec)
            mm[pos : pos + size] = rec
            patch_record(mm, pos, qo, mf.start + pos, store_ts)
            out.append(mf.start + pos)
            pos += size
        mf.wrote = pos
        mf.last_write_ms = store_ts
        return out

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
        files = self.queue.files
        for mf in files:
            if mf.end <= offset:
                mf.wrote = mf.flushed = mf.size
        self.queue.truncate(offset, zero_tail=not clean)
        files = self.queue.files
        if files and offset >= files[-1].end:
            pass  # the last segment is exactly full; the next append creates a new one

    def iter_segments(self) -> Iterator[MappedFile]:
        return iter(self.queue.files)
