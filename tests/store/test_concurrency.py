"""Retention deleting segments on its own thread while the writer appends and a reader pulls from the
oldest offsets: no exception, and whatever is returned is the right message for its offset."""

from __future__ import annotations

import time

from ferrymq.server.store import GetMessageStatus as G
from ferrymq.wire.message import decode_records


def test_pull_while_retention_deletes(make_store):
    s = make_store(cleanResourceInterval=5, mappedFileSizeConsumeQueue=20 * 20, deleteFileBatchMax=2)
    s.disk_usage = lambda path: 0.88  # above the forced-clean ratio: the cleaner deletes old segments continuously
    bodies = {}
    statuses = set()
    deadline = time.monotonic() + 30
    for i in range(3000):
        body = b"%d:" % i + b"p" * 700
        r = s.put_message("T", 0, body, {"KEYS": f"k{i}"})
        assert r.ok, r.remark
        bodies[r.queue_offset] = body
        if i % 7 == 0:
            off = max(0, s.get_min_offset("T", 0) - 1)
            g = s.get_message("g", "T", 0, off, 8)
            statuses.add(g.status)
            for qo, m in zip(g.queue_offsets, decode_records(g.body())):
                assert m.body == bodies[qo] and m.queue_offset == qo
        if i % 3 == 0:
            for m in decode_records(b"".join(s.query_message("T", f"k{i // 2}", 4, 0, 2**62).messages)):
                assert m.body == bodies[m.queue_offset]
        assert time.monotonic() < deadline
    assert s.get_min_phy_offset() > 0, "the cleaner never deleted anything"
    assert G.FOUND in statuses
