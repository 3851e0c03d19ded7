"""Retention: delete expired commit-log segments and what points into them; watch disk usage.

Apache semantics (CleanCommitLogService): files are deleted when it is time (the hour is in
``deleteWhen``), when disk usage exceeds ``diskMaxUsedSpaceRatio``, or on a manual trigger. A segment
is expired ``fileReservedTime`` hours after its last write; above ``diskSpaceCleanForciblyRatio``
(with ``cleanFileForciblyEnable``) the oldest go even if not expired. Above
``diskSpaceWarningLevelRatio`` the store is marked disk-full and refuses writes
(SERVICE_NOT_AVAILABLE) until usage drops again. The newest segment is never deleted. Consume-queue
segments and index files whose entries all point before the new commit-log start are deleted after.
"""

from __future__ import annotations

import logging
import math
import os
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .message_store import MessageStore

log = logging.getLogger(__name__)


def _existing(path: str) -> str:
    while not os.path.exists(path):
        parent = os.path.dirname(path)
        if parent == path:
            break
        path = parent
    return path


def disk_usage_ratio(path: str) -> float:
    """Used fraction of the partition holding ``path``, as Apache's store computes it: used space over used
    plus what this user may still write (blocks reserved for root count as unavailable, as ``df`` shows
    them), rounded up to a whole percent."""
    st = os.statvfs(_existing(path))
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    entire = used + st.f_bavail * st.f_frsize
    if st.f_blocks <= 0 or entire <= 0:
        return -1.0
    return math.ceil(used * 100 / entire) / 100


def _clamped(percent: int, low: int, high: int) -> float:
    """Apache bounds these ratios whatever the config says: a store is never allowed to run the disk dry."""
    return min(max(percent, low), high) / 100


def warning_ratio(cfg) -> float:
    """``diskSpaceWarningLevelRatio``, held within 35–90 %: above it the store refuses writes."""
    return _clamped(cfg.diskSpaceWarningLevelRatio, 35, 90)


def clean_forcibly_ratio(cfg) -> float:
    """``diskSpaceCleanForciblyRatio``, held within 30–85 %: above it segments go before their time."""
    return _clamped(cfg.diskSpaceCleanForciblyRatio, 30, 85)


def max_used_ratio(cfg) -> float:
    """``diskMaxUsedSpaceRatio``, held within 10–95 %: above it expired segments go outside ``deleteWhen``."""
    return _clamped(cfg.diskMaxUsedSpaceRatio, 10, 95)


def is_delete_hour(delete_when: str, hour: int) -> bool:
    for token in delete_when.split(";"):
        token = token.strip()
        if token.isdigit() and int(token) == hour:
            return True
    return False


class CleanService:
    def __init__(self, store: "MessageStore"):
        self.store = store
        self.manual_requests = 0
        self.clean_immediately = False
        self.space_full = False
        self.last_ratio = 0.0

    def check_disk(self) -> None:
        """Update the disk-full flag from the current usage (runs every second or so)."""
        cfg = self.store.config
        try:
            ratio = self.store.disk_usage(cfg.storePathCommitLog)
        except OSError as exc:
            log.error("cannot read disk usage of %s: %s", cfg.storePathCommitLog, exc)
            return
        self.last_ratio = ratio
        if self.store.allocation_failed:
            # a segment could not be created: stay refused until there is room for one again
            try:
                st = os.statvfs(_existing(cfg.storePathCommitLog))
                free = st.f_bavail * st.f_frsize
            except OSError:
                free = 0
            if free >= cfg.mappedFileSizeCommitLog:
                self.store.allocation_failed = False
        if ratio > warning_ratio(cfg) or self.store.allocation_failed:
            if not self.store.disk_full:
                log.error("disk usage %.1f%% (diskSpaceWarningLevelRatio %d%%%s): refusing writes",
                          ratio * 100, round(warning_ratio(cfg) * 100),
                          ", no room for a new segment" if self.store.allocation_failed else "")
            self.store.disk_full = True
            self.clean_immediately = True
        else:
            if self.store.disk_full:
                log.warning("disk usage %.1f%%: accepting writes again", ratio * 100)
            self.store.disk_full = False
            self.clean_immediately = ratio > clean_forcibly_ratio(cfg)
        self.space_full = ratio < 0 or ratio > max_used_ratio(cfg)

    def run(self, now_ms: int | None = None) -> int:
        """One retention round; returns how many commit-log segments were deleted."""
        store = self.store
        cfg = store.config
        now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
        self.check_disk()
        manual = self.manual_requests > 0
        if manual:
            self.manual_requests -= 1
        time_up = is_delete_hour(cfg.deleteWhen, time.localtime(now_ms / 1000).tm_hour)
        deleted = 0
        if time_up or self.space_full or manual:
            deleted = self.delete_expired_commitlog(
                now_ms, cfg.fileReservedTime * 3600 * 1000,
                at_once=cfg.cleanFileForciblyEnable and self.clean_immediately,
            )
        self.trim_logics()
        return deleted

    def delete_expired_commitlog(self, now_ms: int, reserved_ms: int, at_once: bool = False) -> int:
        """Delete, oldest first, segments (never the newest) expired or all when ``at_once``; stops at
        the first one that must stay, so the log has no holes."""
        queue = self.store.commitlog.queue
        cfg = self.store.config
        files = queue.files
        n = 0
        for mf in files[:-1]:
            if n >= cfg.deleteFileBatchMax:
                break
            if mf.last_write_ms + reserved_ms <= now_ms or at_once:
                n += 1
            else:
                break
        if n:
            gone = queue.delete_first(n)
            for mf in gone:
                log.info("deleted commit log segment %s", mf.path)
        return n

    def trim_logics(self) -> None:
        """Delete consume-queue segments and index files that only point before the commit-log start."""
        store = self.store
        min_phys = store.commitlog.min_offset
        for cq in store._all_cqs():
            try:
                cq.delete_expired_files(min_phys)
                cq.correct_min_offset(min_phys)
            except (OSError, ValueError) as exc:
                log.warning("trimming consume queue %s/%d failed: %s", cq.topic, cq.queue_id, exc)
        store.index.delete_expired(min_phys)
