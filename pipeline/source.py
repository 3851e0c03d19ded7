"""The ``rocketmq`` format on Spark's Python Data Source API: batch and streaming reads and writes.

Planning runs on the driver (options checked, queues and offsets looked up at ``load()`` / ``save()``);
reading and sending run in the tasks, one task per message queue for a read.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, replace

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    DataSourceReader,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import StructType

from .cluster import Cluster
from .options import ReadOptions, read_options, stream_options, write_options
from .reader import PullSettings, QueuePartition, read_range
from .rows import SCHEMA_DDL
from .stream import RocketMQStreamReader
from .writer import SendSettings, check_columns, send_partition


#: the task properties in which Spark names the streaming query (its id survives restarts) and micro-batch
QUERY_ID_PROPERTY = "sql.streaming.queryId"
BATCH_ID_PROPERTY = "streaming.sql.batchId"


@dataclass
class SentCount(WriterCommitMessage):
    partition: int
    messages: int


class RocketMQDataSource(DataSource):
    """``spark.read.format("rocketmq")`` and ``df.write.format("rocketmq")``; options in docs/pipeline.md."""

    @classmethod
    def name(cls) -> str:
        return "rocketmq"

    def schema(self) -> str:
        # Spark asks for the schema at load(): a bad option, an unknown topic or an unreachable name
        # server fails there, before any task runs.
        options = read_options(self.options)
        with Cluster(options.name_server) as cluster:
            cluster.queues(cluster.topics(options))
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> RocketMQReader:
        return RocketMQReader(read_options(self.options))

    def streamReader(self, schema: StructType) -> RocketMQStreamReader:
        return RocketMQStreamReader(stream_options(self.options))

    def writer(self, schema: StructType, overwrite: bool) -> RocketMQWriter:
        return RocketMQWriter(self._send_settings(schema))

    def streamWriter(self, schema: StructType, overwrite: bool) -> RocketMQStreamWriter:
        return RocketMQStreamWriter(self._send_settings(schema))

    def _send_settings(self, schema: StructType) -> SendSettings:
        options = write_options(self.options)
        check_columns(schema.fieldNames(), options)
        with Cluster(options.name_server) as cluster:
            cluster.check_writable()
        return SendSettings(options, secrets.token_hex(8).upper())


class RocketMQReader(DataSourceReader):
    def __init__(self, options: ReadOptions):
        self.settings = PullSettings(options.name_server, options.consumer_group, options.expression,
                                     options.expression_type, options.pull_batch_size)
        with Cluster(options.name_server) as cluster:
            self.ranges = cluster.ranges(options)

    def partitions(self) -> list[QueuePartition]:
        return [QueuePartition(r) for r in self.ranges]

    def read(self, partition: QueuePartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.settings, [partition.range])


class RocketMQWriter(DataSourceArrowWriter):
    def __init__(self, settings: SendSettings):
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentCount:
        from pyspark import TaskContext

        partition = TaskContext.get().partitionId()
        return SentCount(partition, send_partition(self.settings, partition, iterator))


class RocketMQStreamWriter(DataSourceStreamArrowWriter):
    """Each micro-batch is written like a batch write, under UNIQ_KEYs made of the query's id (which its
    checkpoint keeps), the batch id, the partition and the row: a batch Spark runs again, after a failed
    task or a restart of the query, sends its rows under the msgIds they had."""

    def __init__(self, settings: SendSettings):
        self.settings = settings

    def write(self, iterator: Iterator[pa.RecordBatch]) -> SentCount:
        from pyspark import TaskContext

        context = TaskContext.get()
        query = context.getLocalProperty(QUERY_ID_PROPERTY)
        batch_id = int(context.getLocalProperty(BATCH_ID_PROPERTY) or 0)
        prefix = hashlib.sha1(query.encode()).hexdigest()[:6].upper() if query else self.settings.write_id[:6]
        settings = replace(self.settings, write_id=f"{prefix}{batch_id:010X}")
        return SentCount(context.partitionId(), send_partition(settings, context.partitionId(), iterator))
