"""The put paths write commit-log records with pwrite, never by storing through the segment's mapping
(a store into a clean mapped page faults, and every SYNC_FLUSH fsync cleans the page being written)."""

from __future__ import annotations

import errno
import mmap

import pytest

from ferrymq.server.store import PutMessageStatus as P
from ferrymq.server.store import mapped_file
from ferrymq.wire.message import decode_records


def _read_only_mapping(mf) -> mmap.mmap:
    writable, mf.mm = mf.mm, mmap.mmap(mf.fd, mf.size, prot=mmap.PROT_READ)
    return writable


@pytest.mark.skipif(mapped_file._pwrite_all is None,
                    reason="server.store._writec is not built (no C compiler at install, or FERRYMQ_PURE_PYTHON): "
                           "records are stored through the mapping")
def test_puts_do_not_store_through_the_mapping(make_store):
    s = make_store()
    assert s.put_message("T", 0, b"first", {}).ok  # creates the segment
    mf = s.commitlog.tail
    writable = _read_only_mapping(mf)  # a store through it would raise TypeError
    try:
        one = s.put_message("T", 0, b"second", {"TAGS": "a"})
        batch = s.put_messages("T", 0, [(0, b"third", {"KEYS": "k3"}), (0, b"fourth", {})])
        msgs = decode_records(s.get_message("g", "T", 0, 0, 32).body())
    finally:
        ro, mf.mm = mf.mm, writable
        ro.close()
    assert one.status is P.PUT_OK and batch.status is P.PUT_OK and batch.msg_num == 2
    assert [m.body for m in msgs] == [b"first", b"second", b"third", b"fourth"]
    assert [m.queue_offset for m in msgs] == [0, 1, 2, 3]
    assert msgs[1].properties["TAGS"] == "a"
    assert s.query_message("T", "k3", 10, 0, 2**62).commitlog_offsets == [msgs[2].commitlog_offset]


def test_a_failed_commit_log_write_refuses_the_put_and_stores_nothing(make_store, monkeypatch):
    s = make_store()
    assert s.put_message("T", 0, b"kept", {}).ok
    mf = s.commitlog.tail
    end = s.commitlog.max_offset

    def broken(*_args):
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(type(mf), "write_at", broken)
    one = s.put_message("T", 0, b"lost", {})
    batch = s.put_messages("T", 0, [(0, b"lost too", {})])
    monkeypatch.undo()
    assert one.status is P.UNKNOWN_ERROR and batch.status is P.UNKNOWN_ERROR
    assert "Input/output error" in one.remark
    assert s.commitlog.max_offset == end and s.get_max_offset("T", 0) == 1
    assert s.put_message("T", 0, b"next", {}).ok  # the store goes on once the disk does
    msgs = decode_records(s.get_message("g", "T", 0, 0, 32).body())
    assert [m.body for m in msgs] == [b"kept", b"next"]
