"""The ``checkpoint`` file: how far each structure is known to be on disk.

4096 bytes. The first five int64 are Apache's (physicMsgTimestamp, logicsMsgTimestamp,
indexMsgTimestamp, masterFlushedOffset, confirmPhyOffset). FerryMQ recovers by commit-log offset
rather than by timestamp, so it adds, from byte 40: physicFlushedOffset (commit log fsynced up to),
logicsFlushedOffset (consume queues fsynced covering the commit log up to), indexFlushedOffset, and
cleanShutdownOffset (end of the commit log at an orderly shutdown, -1 while running).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

LAYOUT = struct.Struct(">qqqqqqqqq")
FILE_SIZE = 4096


@dataclass
class StoreCheckpoint:
    path: str
    physic_msg_timestamp: int = 0
    logics_msg_timestamp: int = 0
    index_msg_timestamp: int = 0
    master_flushed_offset: int = 0
    confirm_phy_offset: int = 0
    physic_flushed_offset: int = 0
    logics_flushed_offset: int = 0
    index_flushed_offset: int = 0
    clean_shutdown_offset: int = -1
    existed: bool = False

    @classmethod
    def open(cls, path: str) -> "StoreCheckpoint":
        cp = cls(path)
        try:
            with open(path, "rb") as f:
                raw = f.read(LAYOUT.size)
        except FileNotFoundError:
            return cp
        if len(raw) == LAYOUT.size:
            (cp.physic_msg_timestamp, cp.logics_msg_timestamp, cp.index_msg_timestamp, cp.master_flushed_offset,
             cp.confirm_phy_offset, cp.physic_flushed_offset, cp.logics_flushed_offset, cp.index_flushed_offset,
             cp.clean_shutdown_offset) = LAYOUT.unpack(raw)
            cp.existed = True
        return cp

    @property
    def min_flushed_offset(self) -> int:
        """Everything before this commit-log offset is on disk and dispatched on disk."""
        return min(self.physic_flushed_offset, self.logics_flushed_offset, self.index_flushed_offset)

    @property
    def min_flushed_offset_without_index(self) -> int:
        """:attr:`min_flushed_offset` when the index does not count (``messageIndexSafe=false``)."""
        return min(self.physic_flushed_offset, self.logics_flushed_offset)

    def flush(self) -> None:
        """Write in place and fsync (a 4 KiB write within one page is not torn by a process kill)."""
        data = LAYOUT.pack(
            self.physic_msg_timestamp, self.logics_msg_timestamp, self.index_msg_timestamp, self.master_flushed_offset,
            self.confirm_phy_offset, self.physic_flushed_offset, self.logics_flushed_offset, self.index_flushed_offset,
            self.clean_shutdown_offset,
        )
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.pwrite(fd, data.ljust(FILE_SIZE, b"\0"), 0)
            os.fdatasync(fd)
        finally:
            os.close(fd)
