"""Index files: message keys and UNIQ_KEYs -> commit-log offsets, in Apache's IndexFile layout.

File = header (40 B) | hash slots (hashSlotNum x int32) | items (indexNum x 20 B)::

    header: int64 beginTimestamp | int64 endTimestamp | int64 beginPhyOffset | int64 endPhyOffset |
            int32 hashSlotCount | int32 indexCount (starts at 1: item 0 is unused)
    slot:   int32 number of the newest item in this slot's chain (0 = empty)
    item:   int32 keyHash | int64 commitLogOffset | int32 seconds since beginTimestamp | int32 previous item

The indexed string is ``topic#key``. One deliberate difference from Apache: keyHash is
``crc32(utf8) & 0x7FFFFFFF`` instead of Java's ``|String.hashCode|`` — it is computed in C (0.3 µs
against 4 µs for the Python Java-hash over a 45-char key, on the append hot path) and never leaves the
store. Only hashes are compared here; :meth:`MessageStore.query_message` re-checks the real key.
Files are named by their creation time ``yyyyMMddHHmmssSSS``.
"""

from __future__ import annotations

import logging
import mmap
import os
import struct
import threading
import time
import zlib

from ferrymq.wire import native
from ferrymq.wire.batch import INDEX_ITEM

from .mapped_file import AllocationError, _create_file

log = logging.getLogger(__name__)

_indexc = native.load("ferrymq.server.store._indexc")  # IndexFile.put for a run of items in C
_put_items = None if _indexc is None else _indexc.put_items

HEADER = struct.Struct(">qqqqii")
HEADER_SIZE = 40
SLOT = struct.Struct(">i")
ITEM = struct.Struct(">iqii")
ITEM_SIZE = 20
KEY_SEPARATOR = "#"


def key_hash(key: str) -> int:
    return zlib.crc32(key.encode()) & 0x7FFFFFFF


def key_items(topic: str, keys: str | None, uniq_key: str | None, phys: int) -> bytes:
    """The packed index items (:data:`wire.batch.INDEX_ITEM`) of one record: its UNIQ_KEY and each
    space-separated token of its KEYS, as :func:`wire.batch.write` makes them for a batch's records."""
    crc = zlib.crc32
    pack = INDEX_ITEM.pack
    items = []
    if uniq_key:
        items.append(pack(crc(f"{topic}#{uniq_key}".encode()) & 0x7FFFFFFF, phys))
    if keys:
        for k in keys.split(" "):
            if k:
                items.append(pack(crc(f"{topic}#{k}".encode()) & 0x7FFFFFFF, phys))
    return b"".join(items)


def _file_name(ms: int) -> str:
    t = time.localtime(ms / 1000)
    return time.strftime("%Y%m%d%H%M%S", t) + f"{ms % 1000:03d}"


class IndexFile:
    def __init__(self, path: str, slot_num: int, index_num: int, *, create: bool = False,
                 begin_phy: int = 0, begin_ts: int = 0):
        size = HEADER_SIZE + slot_num * 4 + index_num * ITEM_SIZE
        if create:
            _create_file(path, size)
        elif os.path.getsize(path) != size:
            raise ValueError(
                f"index file {path} is {os.path.getsize(path)} bytes, expected {size} for "
                f"maxHashSlotNum={slot_num} maxIndexNum={index_num}; set those to what created it"
            )
        self.path = path
        self.slot_num = slot_num
        self.index_num = index_num
        self.items_base = HEADER_SIZE + slot_num * 4
        self.fd = os.open(path, os.O_RDWR)
        self.mm = mmap.mmap(self.fd, size)
        if create:
            self.begin_ts, self.end_ts, self.begin_phy, self.end_phy = begin_ts, begin_ts, begin_phy, begin_phy
            self.slot_count, self.index_count = 0, 1
            self._write_header()
        else:
            (self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
             self.slot_count, self.index_count) = HEADER.unpack_from(self.mm, 0)
            if self.index_count < 1:
                self.index_count = 1
            self._recount()
        self.dirty = create
        self.released = 0

    def _recount(self) -> None:
        """Items are appended in order and the header lags them (written at flush): after a crash,
        count the items written past the header's indexCount and restore the end fields from them."""
        count = self.index_count
        mm = self.mm
        while count < self.index_num:
            h, phys, diff, prev = ITEM.unpack_from(mm, self.items_base + count * ITEM_SIZE)
            if h == 0 and phys == 0 and diff == 0 and prev == 0:
                break
            if count <= 1:
                self.begin_phy = phys
            self.end_phy = max(self.end_phy, phys)
            self.end_ts = max(self.end_ts, self.begin_ts + diff * 1000)
            count += 1
        if count != self.index_count:
            self.index_count = count
            self._write_header()

    def _write_header(self) -> None:
        HEADER.pack_into(self.mm, 0, self.begin_ts, self.end_ts, self.begin_phy, self.end_phy,
                         self.slot_count, self.index_count)

    @property
    def full(self) -> bool:
        return self.index_count >= self.index_num

    def put(self, h: int, phys: int, store_ts: int) -> bool:
        """Add an item for key hash ``h``; False when the file is full."""
        count = self.index_count
        if count >= self.index_num:
            return False
        mm = self.mm
        slot_pos = HEADER_SIZE + (h % self.slot_num) * 4
        (prev,) = SLOT.unpack_from(mm, slot_pos)
        if prev <= 0 or prev > count:
            prev = 0
        if count <= 1:
            self.begin_ts, self.begin_phy = store_ts, phys
        diff = (store_ts - self.begin_ts) // 1000
        diff = 0 if diff < 0 else (0x7FFFFFFF if diff > 0x7FFFFFFF else diff)
        # order matters for crash safety: item, then count, then slot (a torn put leaves an unreachable item)
        ITEM.pack_into(mm, self.items_base + count * ITEM_SIZE, h, phys, diff, prev)
        if prev == 0:
            self.slot_count += 1
        self.index_count = count + 1
        if phys > self.end_phy or count <= 1:
            self.end_phy = phys
        if store_ts > self.end_ts:
            self.end_ts = store_ts
        SLOT.pack_into(mm, slot_pos, count)
        self.dirty = True  # the header is written at flush/close; load() re-counts items past it
        return True

    def put_many(self, items: bytes, start: int, store_ts: int) -> int:
        """:meth:`put` for packed (key hash, commit-log offset) items from item ``start`` on, until the
        file is full; returns the first item not added."""
        size = INDEX_ITEM.size
        i, n = start, len(items) // size
        while i < n and (self.index_count <= 1 or _put_items is None):  # the first item sets the begin fields
            h, phys = INDEX_ITEM.unpack_from(items, i * size)
            if not self.put(h, phys, store_ts):
                return i
            i += 1
        if i >= n or self.index_count >= self.index_num:
            return i
        i, self.index_count, slots, max_phys = _put_items(
            self.mm, items, i, self.index_count, self.index_num, self.slot_num, self.items_base, self.begin_ts,
            store_ts)
        self.slot_count += slots
        if max_phys > self.end_phy:
            self.end_phy = max_phys
        if store_ts > self.end_ts:
            self.end_ts = store_ts
        self.dirty = True
        return i

    def select(self, h: int, max_num: int, begin: int, end: int, out: list[int]) -> None:
        """Append to ``out`` the commit-log offsets of items with hash ``h`` stored in [begin, end]."""
        mm = self.mm
        count = self.index_count
        (cur,) = SLOT.unpack_from(mm, HEADER_SIZE + (h % self.slot_num) * 4)
        seen = 0
        while 0 < cur < count and len(out) < max_num and seen < count:
            ih, phys, diff, prev = ITEM.unpack_from(mm, self.items_base + cur * ITEM_SIZE)
            ts = self.begin_ts + diff * 1000
            if ih == h and begin <= ts <= end:
                out.append(phys)
            if prev <= 0 or prev >= cur:
                break
            cur = prev
            seen += 1

    def overlaps(self, begin: int, end: int) -> bool:
        return self.begin_ts <= end and self.end_ts >= begin

    def flush(self, sync: bool = True) -> None:
        """Write the header; with ``sync``, fsync the file. Either way drop the written item pages."""
        if self.dirty and self.fd >= 0:
            self._write_header()
            if sync:
                self.dirty = False
                os.fdatasync(self.fd)
            self._release_items()

    def _release_items(self) -> None:
        """Drop written item pages from this process (they are appended once and rarely read), so RSS
        does not grow with the number of indexed messages; queries fault them back in."""
        page = mmap.PAGESIZE
        start = self.released or -(-self.items_base // page) * page
        upto = (self.items_base + self.index_count * ITEM_SIZE) // page * page
        if upto > start:
            try:
                self.mm.madvise(mmap.MADV_DONTNEED, start, upto - start)
                self.released = upto
            except (OSError, ValueError):
                pass

    def close(self) -> None:
        if self.fd >= 0 and self.dirty:
            self._write_header()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        try:
            self.mm.close()
        except BufferError:
            pass

    def destroy(self) -> None:
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


class IndexService:
    """The index files of a store: build entries at dispatch, answer key queries, trim old files."""

    def __init__(self, directory: str, slot_num: int, index_num: int):
        self.dir = directory
        self.slot_num = slot_num
        self.index_num = index_num
        self.files: list[IndexFile] = []
        self._lock = threading.Lock()

    def load(self) -> None:
        if not os.path.isdir(self.dir):
            return
        files = []
        for name in sorted(os.listdir(self.dir)):
            path = os.path.join(self.dir, name)
            if name.endswith(".alloc"):
                os.unlink(path)
                continue
            try:
                files.append(IndexFile(path, self.slot_num, self.index_num))
            except ValueError as exc:
                log.error("skipping index file: %s", exc)
        self.files = files

    @property
    def end_phy(self) -> int:
        files = self.files
        return files[-1].end_phy if files else 0

    def _writable(self, phys: int, store_ts: int) -> IndexFile:
        files = self.files
        if files and not files[-1].full:
            return files[-1]
        os.makedirs(self.dir, exist_ok=True)
        ms = int(time.time() * 1000)
        path = os.path.join(self.dir, _file_name(ms))
        while os.path.exists(path):
            ms += 1
            path = os.path.join(self.dir, _file_name(ms))
        prev = files[-1] if files else None
        f = IndexFile(path, self.slot_num, self.index_num, create=True,
                      begin_phy=prev.end_phy if prev else phys, begin_ts=prev.end_ts if prev else store_ts)
        with self._lock:
            self.files = self.files + [f]
        return f

    def add_items(self, items: bytes, store_ts: int) -> None:
        """Add packed (key hash, commit-log offset) items (:func:`wire.batch.write` makes them)."""
        i, n = 0, len(items) // INDEX_ITEM.size
        while i < n:
            files = self.files
            f = files[-1] if files and not files[-1].full else None
            if f is None:
                _h, phys = INDEX_ITEM.unpack_from(items, i * INDEX_ITEM.size)
                try:
                    f = self._writable(phys, store_ts)
                except (AllocationError, OSError) as exc:
                    log.error("%d index entries dropped: cannot create an index file (%s)", n - i, exc)
                    return
            i = f.put_many(items, i, store_ts)

    def query(self, topic: str, key: str, max_num: int, begin: int, end: int) -> tuple[list[int], int, int]:
        """(commit-log offsets newest first, last index update timestamp, last index update offset)."""
        h = key_hash(f"{topic}#{key}")
        out: list[int] = []
        files = self.files
        for f in reversed(files):
            if len(out) >= max_num:
                break
            if f.overlaps(begin, end):
                try:
                    f.select(h, max_num, begin, end, out)
                except ValueError:  # deleted by retention meanwhile
                    continue
        last = files[-1] if files else None
        return out, (last.end_ts if last else 0), (last.end_phy if last else 0)

    def flush(self, active: bool = True) -> None:
        """fsync every written file; with ``active=False`` the newest one, while it still takes items,
        only gets its header written and its item pages released (unmapping keeps them dirty in the
        page cache, so a process kill loses nothing)."""
        files = self.files
        for f in files:
            f.flush(sync=active or f is not files[-1] or f.full)

    def delete_expired(self, min_phys: int) -> int:
        """Delete files (never the newest) whose every entry points before ``min_phys``."""
        with self._lock:
            files = self.files
            gone = [f for f in files[:-1] if f.end_phy < min_phys]
            if not gone:
                return 0
            self.files = [f for f in files if f not in gone]
        for f in gone:
            f.destroy()
        return len(gone)

    def close(self) -> None:
        for f in self.files:
            f.close()
