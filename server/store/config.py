"""MessageStoreConfig: the store's settings, named and defaulted as Apache's ``MessageStoreConfig``.

Attribute names are Apache's camelCase keys so a ``broker.conf`` line maps onto them unchanged
(:meth:`MessageStoreConfig.from_properties`). Both spellings of the commit-log segment size exist in
Apache (``mapedFileSizeCommitLog`` in 4.x, ``mappedFileSizeCommitLog`` in 5.x); both are accepted.
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field

from ferrymq.wire.message import DEFAULT_MAX_MESSAGE_SIZE

ASYNC_FLUSH = "ASYNC_FLUSH"
SYNC_FLUSH = "SYNC_FLUSH"

#: 4.x spellings accepted for the 5.x attribute names
ALIASES = {
    "mapedFileSizeCommitLog": "mappedFileSizeCommitLog",
    "mapedFileSizeConsumeQueue": "mappedFileSizeConsumeQueue",
}


def _default_root() -> str:
    return os.path.join(os.path.expanduser("~"), "store")


@dataclass
class MessageStoreConfig:
    storePathRootDir: str = field(default_factory=_default_root)
    #: defaults to ``<storePathRootDir>/commitlog`` when empty
    storePathCommitLog: str = ""
    mappedFileSizeCommitLog: int = 1024 * 1024 * 1024
    #: 300000 units of 20 bytes
    mappedFileSizeConsumeQueue: int = 300000 * 20
    flushDiskType: str = ASYNC_FLUSH
    flushIntervalCommitLog: int = 500  # ms
    flushCommitLogThoroughInterval: int = 10000  # ms
    flushIntervalConsumeQueue: int = 1000  # ms
    flushConsumeQueueThoroughInterval: int = 60000  # ms
    syncFlushTimeout: int = 5000  # ms
    flushDelayOffsetInterval: int = 10000  # ms
    fileReservedTime: int = 72  # hours
    deleteWhen: str = "04"
    diskMaxUsedSpaceRatio: int = 75
    diskSpaceCleanForciblyRatio: int = 85
    diskSpaceWarningLevelRatio: int = 90
    cleanResourceInterval: int = 10000  # ms
    deleteFileBatchMax: int = 10
    destroyMapedFileIntervalForcibly: int = 120000  # ms
    cleanFileForciblyEnable: bool = True
    maxMessageSize: int = DEFAULT_MAX_MESSAGE_SIZE
    checkCRCOnRecover: bool = True
    maxRecoveryCommitlogFiles: int = 30
    messageIndexEnable: bool = True
    #: Apache's ``messageIndexSafe``: when false (the default) the index is not part of crash recovery's
    #: start point and the file being written is not fsynced every flush interval (a process kill loses
    #: nothing, its pages are in the page cache; recovery re-indexes records past the newest indexed one)
    messageIndexSafe: bool = False
    maxHashSlotNum: int = 5000000
    maxIndexNum: int = 5000000 * 4
    defaultQueryMaxNum: int = 32
    maxMsgsNumBatch: int = 64
    maxTransferBytesOnMessageInMemory: int = 256 * 1024
    maxTransferCountOnMessageInMemory: int = 32
    maxTransferBytesOnMessageInDisk: int = 64 * 1024
    maxTransferCountOnMessageInDisk: int = 8
    accessMessageInMemoryMaxRatio: int = 40
    #: bytes of consume-queue units one pull may examine (Apache name; 16000 B = 800 units)
    maxFilterMessageSize: int = 16000
    #: Apache's ``warmMapedFileEnable``: touch every page of a new segment when preallocating
    warmMapedFileEnable: bool = False
    #: ``brokerIP1:listenPort`` written into STOREHOST; the broker sets it from its own config
    storeHost: str = "127.0.0.1:10911"
    brokerRole: str = "ASYNC_MASTER"
    messageDelayLevel: str = "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"

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
        unit = {"s": 1000, "m": 60000, "h": 3600000, "d": 86400000}
        out = []
        for token in self.messageDelayLevel.split():
            try:
                out.append(int(token[:-1]) * unit[token[-1]])
            except (KeyError, ValueError):
                raise ValueError(f"messageDelayLevel entry {token!r} is not <number><s|m|h|d>") from None
        return out

    @property
    def mapedFileSizeCommitLog(self) -> int:
        """Apache 4.x spelling of :attr:`mappedFileSizeCommitLog`."""
        return self.mappedFileSizeCommitLog

    @property
    def sync_flush(self) -> bool:
        return self.flushDiskType == SYNC_FLUSH

    @classmethod
    def from_properties(cls, props: dict[str, str]) -> "MessageStoreConfig":
        """Build from ``key=value`` strings (a broker.conf); unknown keys are ignored (they belong to
        the broker), values are converted to each field's type."""
        types = {f.name: f.type for f in dataclasses.fields(cls)}
        kwargs: dict[str, object] = {}
        for key, raw in props.items():
            name = ALIASES.get(key, key)
            if name not in types:
                continue
            t = types[name]
            value = raw.strip() if isinstance(raw, str) else raw
            if t in ("int", int):
                kwargs[name] = int(value)
            elif t in ("bool", bool):
                kwargs[name] = str(value).lower() == "true"
            else:
                kwargs[name] = str(value)
        return cls(**kwargs)  # type: ignore[arg-type]
