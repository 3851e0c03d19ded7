"""Commit-log segments made ahead of time are written full of zeros: records land on written blocks."""

from __future__ import annotations

import fcntl
import os
import struct
import time

import pytest

from ferrymq.server.store import mapped_file
from ferrymq.server.store.mapped_file import FILL_PIECE, FILL_STEP, PREPARE_AHEAD, PREPARE_STEP, Allocator, MappedFile
from ferrymq.wire.message import decode_records

MiB = 1 << 20
FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_UNWRITTEN = 0x800
_EXTENT = struct.Struct("=QQQ2QI3I")  # logical, physical, length, reserved, flags, reserved


def unwritten_ranges(path: str, sync: bool = True) -> list[tuple[int, int]]:
    """[(offset, length)] of the file's extents still marked unwritten (preallocated, never written).
    ``sync=False``: as they are on disk now, without writing dirty pages back first."""
    count = 64
    head = struct.pack("=QQIIII", 0, 2**64 - 1, FIEMAP_FLAG_SYNC if sync else 0, 0, count, 0)
    buf = bytearray(head + bytes(_EXTENT.size * count))
    with open(path, "rb") as f:
        try:
            fcntl.ioctl(f.fileno(), FS_IOC_FIEMAP, buf)
        except OSError as exc:
            pytest.skip(f"this file system has no FIEMAP ioctl ({exc.strerror}): extent state is not observable")
    mapped = struct.unpack_from("=I", buf, 20)[0]
    out = []
    for i in range(mapped):
        logical, _phys, length, _r1, _r2, flags, *_ = _EXTENT.unpack_from(buf, 32 + i * _EXTENT.size)
        if flags & FIEMAP_EXTENT_UNWRITTEN:
            out.append((logical, length))
    return out


def covers(ranges: list[tuple[int, int]], start: int, end: int) -> bool:
    return any(o < end and o + n > start for o, n in ranges)


def test_allocator_writes_a_file_made_ahead_full_of_zeros_when_asked(tmp_path):
    alloc = Allocator()
    ahead, now = str(tmp_path / "00000000000016777216"), str(tmp_path / "00000000000000000000")
    alloc.request(ahead, 16 * MiB)
    alloc.fill(ahead, 16 * MiB)
    alloc._filling[ahead][0].result(timeout=30)  # let it finish before the writer asks
    assert alloc.take(ahead, 16 * MiB) == 16 * MiB
    assert alloc.take(now, 16 * MiB) == 0  # made on the spot: no time for zeros
    alloc.shutdown()
    assert unwritten_ranges(ahead) == []  # every block written: a record stored there changes no extent
    assert covers(unwritten_ranges(now), 0, 16 * MiB)
    assert os.path.getsize(ahead) == os.path.getsize(now) == 16 * MiB
    with open(ahead, "rb") as f:
        assert f.read() == bytes(16 * MiB)


def test_zeros_go_in_pieces_so_the_page_cache_keeps_small_folios(tmp_path, monkeypatch):
    """The kernel caches a write's pages in folios up to the write's size and a fsync writes a dirty folio
    back whole: zeros written 8 MiB at a time made every SYNC_FLUSH group commit write megabytes."""
    writes = []
    real_pwrite = os.pwrite

    def pwrite(fd, data, offset):
        writes.append(len(data))
        return real_pwrite(fd, data, offset)

    monkeypatch.setattr(os, "pwrite", pwrite)
    alloc = Allocator()
    path = str(tmp_path / "00000000000000000000")
    alloc.request(path, 16 * MiB)
    alloc.fill(path, 16 * MiB)
    assert alloc._filling[path][0].result(timeout=30) == 16 * MiB
    alloc.shutdown()
    assert max(writes) == FILL_PIECE < FILL_STEP and sum(writes) == 16 * MiB
    assert unwritten_ranges(path) == []
    with open(path, "rb") as f:
        assert f.read() == bytes(16 * MiB)


def test_a_writer_needing_the_file_cuts_the_zeros_short(tmp_path):
    alloc = Allocator()
    path = str(tmp_path / "00000000000000000000")
    size = 512 * MiB
    alloc.request(path, size)
    alloc.fill(path, size)
    filled = alloc.take(path, size)  # at once: the writer does not wait for 512 MiB of zeros
    alloc.shutdown()
    assert filled < size and filled % FILL_STEP == 0
    unwritten = unwritten_ranges(path)
    assert not covers(unwritten, 0, filled) and covers(unwritten, filled, size)
    assert os.path.getsize(path) == size


def test_no_zeros_once_the_writer_has_the_file_or_when_the_fill_is_off(tmp_path):
    alloc = Allocator()
    taken = str(tmp_path / "00000000000000000000")
    alloc.request(taken, 16 * MiB)
    assert alloc.take(taken, 16 * MiB) == 0
    with open(taken, "r+b") as f:
        f.write(b"record")
    alloc.fill(taken, 16 * MiB)  # a late request (the pre-fault thread raced the writer): ignored
    off = Allocator(fill=False)
    other = str(tmp_path / "00000000000016777216")
    off.request(other, 16 * MiB)
    off.fill(other, 16 * MiB)
    assert off.take(other, 16 * MiB) == 0
    alloc.shutdown()
    off.shutdown()
    with open(taken, "rb") as f:
        assert f.read(6) == b"record"
    assert covers(unwritten_ranges(taken), MiB, 16 * MiB)
    assert covers(unwritten_ranges(other), 0, 16 * MiB)


def test_store_fills_the_next_segment_once_a_sixteenth_of_the_current_is_written(make_store):
    s = make_store(mappedFileSizeCommitLog=8 * MiB)
    body = b"z" * 4000
    n = 0

    def put_until(predicate):
        nonlocal n
        while not predicate():
            s.put_message("T", 0, body, {})
            n += 1

    put_until(lambda: s.commitlog.tail is not None and s.commitlog.tail.wrote >= MiB // 4)
    s._prefault_task()  # what the pre-fault thread runs when the writer calls for it
    assert s._allocator._filling == {}  # a store that writes little writes no zeros
    put_until(lambda: s.commitlog.tail.wrote >= MiB // 2)
    s._prefault_task()
    (fut, _stop), = s._allocator._filling.values()
    assert fut.result(timeout=30) == 8 * MiB
    put_until(lambda: len(s.commitlog.queue.files) == 2)
    second = s.commitlog.queue.files[1]
    assert 0 < second.wrote < second.size // 2
    assert unwritten_ranges(second.path) == []  # beyond its records too
    # written zeros are never populated read-only ahead of the writer (a write fault per page after that)
    assert second.populated == second.size
    s._prefault_task()
    assert second.populated == second.size
    assert _drain(s, n) == [body] * n


def test_a_segment_nobody_filled_is_still_populated_ahead_of_the_writer(make_store):
    s = make_store(mappedFileSizeCommitLog=8 * MiB)
    s.put_message("T", 0, b"z" * 4000, {})
    first = s.commitlog.tail
    assert first.populated == 0
    s._prefault_task()
    if mapped_file._madvise is None:
        pytest.skip("this kernel lacks MADV_POPULATE_READ (Linux < 5.14): nothing is populated ahead")
    assert first.populated == min(first.size, s.PREFAULT_AHEAD)


def test_with_warm_mapped_files_off_nothing_is_written_ahead_of_the_writer(make_store):
    """warmMapedFileEnable=false (a development store): the next segment is still made ahead (preallocated
    blocks), but neither it nor the rest of the segment being written gets zeros."""
    import time

    s = make_store(mappedFileSizeCommitLog=8 * MiB, warmMapedFileEnable=False)
    while s.commitlog.tail is None or s.commitlog.tail.wrote < MiB:  # past the sixteenth that starts a fill
        s.put_message("T", 0, b"z" * 4000, {})
    first = s.commitlog.tail
    nxt = os.path.join(os.path.dirname(first.path), f"{8 * MiB:020d}")
    deadline = time.monotonic() + 10
    while not os.path.exists(nxt) and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.5)  # time for the pre-fault thread to have run, had it been started
    assert os.path.getsize(nxt) == 8 * MiB
    assert covers(unwritten_ranges(nxt), 0, 8 * MiB) and covers(unwritten_ranges(first.path), 2 * MiB, 8 * MiB)
    assert first.populated == 0 and s._allocator._filling == {}


def _fresh_segment(path: str, size: int) -> MappedFile:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    os.posix_fallocate(fd, 0, size)
    os.close(fd)
    return MappedFile(path, 0, size)


def _needs_populate_write():
    if mapped_file._madvise is None or not mapped_file._prepare:
        pytest.skip("this kernel lacks MADV_POPULATE_WRITE (Linux < 5.14): nothing is prepared ahead")


def test_a_segment_nobody_filled_is_prepared_a_bounded_distance_ahead_in_whole_steps(tmp_path):
    """A fresh store's first segment: the blocks ahead of the writer are written (the records stored there
    change no extent at the group commit's fsync), the preparation is on disk without an fsync of the
    file, and it stays within PREPARE_AHEAD of the writer (a fresh store does not write a GiB of zeros)."""
    _needs_populate_write()
    size = 64 * MiB
    mf = _fresh_segment(str(tmp_path / "00000000000000000000"), size)
    try:
        records = os.urandom(300_000)
        mf.write_at(0, records)
        mf.wrote = len(records)
        mf.populate(mf.wrote + 32 * MiB)
        ahead = mf.wrote + PREPARE_AHEAD
        assert mf.populated == -(-ahead // 4096) * 4096
        unwritten = unwritten_ranges(mf.path, sync=False)
        assert not covers(unwritten, MiB, ahead - 4096)
        assert covers(unwritten, ahead + 4096, size)
        mf.wrote += PREPARE_STEP // 2
        mf.populate(mf.wrote + 32 * MiB)
        assert mf.populated == -(-ahead // 4096) * 4096  # less than a step to do: wait for more
        mf.wrote += PREPARE_STEP // 2
        mf.populate(mf.wrote + 32 * MiB)
        assert mf.populated >= ahead + PREPARE_STEP - 4096
        assert mf.mm[: len(records)] == records
        assert mf.mm[len(records) : mf.populated] == bytes(mf.populated - len(records))
    finally:
        mf.close()


def test_preparing_ahead_never_changes_a_record_the_writer_races_it_with(tmp_path):
    """The writer goes on storing records while the preparation runs in its own thread over the same file,
    with the steps small enough to keep them meeting: every record reads back as written."""
    import threading
    import time

    _needs_populate_write()
    size = 16 * MiB
    mf = _fresh_segment(str(tmp_path / "00000000000000000000"), size)
    records = os.urandom(size - 4096)
    stop = threading.Event()

    def prepare():
        while not stop.is_set():
            mf.populate(mf.wrote + 2 * PREPARE_STEP)

    preparer = threading.Thread(target=prepare)
    preparer.start()
    try:
        for pos in range(0, len(records), 1500):
            piece = records[pos : pos + 1500]
            mf.write_at(pos, piece)
            mf.wrote = pos + len(piece)
            if pos % 48000 == 0:
                time.sleep(0.0002)  # let the preparer have the GIL, as the reactor does between requests
    finally:
        stop.set()
        preparer.join()
    try:
        assert mf.populated > 4 * PREPARE_STEP  # it kept pace
        with open(mf.path, "rb") as f:
            assert f.read(len(records)) == records
    finally:
        mf.close()


def test_blocks_already_written_are_not_prepared_again(tmp_path, monkeypatch):
    """A segment resumed after a restart may hold the allocator's zeros past its records: only the blocks
    still unwritten are dirtied (the others would be written to the disk twice for nothing)."""
    _needs_populate_write()
    size = 8 * MiB
    path = str(tmp_path / "00000000000000000000")
    mf = _fresh_segment(path, size)
    os.pwrite(mf.fd, bytes(3 * MiB), 0)  # written zeros, as the allocator leaves them
    os.fdatasync(mf.fd)
    dirtied = []
    real = mapped_file._dirty_in_place

    def recording(fd, start, end):
        dirtied.append((start, end))
        return real(fd, start, end)

    monkeypatch.setattr(mapped_file, "_dirty_in_place", recording)
    try:
        mf.wrote = MiB
        mf.populate(mf.wrote + 32 * MiB)
        assert mf.populated == size
        assert dirtied and min(start for start, _ in dirtied) == 3 * MiB
        assert sum(end - start for start, end in dirtied) == 5 * MiB
        assert unwritten_ranges(path, sync=False) == []
    finally:
        mf.close()


def _drain(store, n: int) -> list[bytes]:
    got, offset = [], 0
    while offset < n:
        r = store.get_message("g", "T", 0, offset, 32)
        got += [m.body for m in decode_records(r.body())]
        offset = r.next_begin_offset
    return got


@pytest.mark.parametrize("stop", ["crash", "clean"])
def test_a_restart_keeps_the_zeros_of_the_segment_it_resumes_in(make_store, tmp_path, stop):
    """Recovery cuts the log where its records end; that must not turn the rest of a zero-filled segment
    back into unwritten extents (the sends after a restart would pay the conversion again)."""
    from .conftest import simulate_crash

    s = make_store(tmp_path / "s", mappedFileSizeCommitLog=8 * MiB)
    body = b"r" * 4000
    n = 0
    while len(s.commitlog.queue.files) < 2 or s.commitlog.queue.files[1].wrote < MiB:
        s.put_message("T", 0, body, {})
        n += 1
        if s.commitlog.tail is not None and s.commitlog.tail.wrote >= MiB // 2:
            s._prefault_task()
    second = s.commitlog.queue.files[1].path
    simulate_crash(s) if stop == "crash" else s.shutdown()
    assert unwritten_ranges(second) == []
    again = make_store(tmp_path / "s", mappedFileSizeCommitLog=8 * MiB)
    assert again.recovery_report["clean"] is (stop == "clean")
    assert unwritten_ranges(second) == []
    assert _drain(again, n) == [body] * n
    again.put_message("T", 0, b"after", {})
    assert _drain(again, n + 1)[-1] == b"after"


def test_after_a_restart_the_next_segment_is_made_and_filled(make_store, tmp_path):
    """The previous process requested the successor of the segment it was writing, but a crash loses
    that request: the restarted store must make and fill it itself, or the sends that reach it land on
    unwritten extents (and on the large folios readahead makes)."""
    from .conftest import simulate_crash

    s = make_store(tmp_path / "s", mappedFileSizeCommitLog=8 * MiB)
    body = b"q" * 4000
    n = 0
    while len(s.commitlog.queue.files) < 2:
        s.put_message("T", 0, body, {})
        n += 1
    commitlog = os.path.dirname(s.commitlog.queue.files[1].path)
    simulate_crash(s)
    third = os.path.join(commitlog, f"{16 * MiB:020d}")
    if os.path.exists(third):  # the background creation won the race with the crash: undo it
        os.unlink(third)
    again = make_store(tmp_path / "s", mappedFileSizeCommitLog=8 * MiB)
    while again.commitlog.tail is None or again.commitlog.tail.wrote < MiB:
        again.put_message("T", 0, body, {})
        n += 1
    again._prefault_task()
    fut, _stop = again._allocator._filling[third]
    assert fut.result(timeout=30) == 8 * MiB
    assert unwritten_ranges(third) == []
    while len(again.commitlog.queue.files) < 3:
        again.put_message("T", 0, body, {})
        n += 1
    assert again.commitlog.queue.files[2].path == third
    assert _drain(again, n) == [body] * n


def _segment(path: str, size: int, *, zero_filled: bool, sparse: bool = False) -> None:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if sparse:
            os.ftruncate(fd, size)
        else:
            os.posix_fallocate(fd, 0, size)
        if zero_filled:
            os.pwrite(fd, bytes(size), 0)
            os.fsync(fd)
    finally:
        os.close(fd)


@pytest.mark.parametrize("kind", ["zero-filled", "fallocated", "sparse"])
def test_cutting_a_torn_tail_zeroes_it_and_keeps_the_fill(tmp_path, kind):
    """Recovery cuts the log at the last valid record: everything after reads as zeros (stale bytes past
    the cut, near it or far away, included), everything before is untouched, and a segment written full
    of zeros keeps its written extents (no extent conversion for the records stored after a restart)."""
    from ferrymq.server.store.mapped_file import MappedFile

    size = 8 * MiB
    path = str(tmp_path / "00000000000000000000")
    _segment(path, size, zero_filled=kind == "zero-filled", sparse=kind == "sparse")
    records, cut = os.urandom(3 * MiB), 3 * MiB - 1000  # the last 1000 bytes: a torn record
    stale_far = (6 * MiB + 5, b"\x7f" * 300)  # e.g. a later page written back before an earlier one
    fd = os.open(path, os.O_RDWR)
    os.pwrite(fd, records, 0)
    os.pwrite(fd, stale_far[1], stale_far[0])
    os.close(fd)
    mf = MappedFile(path, 0, size)
    mf.zero_from(cut)
    mf.close()
    with open(path, "rb") as f:
        data = f.read()
    assert len(data) == size and data[:cut] == records[:cut]
    assert data[cut:] == bytes(size - cut)
    if kind == "zero-filled":
        assert unwritten_ranges(path) == []


def test_the_prefault_thread_runs_when_the_writer_gets_near_what_it_prepared(make_store):
    """No timer: the commit log wakes the thread once the writer reaches the offset its last run set, and
    that is at least a step further on."""
    s = make_store(mappedFileSizeCommitLog=64 * MiB)
    if mapped_file._madvise is None:
        pytest.skip("this kernel lacks MADV_POPULATE_READ (Linux < 5.14): nothing is populated ahead")
    runs = []
    task = s._prefault_task

    def counted():
        runs.append(s.commitlog.max_offset)
        task()

    s._prefault._task = counted
    body = b"w" * 4000
    s.put_message("T", 0, body, {})
    first = s.commitlog.tail
    deadline = time.monotonic() + 10
    while first.populated < PREPARE_AHEAD and time.monotonic() < deadline:
        time.sleep(0.01)
    assert first.populated >= PREPARE_AHEAD  # prepared ahead of the writer, woken by its first commit
    due = s.commitlog.ahead_due
    assert due >= first.wrote + PREPARE_STEP
    time.sleep(0.1)
    assert len(runs) == 1  # nothing due: the thread sleeps
    while s.commitlog.max_offset < due:
        s.put_message("T", 0, body, {})
    deadline = time.monotonic() + 10
    while not (len(runs) == 2 and due < s.commitlog.ahead_due < first.end) and time.monotonic() < deadline:
        time.sleep(0.01)  # woken: it ran, then set the next due offset
    assert len(runs) == 2 and first.populated > PREPARE_AHEAD
    assert first.populated - first.wrote >= PREPARE_AHEAD - PREPARE_STEP


def test_a_resumed_segment_with_no_unwritten_blocks_is_looked_at_once(make_store, tmp_path, monkeypatch):
    """After a restart, the segment being written was filled by the allocator: one look at where its
    next hole is, then nothing more to prepare in it (each look scans the file holding its lock)."""
    s = make_store(tmp_path / "s", mappedFileSizeCommitLog=8 * MiB)
    body = b"v" * 4000
    while len(s.commitlog.queue.files) < 2 or s.commitlog.queue.files[1].wrote < MiB:
        s.put_message("T", 0, body, {})
        s._prefault_task()
    assert s.commitlog.queue.files[1].populated == 8 * MiB  # the allocator's zeros
    s.shutdown()
    again = make_store(tmp_path / "s", mappedFileSizeCommitLog=8 * MiB)
    again.commitlog.on_ahead = None  # the task runs here only, not on its thread as well
    again.put_message("T", 0, body, {})
    tail = again.commitlog.tail
    assert tail.start == 8 * MiB and tail.populated == 0
    looks = []
    lseek = os.lseek
    monkeypatch.setattr(mapped_file.os, "lseek", lambda *a: looks.append(a[1:]) or lseek(*a))
    again._prefault_task()
    assert tail.populated == tail.size
    assert len(looks) <= 1  # not one per step of the seven megabytes ahead of the writer
    assert tail.populate_due() == tail.size
    assert again.commitlog.ahead_due == tail.start + tail.size  # woken next by the next segment's first commit
