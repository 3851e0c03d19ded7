"""Segment creation never races the writer: one file per segment name, never swapped under a mapping."""

from __future__ import annotations

import os
import threading

from ferrymq.server.store.mapped_file import Allocator, _create_file

SIZE = 1 << 20


def test_creating_a_segment_that_exists_leaves_it_alone(tmp_path):
    path = str(tmp_path / "00000000000000000000")
    _create_file(path, SIZE)
    with open(path, "r+b") as f:
        f.write(b"record")
    inode = os.stat(path).st_ino
    _create_file(path, SIZE)  # a late second creator
    assert os.stat(path).st_ino == inode
    with open(path, "rb") as f:
        assert f.read(6) == b"record"
    assert sorted(os.listdir(tmp_path)) == ["00000000000000000000"]  # no temp file left behind


def test_two_creators_at_once_both_succeed_with_one_file(tmp_path):
    errors: list[BaseException] = []
    for n in range(40):
        path = str(tmp_path / f"{n:020d}")
        start = threading.Barrier(2)

        def create(path=path, start=start):
            start.wait()
            try:
                _create_file(path, SIZE)
            except BaseException as exc:  # noqa: BLE001 - the test reports whatever a creator raised
                errors.append(exc)

        threads = [threading.Thread(target=create) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert os.path.getsize(path) == SIZE
    assert errors == []
    assert not [name for name in os.listdir(tmp_path) if name.endswith(".alloc")]


def test_a_request_for_a_segment_the_writer_took_makes_nothing(tmp_path):
    """After a failed allocation the writer creates the segment itself; the periodic request for the next
    segment, arriving while it does, must not start a second creation of the same file."""
    alloc = Allocator()
    path = str(tmp_path / "00000000000001048576")
    try:
        alloc.take(path, SIZE)
        os.unlink(path)  # the window: taken by the writer, not yet on disk
        alloc.request(path, SIZE)
        alloc.fill(path, SIZE)
    finally:
        alloc.shutdown()
    assert not os.path.exists(path)
