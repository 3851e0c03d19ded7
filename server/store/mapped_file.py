"""Fixed-size memory-mapped segment files and the ordered queue of them (Apache MappedFile/MappedFileQueue).

A segment is named by the 20-digit absolute offset of its first byte. Files are preallocated with
``posix_fallocate`` so that a full disk shows up as an error when a segment is created (off the hot
path, by :class:`Allocator`) rather than as SIGBUS on a write into a sparse mapping.

Once the writer is a sixteenth into a segment, the next one (made ahead of time) is written full of zeros
in the background (:meth:`Allocator.fill`): on ext4 a record stored into a fallocated, never-written
("unwritten") block makes the next fdatasync convert the block's extent too, which made SYNC_FLUSH fsyncs
~2x slower; the zeros also leave the pages cached, so faulting them in costs no zeroing. The price is
writing those segments twice; a broker that writes little writes no zeros.

The zeros are written in 256 KiB pieces, and that sets the size of the page-cache folios the writer's
records land in: kernels whose page cache uses large folios (ext4 since Linux 6.x) write a dirty folio
back whole, so with one 8 MiB write a 1 KiB record dirtied a 2 MiB folio and every group-commit fsync
wrote megabytes (measured: 21 GB written to the disk for 0.3 GB of records, fdatasync 0.5 ms instead of
0.1 ms). Single pages would cost the writer more faults and write-protect round trips (SYNC_FLUSH batch
sends measured 19 % slower).

A segment nobody filled (the first of a fresh store, which every new broker and every test writes first)
is prepared a bounded distance ahead of the writer instead (:meth:`MappedFile.populate`): its unwritten
pages are dirtied as they are (zeros) and written out, a step at a time, so the records after them land
on written blocks. Zeros cannot be written there: the writer is in that file, and a write of zeros
racing it could land on a record.

Both are what ``warmMapedFileEnable`` (Apache's key for writing a new segment's pages ahead of use) turns
on; FerryMQ's default is true. With it false the store writes nothing ahead of the writer and a segment
costs its preallocated blocks only (a development store: SYNC_FLUSH fsyncs convert extents as they go).

Threads: one writer (the reactor) appends; the flush thread fsyncs and releases pages; the allocator
makes and fills the next segment; the cleaner deletes old segments. The list of segments is replaced,
never mutated in place (copy on write), so a reader holding ``queue.files`` sees a consistent snapshot
without a lock. Deleted segments are unlinked but their mapping stays valid until the last reader's
memoryview is gone.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import mmap
import os
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor

from ferrymq.wire import native

log = logging.getLogger(__name__)

_writec = native.load("ferrymq.server.store._writec")  # pwrite keeping the GIL (see MappedFile.write_at)
_pwrite_all = None if _writec is None else _writec.pwrite_all

PAGE = mmap.PAGESIZE

#: Linux 5.14+: fault pages of a mapping in ahead of use. READ, not WRITE: the pages come in as clean
#: zero pages (no extra writeback); the writer's first store then only marks them dirty.
MADV_POPULATE_READ = 22
MADV_POPULATE_WRITE = 23
try:
    _madvise = ctypes.CDLL(None, use_errno=True).madvise  # a ctypes call releases the GIL
    _madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    _madvise.restype = ctypes.c_int
except (OSError, AttributeError):  # pragma: no cover - non-Linux
    _madvise = None
#: whether :meth:`MappedFile.populate` prepares unwritten blocks (until the kernel turns MADV_POPULATE_WRITE down)
_prepare = True
#: sync_file_range(2) flags: start writing the range and wait until it is on the device (no metadata)
_SYNC_RANGE_WAIT = 1 | 2 | 4
try:
    _sync_file_range = ctypes.CDLL(None, use_errno=True).sync_file_range
    _sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    _sync_file_range.restype = ctypes.c_int
except (OSError, AttributeError):  # pragma: no cover - non-Linux
    _sync_file_range = None


def segment_name(offset: int) -> str:
    return f"{offset:020d}"


class AllocationError(OSError):
    """A segment file could not be created (usually: the disk is full)."""


class SegmentSizeError(ValueError):
    """A segment on disk is not the configured size: the store was created with other ``mappedFileSize*``."""


#: zeros are written (and written out) in steps of this size: the writer waits at most one step when it
#: needs the file, and the dirty pages stay bounded
FILL_STEP = 8 << 20
#: ... in pieces of this size (see :func:`_fill_zeros`)
FILL_PIECE = 256 << 10
_ZEROS = bytes(FILL_STEP)  # calloc'ed: the kernel's shared zero page until written
#: how far ahead of the writer :meth:`MappedFile.populate` prepares a segment nobody filled, and in
#: steps of what size: each step's extent conversion costs the next group commit one journal commit,
#: and a group commit that starts while a step's pages are dirty writes them too
PREPARE_AHEAD = 16 << 20
PREPARE_STEP = 1 << 20
#: chunk in which ``MappedFile.zero_from`` reads a segment's tail back to find what is not zero yet
_ZERO_CHECK = 1 << 20
_ZEROS_CHECK = _ZEROS[:_ZERO_CHECK]


def _fill_zeros(fd: int, size: int, stop: threading.Event) -> int:
    """Write zeros over ``[0, size)`` of a fresh (fallocated) segment until ``stop`` is set; returns how
    far it got.

    Written in :data:`FILL_PIECE` pieces: the page cache keeps a write's pages in folios no larger than the
    write, and a fsync writes every dirty folio back whole (module docstring). Each step's pages are written
    out at once (``sync_file_range``: data only, so metadata is written once, at the closing fdatasync, not
    every step: that is what the group commit's fsyncs would queue behind).
    """
    view = memoryview(_ZEROS)
    done = 0
    while done < size and not stop.is_set():
        step = min(FILL_STEP, size - done)
        pos = done
        while pos < done + step:
            pos += os.pwrite(fd, view[: min(FILL_PIECE, done + step - pos)], pos)
        if _sync_file_range is None or _sync_file_range(fd, done, step, _SYNC_RANGE_WAIT) != 0:
            os.fdatasync(fd)
        done += step
    os.fdatasync(fd)
    return done


def _fill_file(path: str, size: int, stop: threading.Event) -> int:
    """:func:`_fill_zeros` over an existing segment file (0 if there is none)."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return 0  # its creation failed; the writer will make it on the spot
    try:
        return _fill_zeros(fd, size, stop)
    finally:
        os.close(fd)


def _unwritten(fd: int, start: int, end: int) -> list[tuple[int, int]]:
    """The parts of ``[start, end)`` the file system reports as holes (``SEEK_HOLE``: never written, or
    preallocated and unwritten with nothing cached); all of it where ``SEEK_HOLE`` is not supported."""
    out = []
    pos = start
    try:
        while pos < end:
            hole = os.lseek(fd, pos, os.SEEK_HOLE)
            if hole >= end:
                break
            try:
                data = min(os.lseek(fd, hole, os.SEEK_DATA), end)
            except OSError as exc:
                if exc.errno != errno.ENXIO:
                    raise
                data = end  # holes up to the end of the file
            out.append((hole, data))
            pos = data
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
            raise
        return [(start, end)]
    return out


def _next_hole(fd: int, start: int, size: int) -> int:
    """Where the first hole (:func:`_unwritten`) at or after ``start`` begins; ``size`` if none or when
    ``SEEK_HOLE`` is not supported (nothing can be known to be written then)."""
    try:
        return min(os.lseek(fd, start, os.SEEK_HOLE), size)
    except OSError as exc:
        if exc.errno in (errno.EINVAL, errno.EOPNOTSUPP):
            return start
        if exc.errno == errno.ENXIO:  # start at or past the end of the file
            return size
        raise


def _dirty_in_place(fd: int, start: int, end: int) -> bool:
    """Mark the pages of ``[start, end)`` (page-aligned) dirty without changing a byte, then write them out.

    ``MADV_POPULATE_WRITE`` takes a write fault on each page without touching its contents, so a record
    written there meanwhile survives, where a write of zeros could overwrite it. The mapping is its own,
    with ``MADV_RANDOM``: a fault then reads a single page, and the page cache keeps single-page folios
    (readahead would make large ones, which every group commit writes back whole). ``sync_file_range``
    writes the pages and converts their extents now, not in the group commit's fdatasync. False: this
    kernel has no ``MADV_POPULATE_WRITE`` (Linux < 5.14).
    """
    mm = mmap.mmap(fd, end - start, offset=start)
    try:
        mm.madvise(mmap.MADV_RANDOM)
        anchor = ctypes.c_char.from_buffer(mm)
        addr = ctypes.addressof(anchor)
        del anchor
        if _madvise(addr, end - start, MADV_POPULATE_WRITE) != 0:
            err = ctypes.get_errno()
            if err == errno.EINVAL:
                return False
            raise OSError(err, f"madvise(MADV_POPULATE_WRITE): {os.strerror(err)}")
    finally:
        mm.close()
    if _sync_file_range is None or _sync_file_range(fd, start, end - start, _SYNC_RANGE_WAIT) != 0:
        os.fdatasync(fd)
    return True


def _create_file(path: str, size: int) -> None:
    """Create a segment, preallocated."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{threading.get_ident()}.alloc"  # per thread: two creators never share a temp file
    fd = os.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        try:
            os.posix_fallocate(fd, 0, size)
        except OSError as exc:
            raise AllocationError(exc.errno, f"cannot preallocate {size} bytes for {path}: {exc.strerror}") from None
    except BaseException:
        os.close(fd)
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    os.close(fd)
    # A crash never leaves a half-allocated file under a segment name, and a file already there (made by
    # another creator) is never replaced: a link fails where a rename would silently swap the inode.
    try:
        os.link(tmp, path)
    except FileExistsError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.EPERM, errno.EOPNOTSUPP, errno.EXDEV):
            os.unlink(tmp)
            raise
        os.rename(tmp, path)  # a file system without hard links: the writer guards against a second creator
        return
    os.unlink(tmp)


class MappedFile:
    """One segment: ``[start, start + size)`` of the log, mapped read-write."""

    __slots__ = ("path", "start", "size", "fd", "mm", "view", "wrote", "flushed", "released",
                 "last_write_ms", "deleted", "addr", "populated")

    def __init__(self, path: str, start: int, size: int, *, create: bool = False):
        if create and not os.path.exists(path):
            _create_file(path, size)
        actual = os.path.getsize(path)
        if actual != size:
            raise SegmentSizeError(
                f"segment {path} is {actual} bytes but the configured segment size is {size}: a store keeps "
                f"the sizes it was created with; set the matching mappedFileSize* key, or use a new storePathRootDir"
            )
        self.path = path
        self.start = start
        self.size = size
        self.fd = os.open(path, os.O_RDWR)
        self.mm = mmap.mmap(self.fd, size)
        self.view = memoryview(self.mm).toreadonly()
        self.wrote = 0
        self.flushed = 0
        self.released = 0  # bytes from 0 already madvise(DONTNEED)ed
        self.last_write_ms = int(os.path.getmtime(path) * 1000)
        self.deleted = False
        self.populated = 0
        self.addr = 0
        if _madvise is not None:
            anchor = ctypes.c_char.from_buffer(self.mm)
            self.addr = ctypes.addressof(anchor)
            del anchor  # drop the buffer export at once: the mapping must stay closable

    @property
    def end(self) -> int:
        return self.start + self.size

    @property
    def remaining(self) -> int:
        return self.size - self.wrote

    @property
    def full(self) -> bool:
        return self.wrote >= self.size

    def flush(self) -> int:
        """fdatasync what was written since the last flush; returns the flushed position."""
        pos = self.wrote
        if pos > self.flushed and not self.deleted:
            os.fdatasync(self.fd)  # releases the GIL; on Linux this covers pages dirtied through the mapping
            self.flushed = pos
        return self.flushed

    def write_at(self, pos: int, data: bytes | bytearray) -> None:
        """Write ``data`` at ``pos`` with ``pwrite`` (the mapping sees it: one page cache).

        The put paths write records this way instead of storing through the mapping: a store into a
        mapped page takes a write fault whenever the page is clean, and every SYNC_FLUSH fsync cleans
        the page being written, so the writer faulted again after each group commit; ``pwrite`` copies
        into the page cache with no fault (measured alone, 16 records of 1.1 KiB per write and an
        fdatasync every 10 writes into a zero-filled segment: 0.5–0.6 against 1.0–1.1 µs of CPU per
        record). It goes through ``_writec``, which keeps the GIL (see there); without that module built,
        the record is stored through the mapping as before. Raises OSError (e.g. EIO): nothing counts
        as written then."""
        if _pwrite_all is None:
            self.mm[pos : pos + len(data)] = data
        else:
            _pwrite_all(self.fd, data, pos)

    def release_pages(self, upto: int) -> None:
        """Drop mapped pages below ``upto`` from this process (they stay in the page cache).

        Keeps RSS independent of how much has been written; readers simply fault the pages back in.
        """
        upto = upto - upto % PAGE
        if upto > self.released and not self.deleted:
            try:
                self.mm.madvise(mmap.MADV_DONTNEED, self.released, upto - self.released)
            except (OSError, ValueError):
                return
            self.released = upto

    def populate(self, upto: int) -> None:
        """Get the pages ahead of the writer ready for its records, from a background thread; ``upto``:
        how far the caller would like them ready.

        The unwritten blocks of a segment nobody filled are prepared (module docstring) at most
        :data:`PREPARE_AHEAD` past the writer, in :data:`PREPARE_STEP` steps: SYNC_FLUSH group commits on
        a fresh store's first segment otherwise each convert the extents of the records they cover
        (fdatasync p50 0.3–0.8 ms against 0.17–0.2 ms on written blocks, measured with
        ``benchmarks.group_commit_bench``), and the records land in the large folios readahead makes.
        Blocks already written (the allocator's zeros, or a segment resumed after a restart) are skipped.
        On a kernel without ``MADV_POPULATE_WRITE`` (Linux < 5.14) the pages are only faulted into the
        mapping (``MADV_POPULATE_READ``: the writer's faults then cost no page zeroing).
        The system calls run without the GIL.
        """
        global _madvise, _prepare
        wrote = self.wrote
        start = max(self.populated, wrote - wrote % PAGE)
        if self.deleted or not self.addr or _madvise is None:
            return
        if _prepare:
            end = min(-(-min(upto, wrote + PREPARE_AHEAD) // PAGE) * PAGE, self.size)
            if end <= start or (end - start < PREPARE_STEP and end < self.size):
                return  # whole steps only: each costs a journal commit
            if not self.populated:
                # a segment resumed after a restart: what lies between the writer and the first hole was
                # written already, and is passed over in one look (asking again from every step would
                # scan it each time, holding the file's lock the writer's pwrite needs)
                try:
                    hole = _next_hole(self.fd, start, self.size)
                except OSError as exc:
                    log.warning("looking for unwritten blocks in %s failed: %s", self.path, exc)
                    return
                if hole >= self.size:
                    self.populated = self.size
                    return
                start = max(start, hole - hole % PAGE)
                if end <= start:
                    self.populated = start
                    return
            pos = start
            try:
                while pos < end:
                    step = min(pos + PREPARE_STEP, end)
                    for hole, data in _unwritten(self.fd, pos, step):
                        if not _dirty_in_place(self.fd, hole - hole % PAGE, min(-(-data // PAGE) * PAGE, self.size)):
                            log.info("MADV_POPULATE_WRITE unsupported here; segments nobody filled are only "
                                     "populated ahead of the writer")
                            _prepare = False
                            return
                    self.populated = pos = step
            except (OSError, ValueError) as exc:  # ValueError: closed meanwhile (shutdown)
                if not self.deleted and self.addr:
                    log.warning("preparing %s ahead of the writer failed at %d: %s", self.path, pos, exc)
            return
        upto = min(-(-upto // PAGE) * PAGE, self.size)
        if upto <= start:
            return
        if _madvise(self.addr + start, upto - start, MADV_POPULATE_READ) != 0:
            err = ctypes.get_errno()
            if err == 22:  # EINVAL: kernel without MADV_POPULATE_READ; stop trying
                log.info("MADV_POPULATE_READ unsupported here; segments are faulted in by the writer")
                _madvise = None
            return
        self.populated = upto

    def populate_due(self) -> int:
        """The write position from which :meth:`populate` has a whole step to do again (:attr:`size`: never,
        the segment being prepared to its end): the commit log wakes its caller there rather than on a timer."""
        if self.populated >= self.size or self.deleted or not self.addr or _madvise is None:
            return self.size
        return max(0, min(self.populated + PREPARE_STEP - PREPARE_AHEAD, self.size - PREPARE_AHEAD))

    def zero_from(self, pos: int) -> None:
        """Make ``[pos, size)`` read as zeros, so stale bytes (a torn record) can never pass for records.

        Only data that is not zero already is overwritten, and the zeros are on disk before this returns.
        Why not truncate and re-allocate: that turns a segment the allocator wrote full of zeros back
        into unwritten extents, and every group commit after a restart would pay the extent conversion
        again for the rest of the segment. Ranges the file system reports as holes (``SEEK_DATA``:
        never written, or unwritten extents) read as zeros and are skipped; the rest is read back in
        1 MiB chunks (after a crash it is in the page cache: ~0.1 s per GiB).
        """
        if pos >= self.size:
            return
        fd, size = self.fd, self.size
        buf = bytearray(_ZERO_CHECK)
        wrote = False
        off = pos
        while off < size:
            try:
                data = os.lseek(fd, off, os.SEEK_DATA)
                end = min(os.lseek(fd, data, os.SEEK_HOLE), size)
            except OSError as exc:
                if exc.errno == errno.ENXIO:  # nothing but holes from ``off`` on
                    break
                data, end = off, size  # no SEEK_DATA here: check everything
            while data < end:
                n = os.preadv(fd, [memoryview(buf)[: min(_ZERO_CHECK, end - data)]], data)
                if n <= 0:
                    break
                if (buf != _ZEROS_CHECK) if n == _ZERO_CHECK else (buf[:n] != _ZEROS_CHECK[:n]):
                    os.pwrite(fd, _ZEROS_CHECK[:n], data)
                    wrote = True
                data += n
            off = end
        if wrote:
            os.fdatasync(fd)
        self.released = min(self.released, pos - pos % PAGE)

    def close(self) -> None:
        self.addr = 0
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
        try:
            self.view.release()
            self.mm.close()
        except BufferError:
            pass  # a reader still holds a memoryview: the mapping goes when it does

    def destroy(self) -> None:
        self.deleted = True
        self.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass

    def __repr__(self) -> str:
        return f"MappedFile({self.path}, wrote={self.wrote}, flushed={self.flushed})"


class Allocator:
    """Creates the next segment file ahead of time in a background thread (Apache AllocateMappedFileService),
    and writes it full of zeros when asked (see the module docstring)."""

    def __init__(self, fill: bool = True):
        """``fill``: honour :meth:`fill` requests."""
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="store-alloc")
        self._pending: dict[str, Future] = {}
        self._filling: dict[str, tuple[Future, threading.Event]] = {}
        self._taken: set[str] = set()  # never fill these: the writer has them
        self._lock = threading.Lock()
        self.fill_enabled = fill

    def request(self, path: str, size: int) -> None:
        with self._lock:
            # a taken path is the writer's: it may be creating it right now, and a second creator racing it
            # would fail (or, worse, put a fresh file in place of the one the writer has mapped)
            if path in self._pending or path in self._taken or os.path.exists(path):
                return
            self._pending[path] = self._pool.submit(_create_file, path, size)

    def fill(self, path: str, size: int) -> None:
        """Write ``path`` (requested, not yet taken) full of zeros in the background; once per file."""
        with self._lock:
            if not self.fill_enabled or path in self._filling or path in self._taken:
                return
            stop = threading.Event()
            self._filling[path] = (self._pool.submit(_fill_file, path, size, stop), stop)

    def take(self, path: str, size: int) -> int:
        """Make sure ``path`` exists (wait for a pending allocation, or create it now), cutting its zeros
        short if they are still being written. Returns how many bytes at its head are written zeros."""
        with self._lock:
            fut = self._pending.pop(path, None)
            fut_fill, stop = self._filling.pop(path, (None, None))
            self._taken.add(path)
        if stop is not None:
            stop.set()  # the writer needs it now; the part already written still helps
        filled = 0
        if fut is not None:
            try:
                fut.result()
            except OSError as exc:
                log.warning("background preallocation of %s failed (%s); retrying now", path, exc)
        if fut_fill is not None:
            try:
                filled = fut_fill.result()
            except OSError as exc:
                log.warning("writing zeros into %s failed (%s); records land on preallocated blocks there", path, exc)
            if filled < size:
                log.info("commit-log segment %s was needed with %d of its %d MiB written as zeros: the writer "
                         "outpaces the allocator", path, filled >> 20, size >> 20)
        if not os.path.exists(path):
            _create_file(path, size)
        return filled

    def discard(self, path: str) -> None:
        with self._lock:
            fut = self._pending.pop(path, None)
            fut_fill, stop = self._filling.pop(path, (None, None))
        if stop is not None:
            stop.set()
        for f in (fut, fut_fill):
            if f is not None:
                try:
                    f.result()
                except OSError:
                    pass

    def shutdown(self) -> None:
        with self._lock:
            for _fut, stop in self._filling.values():
                stop.set()
        self._pool.shutdown(wait=True)
        self._pending.clear()
        self._filling.clear()


class MappedFileQueue:
    """The segments of one log (the commit log, or one consume queue) in offset order."""

    def __init__(self, directory: str, file_size: int, allocator: Allocator | None = None, preallocate_next: bool = False):
        self.dir = directory
        self.file_size = file_size
        self.files: list[MappedFile] = []
        self.allocator = allocator
        self.preallocate_next = preallocate_next and allocator is not None
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()  # the group-commit and periodic flushes must not interleave

    # --- loading ---
    def load(self) -> None:
        """Map the existing segments (positions are set by recovery). Stray temp files are removed."""
        if not os.path.isdir(self.dir):
            return
        names = []
        for name in os.listdir(self.dir):
            if name.endswith(".alloc"):
                os.unlink(os.path.join(self.dir, name))
            elif len(name) == 20 and name.isdigit():
                names.append(name)
        files = []
        for name in sorted(names):
            mf = MappedFile(os.path.join(self.dir, name), int(name), self.file_size)
            mf.wrote = mf.flushed = mf.size
            files.append(mf)
        self.files = files

    # --- positions ---
    @property
    def min_offset(self) -> int:
        files = self.files
        return files[0].start if files else 0

    @property
    def max_offset(self) -> int:
        """Absolute offset just past the last written byte."""
        files = self.files
        return files[-1].start + files[-1].wrote if files else 0

    @property
    def flushed_offset(self) -> int:
        """Absolute offset up to which everything is on disk."""
        for mf in self.files:
            if mf.flushed < mf.size:
                return mf.start + mf.flushed
        files = self.files
        return files[-1].end if files else 0

    def find(self, offset: int) -> MappedFile | None:
        files = self.files
        if not files:
            return None
        idx = (offset - files[0].start) // self.file_size
        if 0 <= idx < len(files):
            mf = files[idx]
            if mf.start <= offset < mf.end:
                return mf
        for mf in files:  # gaps (should not happen): fall back to a scan
            if mf.start <= offset < mf.end:
                return mf
        return None

    # --- writing ---
    def last_for_write(self, start_if_empty: int = 0) -> MappedFile:
        """The segment to append to, creating (or taking the preallocated) next one when needed.

        Raises :class:`AllocationError` when the file cannot be created.
        """
        files = self.files
        if files and not files[-1].full:
            return files[-1]
        start = files[-1].end if files else start_if_empty - start_if_empty % self.file_size
        return self._new_file(start)

    def _new_file(self, start: int) -> MappedFile:
        os.makedirs(self.dir, exist_ok=True)
        path = os.path.join(self.dir, segment_name(start))
        filled = self.allocator.take(path, self.file_size) if self.allocator is not None else 0
        mf = MappedFile(path, start, self.file_size, create=True)
        mf.populated = filled - filled % PAGE  # written zeros: the writer's own faults map them best
        mf.last_write_ms = int(time.time() * 1000)
        with self._lock:
            self.files = self.files + [mf]
        if self.preallocate_next:
            self.allocator.request(os.path.join(self.dir, segment_name(start + self.file_size)), self.file_size)
        return mf

    def fill_next(self) -> None:
        """Have the allocator write the segment after the last one full of zeros (see the module docstring),
        creating it first if nothing asked for it yet (after a restart, the segment being written was
        made by the previous process and nothing requested its successor)."""
        files = self.files
        if self.preallocate_next and files:
            path = os.path.join(self.dir, segment_name(files[-1].end))
            self.allocator.request(path, self.file_size)
            self.allocator.fill(path, self.file_size)

    # --- flushing ---
    def flush(self) -> int:
        """fsync every segment with unflushed bytes; returns :attr:`flushed_offset`."""
        with self._flush_lock:
            for mf in self.files:
                if mf.flushed < mf.wrote:
                    mf.flush()
            return self.flushed_offset

    def release_flushed_pages(self, keep_tail: int = 0) -> None:
        """madvise away flushed pages of every segment, keeping ``keep_tail`` bytes behind the flush point
        of the last one (the hot region readers are most likely to want next)."""
        files = self.files
        last = files[-1] if files else None
        for mf in files:
            upto = mf.flushed - keep_tail if mf is last else mf.flushed
            if upto > mf.released:
                mf.release_pages(upto)

    # --- truncation and deletion ---
    def truncate(self, offset: int, zero_tail: bool = True) -> None:
        """Drop everything at and after ``offset``: later segments are deleted, the one holding it is
        zeroed from there (so stale bytes can never be mistaken for records). ``zero_tail=False``: the
        caller knows nothing was ever written past ``offset`` in that segment (a clean shutdown)."""
        keep = []
        for mf in self.files:
            if mf.start + mf.size <= offset:
                keep.append(mf)
            elif mf.start <= offset:
                pos = offset - mf.start
                if zero_tail:
                    mf.zero_from(pos)
                mf.wrote = mf.flushed = pos
                keep.append(mf)
            else:
                empty = mf.mm[:8] == bytes(8)
                log.log(logging.DEBUG if empty else logging.WARNING, "truncate at %d: deleting %s segment %s",
                        offset, "empty" if empty else "non-empty", mf.path)
                mf.destroy()
        with self._lock:
            self.files = keep

    def delete_first(self, count: int) -> list[MappedFile]:
        """Remove the first ``count`` segments (never the last one); returns those removed."""
        with self._lock:
            n = min(count, len(self.files) - 1)
            if n <= 0:
                return []
            gone, self.files = self.files[:n], self.files[n:]
        for mf in gone:
            mf.destroy()
        return gone

    def destroy(self) -> None:
        with self._lock:
            files, self.files = self.files, []
        for mf in files:
            mf.destroy()
        try:
            os.rmdir(self.dir)
        except OSError:
            pass

    def close(self) -> None:
        for mf in self.files:
            mf.close()
