"""Store files as DataFrames: ``spark.read.format("rocketmq-store").load(directory)`` reads commit-log
segments offline, for audits and recovery, with no broker running.

``directory`` is a commit-log directory, or a store root (``storePathRootDir``) holding ``commitlog/``.
One partition per segment; each task maps its segment read-only and decodes the records with the
store's own codec (:func:`ferrymq.wire.message.decode_record`), into the rows a ``rocketmq`` read gives
(:mod:`~ferrymq.pipeline.rows`). Bodies are inflated as a consumer sees them. A segment ends at its
end-of-segment marker or at its unwritten (zero) tail; a record that does not decode ends it too, as it
ends the broker's recovery, and is reported in the task's log.
"""

from __future__ import annotations

import logging
import mmap
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from ferrymq.wire.message import BLANK_MAGIC, MessageExt, RecordError, decode_record, decompress_body, read_magic

from .options import OptionError
from .rows import SCHEMA_DDL, stored_batch

log = logging.getLogger(__name__)

#: rows per Arrow batch a segment is read in
BATCH_ROWS = 1024


def segment_paths(directory: str) -> list[Path]:
    """The commit-log segments under ``directory`` (a commit-log directory or a store root), in offset
    order; segments are named by their first offset, 20 digits."""
    root = Path(directory)
    log_dir = root / "commitlog" if (root / "commitlog").is_dir() else root
    if not log_dir.is_dir():
        raise OptionError("path", f"{directory} is not a directory")
    found = sorted(p for p in log_dir.iterdir() if p.is_file() and len(p.name) == 20 and p.name.isdigit())
    if not found:
        raise OptionError("path", f"{log_dir} holds no commit-log segment (files named by their 20-digit offset)")
    return found


def segment_messages(path: Path) -> Iterator[MessageExt]:
    """The records of one segment in order, bodies inflated."""
    if path.stat().st_size == 0:
        return
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as mm:
        pos, size = 0, len(mm)
        while pos + 8 <= size:
            total, magic = read_magic(mm, pos)
            if magic == BLANK_MAGIC or (total == 0 and magic == 0):
                return
            try:
                msg, total = decode_record(mm, pos)
            except RecordError as exc:
                log.warning("commit-log segment %s ends at offset %d: %s", path, int(path.name) + pos, exc)
                return
            msg.body = decompress_body(msg.body, msg.sys_flag)
            yield msg
            pos += total


def read_segment(path: Path, broker: str | None) -> Iterator[pa.RecordBatch]:
    batch: list[MessageExt] = []
    for msg in segment_messages(path):
        batch.append(msg)
        if len(batch) == BATCH_ROWS:
            yield stored_batch(broker, batch)
            batch = []
    if batch:
        yield stored_batch(broker, batch)


@dataclass
class SegmentPartition(InputPartition):
    path: str


class StoreFilesDataSource(DataSource):
    """Options: the path (``load(path)``), and ``brokerName`` for the ``broker`` column (the commit log
    does not record it; null without it)."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq-store"

    def schema(self) -> str:
        segment_paths(self._path())  # a wrong path fails at load()
        return SCHEMA_DDL

    def _path(self) -> str:
        given = {k.lower(): v for k, v in self.options.items()}
        unknown = sorted(set(given) - {"path", "brokername"})
        if unknown:
            raise OptionError(unknown[0], "not an option of the rocketmq-store format (it takes path, brokerName)")
        if not given.get("path"):
            raise OptionError("path", "required: load(<commit-log directory or store root>)")
        return given["path"]

    def reader(self, schema: StructType) -> StoreFilesReader:
        broker = {k.lower(): v for k, v in self.options.items()}.get("brokername")
        return StoreFilesReader([str(p) for p in segment_paths(self._path())], broker)


class StoreFilesReader(DataSourceReader):
    def __init__(self, paths: list[str], broker: str | None):
        self.paths = paths
        self.broker = broker

    def partitions(self) -> list[SegmentPartition]:
        return [SegmentPartition(p) for p in self.paths]

    def read(self, partition: SegmentPartition) -> Iterator[pa.RecordBatch]:
        return read_segment(Path(partition.path), self.broker)
