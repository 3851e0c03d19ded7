"""Consumer offsets: on the broker for CLUSTERING, in a local file for BROADCASTING.

Both keep the offsets in memory and persist on schedule (every ``persist_consumer_offset_interval``) and
on shutdown. The remote store reads from the broker (QUERY_CONSUMER_OFFSET) when a queue is newly
assigned and writes with UPDATE_CONSUMER_OFFSET (oneway on schedule, as Java does; waited on at
shutdown so the last offsets are not lost with the connection). The local store writes Java's
``offsets.json`` (``{"offsetTable":{{mq}:offset}}``) under ``<dir>/<clientId>/<group>/``.
"""

from __future__ import annotations

import enum
import logging
import os
import tempfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from twisted.internet import defer

from ferrymq.wire.bodies import MessageQueue, body

log = logging.getLogger("ferrymq.sdk.offsets")

#: Java's ``rocketmq.client.localOffsetStoreDir`` default.
DEFAULT_LOCAL_OFFSET_DIR = Path.home() / ".rocketmq_offsets"


class ReadOffsetType(enum.Enum):
    READ_FROM_MEMORY = 0
    READ_FROM_STORE = 1
    MEMORY_FIRST_THEN_STORE = 2


@body
@dataclass(slots=True)
class OffsetSerializeWrapper:
    """The local offset file (Java writes it with fastjson: MessageQueue objects as map keys)."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)


class _MemoryOffsets:
    def __init__(self) -> None:
        self.table: dict[MessageQueue, int] = {}

    def update_offset(self, mq: MessageQueue, offset: int, increase_only: bool = False) -> None:
        old = self.table.get(mq)
        if old is None or not increase_only or offset > old:
            self.table[mq] = offset

    def remove_offset(self, mq: MessageQueue) -> None:
        self.table.pop(mq, None)

    def clone_table(self, topic: str | None = None) -> dict[MessageQueue, int]:
        return {mq: off for mq, off in self.table.items() if topic is None or mq.topic == topic}


class RemoteOffsetStore(_MemoryOffsets):
    """``find_addr(mq)`` returns a Deferred of the master address of the queue's broker."""

    def __init__(self, group: str, api, find_addr: Callable[[MessageQueue], defer.Deferred]):
        super().__init__()
        self.group = group
        self.api = api
        self.find_addr = find_addr

    def load(self) -> None:
        pass

    @defer.inlineCallbacks
    def read_offset(self, mq: MessageQueue, how: ReadOffsetType):
        """-1 when neither memory (for memory reads) nor the broker knows an offset for the queue."""
        if how in (ReadOffsetType.READ_FROM_MEMORY, ReadOffsetType.MEMORY_FIRST_THEN_STORE):
            off = self.table.get(mq)
            if off is not None or how == ReadOffsetType.READ_FROM_MEMORY:
                return -1 if off is None else off
        addr = yield self.find_addr(mq)
        off = yield self.api.query_consumer_offset(addr, self.group, mq)
        if off >= 0:
            self.update_offset(mq, off)
        return off

    @defer.inlineCallbacks
    def persist(self, mq: MessageQueue, *, oneway: bool = False):
        off = self.table.get(mq)
        if off is None:
            return
        addr = yield self.find_addr(mq)
        yield self.api.update_consumer_offset(addr, self.group, mq, off, oneway=oneway)

    @defer.inlineCallbacks
    def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True):
        """Write the offsets of ``mqs``; forget offsets of queues no longer owned (as Java does)."""
        owned = set(mqs)
        for mq in list(self.table):
            if mq not in owned:
                del self.table[mq]
                continue
            try:
                yield self.persist(mq, oneway=oneway)
            except Exception as exc:  # noqa: BLE001 - the next round tries again
                log.warning("%s: persisting offset of %s failed: %s", self.group, mq, exc)


class LocalFileOffsetStore(_MemoryOffsets):
    def __init__(self, group: str, client_id: str, base_dir: Path | str | None = None):
        super().__init__()
        self.group = group
        base = Path(base_dir) if base_dir is not None else DEFAULT_LOCAL_OFFSET_DIR
        self.path = base / client_id.replace(":", "_") / group / "offsets.json"

    def load(self) -> None:
        self.table.update(self._read_file())

    def _read_file(self) -> dict[MessageQueue, int]:
        for path in (self.path, self.path.with_suffix(".json.bak")):
            try:
                text = path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                return dict(OffsetSerializeWrapper.decode(text).offset_table)
            except Exception as exc:  # noqa: BLE001 - try the backup
                log.warning("offset file %s is unreadable (%s); trying its backup", path, exc)
        return {}

    def read_offset(self, mq: MessageQueue, how: ReadOffsetType) -> defer.Deferred:
        if how in (ReadOffsetType.READ_FROM_MEMORY, ReadOffsetType.MEMORY_FIRST_THEN_STORE):
            off = self.table.get(mq)
            if off is not None or how == ReadOffsetType.READ_FROM_MEMORY:
                return defer.succeed(-1 if off is None else off)
        off = self._read_file().get(mq)
        if off is None:
            return defer.succeed(-1)
        self.update_offset(mq, off)
        return defer.succeed(off)

    def persist(self, mq: MessageQueue, *, oneway: bool = False) -> defer.Deferred:
        return self.persist_all(self.table, oneway=oneway)

    def persist_all(self, mqs: Iterable[MessageQueue], *, oneway: bool = True) -> defer.Deferred:
        """Write every owned queue's offset (keeping ones already in the file for other queues)."""
        owned = set(mqs)
        table = self._read_file()
        table.update({mq: off for mq, off in self.table.items() if mq in owned})
        if not table:
            return defer.succeed(None)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        data = OffsetSerializeWrapper(table).encode()
        if self.path.exists():
            os.replace(self.path, self.path.with_suffix(".json.bak"))
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=".offsets.")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, self.path)
        return defer.succeed(None)
