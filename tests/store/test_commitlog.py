"""The commit log's write path: reserve where bytes go (rolling to the next segment when they do not fit),
then commit them (written, readable, flushable)."""

from __future__ import annotations

import errno

import pytest

from ferrymq.server.store.commitlog import CommitLog
from ferrymq.server.store.mapped_file import MappedFile
from ferrymq.wire.message import BLANK_MAGIC, build_record, read_magic

SEGMENT = 4096


def record(body: bytes, queue_offset: int, phys: int) -> bytes:
    return bytes(build_record("T", body, queue_offset=queue_offset, commitlog_offset=phys, store_timestamp=7))


def put(cl: CommitLog, body: bytes, queue_offset: int) -> int:
    size = len(record(body, 0, 0))
    phys = cl.reserve(size, 7)
    assert cl.commit(phys, record(body, queue_offset, phys), 7) == phys + size
    return phys


def test_reserved_bytes_are_neither_readable_nor_flushable_before_commit(tmp_path):
    cl = CommitLog(str(tmp_path / "cl"), SEGMENT)
    first = put(cl, b"a" * 100, 0)
    end = cl.max_offset
    rec = record(b"b" * 100, 1, end)
    assert cl.reserve(len(rec), 7) == end
    assert cl.max_offset == end and cl.read(end, len(rec)) is None
    assert cl.queue.flush() == end  # a flush covers only what is committed
    assert cl.commit(end, rec, 7) == end + len(rec)
    assert cl.max_offset == end + len(rec) and bytes(cl.read(end, len(rec))) == rec
    assert cl.queue.flush() == end + len(rec)
    assert cl.read_record(first) is not None


def test_reserve_rolls_to_the_next_segment_behind_an_end_marker(tmp_path):
    cl = CommitLog(str(tmp_path / "cl"), SEGMENT)
    offsets = []
    while cl.max_offset < SEGMENT - 600:
        offsets.append(put(cl, b"x" * 300, len(offsets)))
    end = cl.max_offset
    size = len(record(b"y" * 600, 0, 0))
    assert size + 8 > SEGMENT - end  # does not fit with a marker behind it
    phys = cl.reserve(size, 9)
    assert phys == SEGMENT and [mf.start for mf in cl.queue.files] == [0, SEGMENT]
    first = cl.queue.files[0]
    assert read_magic(first.mm, end) == (SEGMENT - end, BLANK_MAGIC) and first.wrote == SEGMENT
    cl.commit(phys, record(b"y" * 600, len(offsets), phys), 9)
    seen = []
    stop = cl.scan(0, True, lambda info, at: seen.append((at, info.queue_offset)))
    assert seen == [(o, i) for i, o in enumerate(offsets)] + [(SEGMENT, len(offsets))]
    assert stop.offset == SEGMENT + size and stop.reason == "end of data"


def test_a_batch_exactly_filling_a_segment_but_its_marker_rolls(tmp_path):
    cl = CommitLog(str(tmp_path / "cl"), SEGMENT)
    assert cl.reserve(SEGMENT - 8, 1) == 0  # room for the marker: fits
    assert cl.reserve(SEGMENT - 7, 1) == SEGMENT  # no room for a marker after it: the next segment


def test_commit_must_be_at_the_reserved_offset(tmp_path):
    cl = CommitLog(str(tmp_path / "cl"), SEGMENT)
    put(cl, b"a", 0)
    end = cl.max_offset
    rec = record(b"b", 1, end)
    cl.reserve(len(rec), 7)
    with pytest.raises(ValueError):
        cl.commit(end + 8, rec, 7)
    assert cl.max_offset == end


def test_a_failed_write_commits_nothing_and_the_reservation_stands(tmp_path, monkeypatch):
    cl = CommitLog(str(tmp_path / "cl"), SEGMENT)
    put(cl, b"a", 0)
    end = cl.max_offset
    rec = record(b"b", 1, end)
    assert cl.reserve(len(rec), 7) == end

    def broken(*_args):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(MappedFile, "write_at", broken)
    with pytest.raises(OSError):
        cl.commit(end, rec, 7)
    monkeypatch.undo()
    assert cl.max_offset == end and cl.reserve(len(rec), 7) == end
    assert cl.commit(end, rec, 7) == end + len(rec)


def test_flushes_that_write_data_are_timed_and_empty_ones_are_not(tmp_path):
    cl = CommitLog(str(tmp_path / "cl"), SEGMENT)
    assert cl.flush_times.read().count == 0
    put(cl, b"a" * 100, 0)
    cl.flush()
    cl.flush()  # nothing new: an ASYNC_FLUSH tick with nothing to write
    times = cl.flush_times.read()
    assert times.count == 1 and times.total > 0


def test_the_writer_calls_on_ahead_once_its_commits_reach_ahead_due(tmp_path):
    """The work ahead of the writer is asked for by the writer's progress, once until it sets a new due
    offset, and again at the next segment (the due offset of the last one is within it)."""
    cl = CommitLog(str(tmp_path / "cl"), SEGMENT)
    calls = []
    cl.on_ahead = lambda: calls.append(cl.max_offset)
    first = put(cl, b"a" * 100, 0)
    assert calls == [cl.max_offset]  # a new log: the first commit asks
    cl.ahead_due = 2000
    while cl.max_offset < 2000:
        put(cl, b"b" * 100, 1)
    assert calls == [first + len(record(b"a" * 100, 0, 0)), cl.max_offset]  # once, at the commit past 2000
    while cl.max_offset < SEGMENT - 600:
        put(cl, b"c" * 100, 2)
    assert len(calls) == 2  # nothing due since: no more calls
    cl.ahead_due = SEGMENT  # what the task sets when nothing is left in this segment
    put(cl, b"d" * 600, 3)
    assert cl.queue.files[-1].start == SEGMENT and len(calls) == 3
