"""Retention by age and disk usage; disk-full refusal and resumption; trimming of queues and index."""

from __future__ import annotations

import os
import time

from ferrymq.server.store import GetMessageStatus as G
from ferrymq.server.store import PutMessageStatus as P
from ferrymq.server.store import retention
from ferrymq.server.store.config import MessageStoreConfig
from ferrymq.server.store.retention import is_delete_hour
from ferrymq.wire.message import decode_records


def fill(s, n=60):
    return [s.put_message("T", 0, b"x" * 3000, {"KEYS": f"k{i}"}) for i in range(n)]


def test_delete_when_hours():
    assert is_delete_hour("04", 4) and not is_delete_hour("04", 5)
    assert is_delete_hour("01;04;23", 23)


def test_usage_counts_reserved_blocks_as_used_like_apache(monkeypatch, tmp_path):
    # 1000 blocks, 100 free of which 50 are reserved for root: used 900 of the 950 this user can reach
    fake = os.statvfs_result((4096, 4096, 1000, 100, 50, 0, 0, 0, 0, 255))
    monkeypatch.setattr(retention.os, "statvfs", lambda path: fake)
    assert retention.disk_usage_ratio(str(tmp_path)) == 0.95  # 94.7 % rounds up, as Apache's does


def test_configured_ratios_are_held_within_apaches_bounds():
    high = MessageStoreConfig(diskSpaceWarningLevelRatio=99, diskSpaceCleanForciblyRatio=99, diskMaxUsedSpaceRatio=99)
    low = MessageStoreConfig(diskSpaceWarningLevelRatio=1, diskSpaceCleanForciblyRatio=1, diskMaxUsedSpaceRatio=1)
    assert (retention.warning_ratio(high), retention.clean_forcibly_ratio(high), retention.max_used_ratio(high)) \
        == (0.90, 0.85, 0.95)
    assert (retention.warning_ratio(low), retention.clean_forcibly_ratio(low), retention.max_used_ratio(low)) \
        == (0.35, 0.30, 0.10)
    default = MessageStoreConfig()
    assert (retention.warning_ratio(default), retention.clean_forcibly_ratio(default),
            retention.max_used_ratio(default)) == (0.90, 0.85, 0.75)


def test_expired_segments_deleted_and_queues_trimmed(make_store):
    s = make_store(fileReservedTime=1, deleteWhen="99", mappedFileSizeConsumeQueue=20 * 10)
    rs = fill(s)
    n_files = len(s.commitlog.queue.files)
    assert n_files >= 3
    cleaner = s.cleaner
    now = int(time.time() * 1000)
    assert cleaner.run(now_ms=now) == 0  # not the hour, disk fine
    s.clean_expired_files_manually()
    assert cleaner.run(now_ms=now) == 0  # nothing older than an hour
    s.clean_expired_files_manually()
    deleted = cleaner.run(now_ms=now + 2 * 3600 * 1000)
    assert deleted == n_files - 1  # never the newest
    min_phys = s.get_min_phy_offset()
    assert min_phys == s.commitlog.queue.files[-1].start
    first_kept = next(i for i, r in enumerate(rs) if r.commitlog_offset >= min_phys)
    assert s.get_min_offset("T", 0) == first_kept
    g = s.get_message("g", "T", 0, 0, 32)
    assert (g.status, g.next_begin_offset) == (G.OFFSET_TOO_SMALL, first_kept)
    got = decode_records(s.get_message("g", "T", 0, first_kept, 32).body())
    assert got[0].commitlog_offset == rs[first_kept].commitlog_offset
    assert s.find_consume_queue("T", 0).queue.files[0].start > 0  # old CQ segments went too
    assert s.query_message("T", "k0", 5, 0, 2**62).messages == []
    assert s.query_message("T", f"k{len(rs) - 1}", 5, 0, 2**62).messages


def test_disk_full_refuses_writes_then_resumes(make_store):
    usage = [0.5]
    s = make_store()
    s.disk_usage = lambda path: usage[0]
    before = s.put_message("T", 0, b"before", {})
    assert before.ok
    usage[0] = 0.95
    s.cleaner.check_disk()
    r = s.put_message("T", 0, b"refused", {})
    assert r.status is P.SERVICE_NOT_AVAILABLE and "full" in r.remark
    assert s.put_messages("T", 0, [(0, b"b", "")]).status is P.SERVICE_NOT_AVAILABLE
    g = s.get_message("g", "T", 0, 0, 32)  # reads still work, nothing damaged
    assert [m.body for m in decode_records(g.body())] == [b"before"]
    usage[0] = 0.6
    s.cleaner.check_disk()
    assert s.put_message("T", 0, b"after", {}).ok
    assert s.get_max_offset("T", 0) == 2


def test_forced_clean_above_ratio(make_store):
    s = make_store(fileReservedTime=72, deleteWhen="99")
    fill(s)
    usage = [0.88]  # above diskSpaceCleanForciblyRatio 85 and diskMaxUsedSpaceRatio 75
    s.disk_usage = lambda path: usage[0]
    n = len(s.commitlog.queue.files)
    assert s.cleaner.run() == min(n - 1, s.config.deleteFileBatchMax)
    assert not s.disk_full
