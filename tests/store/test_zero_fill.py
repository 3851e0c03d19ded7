"""Commit-log segments made ahead of time are written full of zeros: records land on written blocks."""

from __future__ import annotations

import fcntl
import os
import struct

import pytest

from server.store.mapped_file import FILL_STEP, Allocator
from wire.message import decode_records

MiB = 1 << 20
FS_IOC_FIEMAP = 0xC020660B
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_EXTENT_UNWRITTEN = 0x800
_EXTENT = struct.Struct("=QQQ2QI3I")  # logical, physical, length, reserved, flags, reserved


def unwritten_ranges(path: str) -> list[tuple[int, int]]:
    """[(offset, length)] of the file's extents still marked unwritten (preallocated, never written)."""
    count = 64
    head = struct.pack("=QQIIII", 0, 2**64 - 1, FIEMAP_FLAG_SYNC, 0, count, 0)
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


def test_allocator_writes_files_made_ahead_full_of_zeros(tmp_path):
    alloc = Allocator()
    ahead, now = str(tmp_path / "00000000000016777216"), str(tmp_path / "00000000000000000000")
    alloc.request(ahead, 16 * MiB)
    alloc._pending[ahead][0].result(timeout=30)  # let it finish before the writer asks
    assert alloc.take(ahead, 16 * MiB) == 16 * MiB
    assert alloc.take(now, 16 * MiB) == 0  # made on the spot: no time for zeros
    alloc.shutdown()
    assert unwritten_ranges(ahead) == []  # every block written: a record stored there changes no extent
    assert covers(unwritten_ranges(now), 0, 16 * MiB)
    assert os.path.getsize(ahead) == os.path.getsize(now) == 16 * MiB
    with open(ahead, "rb") as f:
        assert f.read() == bytes(16 * MiB)


def test_a_writer_needing_the_file_cuts_the_zeros_short(tmp_path):
    alloc = Allocator()
    path = str(tmp_path / "00000000000000000000")
    size = 512 * MiB
    alloc.request(path, size)
    filled = alloc.take(path, size)  # at once: the writer does not wait for 512 MiB of zeros
    alloc.shutdown()
    assert filled < size and filled % FILL_STEP == 0
    unwritten = unwritten_ranges(path)
    assert not covers(unwritten, 0, filled) and covers(unwritten, filled, size)
    assert os.path.getsize(path) == size


def test_no_zeros_when_the_fill_is_off(tmp_path):
    alloc = Allocator(fill=False)
    path = str(tmp_path / "00000000000000000000")
    alloc.request(path, 16 * MiB)
    assert alloc.take(path, 16 * MiB) == 0
    alloc.shutdown()
    assert covers(unwritten_ranges(path), 0, 16 * MiB)


def test_store_writes_into_segments_already_full_of_zeros(make_store):
    s = make_store(mappedFileSizeCommitLog=8 * MiB)
    body = b"z" * 4000
    n = 0
    while len(s.commitlog.queue.files) < 2:  # the second segment was made (and filled) while the first filled up
        s.put_message("T", 0, body, {})
        n += 1
    second = s.commitlog.queue.files[1]
    assert 0 < second.wrote < second.size // 2
    assert unwritten_ranges(second.path) == []  # beyond the records too
    got, offset = [], 0
    while offset < n:
        r = s.get_message("g", "T", 0, offset, 32)
        got += [m.body for m in decode_records(r.body())]
        offset = r.next_begin_offset
    assert got == [body] * n
