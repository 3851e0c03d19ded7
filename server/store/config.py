"""MessageStoreConfig: the store's settings, named and defaulted as Apache's ``MessageStoreConfig``.

Attribute names are Apache's camelCase keys so a ``broker.conf`` line maps onto them unchanged
(:meth:`MessageStoreConfig.from_properties`, which also reads Apache 4.x's ``mapedFileSize...`` spellings).
One default differs: ``warmMapedFileEnable`` is true, because FerryMQ preallocates segments with
``posix_fallocate`` and records stored into unwritten blocks make every SYNC_FLUSH fsync slower
(:mod:`.mapped_file`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ferrymq.server.config_keys import from_properties, key, one_of, positive
from ferrymq.wire.message import DEFAULT_MAX_MESSAGE_SIZE

from .consume_queue import UNIT_SIZE

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"
#: Apache's FlushDiskType and BrokerRole enums
FLUSH_DISK_TYPES = (ASYNC_FLUSH, SYNC_FLUSH)
BROKER_ROLES = ("ASYNC_MASTER", "SYNC_MASTER", "SLAVE")

UNUSED = "Accepted for Apache compatibility; FerryMQ does not use it."

_DELAY_UNITS = {"s": 1000, "m": 60000, "h": 3600000, "d": 86400000}


def parse_delay_levels(text: str) -> list[int]:
    """``messageDelayLevel`` ("1s 5s 1m ...") as milliseconds per level (index 0 = level 1)."""
    out = []
    for token in text.split():
        try:
            out.append(int(token[:-1]) * _DELAY_UNITS[token[-1]])
        except (KeyError, ValueError):
            raise ValueError(f"messageDelayLevel entry {token!r} is not <number><s|m|h|d>") from None
    return out


def check_delay_levels(text: str) -> str | None:
    try:
        levels = parse_delay_levels(text)
    except ValueError:
        levels = []
    return None if levels else "not valid, expected space-separated <number><s|m|h|d> levels, e.g. '1s 5s 1m'"


def check_hours(text: str) -> str | None:
    """``deleteWhen``: hours of the day separated by ';'."""
    hours = [h.strip() for h in text.split(";")]
    if all(h.isdigit() and 0 <= int(h) <= 23 for h in hours):
        return None
    return "not valid, expected hours of the day 00-23 separated by ';', e.g. '04' or '01;04'"


def check_consume_queue_size(value: int) -> str | None:
    """``mappedFileSizeConsumeQueue``: whole 20-byte units (a queue file holds no part of one)."""
    if value > 0 and value % UNIT_SIZE == 0:
        return None
    return f"not valid, expected a positive multiple of {UNIT_SIZE} (bytes of one consume queue entry), e.g. 6000000"


def _default_root() -> str:
    return os.path.join(os.path.expanduser("~"), "store")


@dataclass
class MessageStoreConfig:
    """The store's keys; those the broker also documents (storePathRootDir, flushDiskType...) are set from it."""

    storePathRootDir: str = key(None, "Root of the message store.", factory=_default_root)
    storePathCommitLog: str = key("", "Commit log directory (default <storePathRootDir>/commitlog).")
    mappedFileSizeCommitLog: int = key(1024 * 1024 * 1024, "Commit log segment size in bytes.", check=positive)
    mappedFileSizeConsumeQueue: int = key(
        300000 * 20, "Consume queue file size in bytes (20-byte units).", check=check_consume_queue_size
    )
    flushDiskType: str = key(ASYNC_FLUSH, "ASYNC_FLUSH or SYNC_FLUSH.", check=one_of(*FLUSH_DISK_TYPES))
    flushIntervalCommitLog: int = key(500, "ASYNC_FLUSH: ms between commit log flushes.")
    flushCommitLogThoroughInterval: int = key(10000, UNUSED)
    flushIntervalConsumeQueue: int = key(1000, "Ms between consume queue flushes.")
    flushConsumeQueueThoroughInterval: int = key(60000, UNUSED)
    syncFlushTimeout: int = key(5000, "SYNC_FLUSH: ms a send waits for its flush before FLUSH_DISK_TIMEOUT.")
    flushDelayOffsetInterval: int = key(
        10000, "Accepted for Apache compatibility; FerryMQ writes the delay-queue offsets every 10000 ms."
    )
    fileReservedTime: int = key(72, "Hours to keep commit log files.")
    deleteWhen: str = key("04", "Hour(s) of day expired files are deleted, e.g. '04' or '01;04'.", check=check_hours)
    diskMaxUsedSpaceRatio: int = key(
        75, "Delete old files early when the disk is fuller than this percentage (held within 10-95)."
    )
    diskSpaceCleanForciblyRatio: int = key(85, "Disk use percentage (held within 30-85) above which unexpired files are deleted too.")
    diskSpaceWarningLevelRatio: int = key(90, "Disk use percentage (held within 35-90) above which writes are refused.")
    cleanResourceInterval: int = key(10000, "Ms between retention checks.")
    deleteFileBatchMax: int = key(10, "Most commit log files deleted by one retention pass.")
    destroyMapedFileIntervalForcibly: int = key(120000, UNUSED)
    cleanFileForciblyEnable: bool = key(True, "Delete unexpired files when the disk passes diskSpaceCleanForciblyRatio.")
    maxMessageSize: int = key(DEFAULT_MAX_MESSAGE_SIZE, "Largest message body accepted, bytes.", check=positive)
    checkCRCOnRecover: bool = key(True, "Verify each record's CRC while recovering after a crash.")
    maxRecoveryCommitlogFiles: int = key(30, UNUSED)
    messageIndexEnable: bool = key(True, "Index messages by key and unique id (queryMsgByKey / queryMsgById).")
    messageIndexSafe: bool = key(
        False,
        "true: the index takes part in crash recovery's start point and its file is fsynced every flush "
        "interval (false: a killed process loses nothing, recovery re-indexes records past the newest indexed one).",
    )
    maxHashSlotNum: int = key(5000000, "Hash slots of one index file.", check=positive)
    maxIndexNum: int = key(5000000 * 4, "Entries of one index file.", check=positive)
    defaultQueryMaxNum: int = key(32, "Most messages one key query returns.")
    maxMsgsNumBatch: int = key(64, UNUSED)
    maxTransferBytesOnMessageInMemory: int = key(256 * 1024, "Bytes one pull returns from memory.")
    maxTransferCountOnMessageInMemory: int = key(32, "Messages one pull returns from memory.")
    maxTransferBytesOnMessageInDisk: int = key(64 * 1024, "Bytes one pull returns from disk.")
    maxTransferCountOnMessageInDisk: int = key(8, "Messages one pull returns from disk.")
    accessMessageInMemoryMaxRatio: int = key(
        40, "Percentage of RAM beyond which a consumer's lag is treated as read from disk."
    )
    maxFilterMessageSize: int = key(16000, "Bytes of consume-queue units one pull may examine (16000 B = 800 units).")
    warmMapedFileEnable: bool = key(
        True,
        "Write commit log pages before the writer reaches them: zeros into the next segment once a sixteenth "
        "of the current one is written, and a fresh store's first segment 16 MiB ahead (SYNC_FLUSH fsyncs then "
        "convert no extents). FerryMQ's default is true, Apache's false; false writes nothing ahead.",
    )
    #: ``brokerIP1:listenPort`` written into STOREHOST; the broker sets it from its own config
    storeHost: str = key("127.0.0.1:10911", "Set by the broker from brokerIP1 and listenPort.")
    brokerRole: str = key("ASYNC_MASTER", "ASYNC_MASTER, SYNC_MASTER or SLAVE.", check=one_of(*BROKER_ROLES))
    messageDelayLevel: str = key(
        "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h",
        "Delay levels for scheduled messages: <number><s|m|h|d>, space-separated.",
        check=check_delay_levels,
    )

    def __post_init__(self) -> None:
        if not self.storePathCommitLog:
            self.storePathCommitLog = os.path.join(self.storePathRootDir, "commitlog")

    # --- derived paths (Apache StorePathConfigHelper) ---
    @property
    def consume_queue_dir(self) -> str:
        return os.path.join(self.storePathRootDir, "consumequeue")

    @property
    def index_dir(self) -> str:
        return os.path.join(self.storePathRootDir, "index")

    @property
    def checkpoint_path(self) -> str:
        return os.path.join(self.storePathRootDir, "checkpoint")

    @property
    def abort_path(self) -> str:
        return os.path.join(self.storePathRootDir, "abort")

    @property
    def lock_path(self) -> str:
        return os.path.join(self.storePathRootDir, "lock")

    @property
    def config_dir(self) -> str:
        return os.path.join(self.storePathRootDir, "config")

    @property
    def store_host(self) -> tuple[str, int]:
        ip, _, port = self.storeHost.rpartition(":")
        return ip.strip("[]"), int(port)

    def delay_level_millis(self) -> list[int]:
        """``messageDelayLevel`` as milliseconds per level (index 0 = level 1)."""
        return parse_delay_levels(self.messageDelayLevel)

    @property
    def mapedFileSizeCommitLog(self) -> int:
        """Apache 4.x spelling of :attr:`mappedFileSizeCommitLog`."""
        return self.mappedFileSizeCommitLog

    @property
    def sync_flush(self) -> bool:
        return self.flushDiskType == SYNC_FLUSH

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> MessageStoreConfig:
        """Build from ``key=value`` strings (a broker.conf): the broker's keys are left to it, values are
        converted to each field's type and checked (a :class:`ConfigError` names a bad one)."""
        return from_properties(cls, props)
