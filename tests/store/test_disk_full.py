"""A real full disk: the store lives on a small tmpfs. Writes are refused with a clear status, nothing
written before is damaged, and writes resume once retention frees space."""

from __future__ import annotations

import subprocess

import pytest

from ferrymq.server.store import MessageStore
from ferrymq.server.store import PutMessageStatus as P
from ferrymq.wire.message import decode_records

from .conftest import small_config


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", str(mnt)], capture_output=True)
    if r.returncode != 0:
        pytest.skip(f"mounting a 6 MiB tmpfs needs root/CAP_SYS_ADMIN: {r.stderr.decode().strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], check=False)


def test_disk_full_refuses_then_resumes(small_disk):
    cfg = small_config(small_disk / "store", mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=20 * 2000,
                       cleanResourceInterval=3_600_000, fileReservedTime=72, deleteWhen="99")
    store = MessageStore(cfg)
    store.start()
    try:
        acked = []
        refused = None
        for i in range(2000):
            body = (b"%06d" % i) * 1700  # ~10 KiB
            r = store.put_message("T", 0, body, {})
            if not r.ok:
                refused = r
                break
            acked.append((r.queue_offset, body))
        assert refused is not None, "the 6 MiB disk never filled up"
        assert refused.status in (P.CREATE_MAPEDFILE_FAILED, P.SERVICE_NOT_AVAILABLE), refused
        again = store.put_message("T", 0, b"more", {})
        assert again.status is P.SERVICE_NOT_AVAILABLE and "full" in again.remark
        assert len(acked) > 100
        # nothing already written is damaged
        offset = 0
        got = []
        while offset < len(acked):
            g = store.get_message("g", "T", 0, offset, 32)
            got += [m.body for m in decode_records(g.body())]
            offset = g.next_begin_offset
            del g
        assert got == [b for _, b in acked]
        # space comes back: usage is above diskSpaceCleanForciblyRatio, so retention drops the oldest segments
        store.cleaner.run()
        store.cleaner.check_disk()
        assert not store.disk_full, f"usage still {store.cleaner.last_ratio:.2f}"
        r = store.put_message("T", 0, b"resumed", {})
        assert r.ok and r.queue_offset == len(acked)
        first = store.get_min_offset("T", 0)
        assert first > 0
        g = store.get_message("g", "T", 0, first, 32)
        assert decode_records(g.body())[0].body == acked[first][1]
        del g
    finally:
        store.shutdown()
    store2 = MessageStore(cfg)
    store2.start()
    try:
        assert store2.get_max_offset("T", 0) == len(acked) + 1
    finally:
        store2.shutdown()
