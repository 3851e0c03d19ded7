"""Streaming reads: ``spark.readStream.format("rocketmq")`` as micro-batches of per-queue offset ranges.

An offset is the per-queue JSON of :mod:`~ferrymq.pipeline.queues` (as a dict), the next offset to read
in each queue. Spark keeps it in the query's checkpoint, and that checkpoint is the only record of what
was read: a restarted query resumes at the end of the last batch it logged. The optional write-back of a
consumer group's offsets (``commitOffsets``) happens at :meth:`RocketMQStreamReader.commit` and is only
for monitoring: Spark does not call ``commit`` for the last batch of an ``availableNow`` run until a later
run finds new data.

Queues are listed again at each batch, so a queue added to a topic, or a new topic matching
``topicPattern``, joins the stream from its earliest offset.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader
from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxRows, SupportsTriggerAvailableNow

from .cluster import Cluster
from .options import ReadOptions
from .queues import QueueRange, QueueRef, offsets_from_json, offsets_to_json
from .reader import PullSettings, QueuePartition, read_range

Offsets = dict[QueueRef, int]


def to_spark(offsets: Mapping[QueueRef, int]) -> dict:
    return json.loads(offsets_to_json(offsets))


def from_spark(offset: dict) -> Offsets:
    return offsets_from_json(json.dumps(offset))


def spread(start: Mapping[QueueRef, int], latest: Mapping[QueueRef, int], limit: int) -> Offsets:
    """Advance ``start`` towards ``latest`` by at most ``limit`` offsets in all, shared evenly: a queue
    with less pending than its share leaves the rest to the others."""
    pending = {q: max(0, latest.get(q, start[q]) - start[q]) for q in start}
    out = dict(start)
    left = limit
    order = sorted(pending, key=lambda q: (pending[q], q))
    for i, queue in enumerate(order):
        take = min(pending[queue], left // (len(order) - i))
        out[queue] += take
        left -= take
    return out


class RocketMQStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """Plans micro-batches on the driver; each batch reads one partition per queue that moved."""

    def __init__(self, options: ReadOptions):
        self.options = options
        self.settings = PullSettings(options.name_server, options.consumer_group, options.expression,
                                     options.expression_type, options.pull_batch_size)
        #: availableNow: the offsets found when the run began, which no batch of the run goes past
        self.target: Offsets | None = None
        self._cluster: Cluster | None = None

    def __getstate__(self) -> dict:
        # the reader is shipped to the tasks; the driver's connections stay behind
        return {**self.__dict__, "_cluster": None}

    @property
    def cluster(self) -> Cluster:
        if self._cluster is None:
            self._cluster = Cluster(self.options.name_server)
        return self._cluster

    def _latest(self) -> Offsets:
        """Every queue the options name now, at its end offset."""
        cluster = self.cluster
        return {q: cluster.max_offset(q) for q in cluster.queues(cluster.topics(self.options))}

    def initialOffset(self) -> dict:
        return to_spark({r.queue: r.start for r in self.cluster.ranges(self.options)})

    def prepareForTriggerAvailableNow(self) -> None:
        self.target = self._latest()

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.options.max_offsets_per_trigger is None:
            return ReadAllAvailable()
        return ReadMaxRows(self.options.max_offsets_per_trigger)

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        begin = from_spark(start)
        latest = self.target if self.target is not None else self._latest()
        for queue in latest.keys() - begin.keys():
            begin[queue] = self.cluster.min_offset(queue)
        if isinstance(limit, ReadMaxRows):
            return to_spark(spread(begin, latest, limit.max_rows))
        return to_spark({q: max(offset, latest.get(q, offset)) for q, offset in begin.items()})

    def partitions(self, start: dict, end: dict) -> list[QueuePartition]:
        begin, finish = from_spark(start), from_spark(end)
        out = []
        for queue, stop in sorted(finish.items()):
            first = begin[queue] if queue in begin else self.cluster.min_offset(queue)
            if stop > first:
                out.append(QueuePartition(QueueRange(queue, first, stop)))
        return out

    def read(self, partition: QueuePartition) -> Iterator[pa.RecordBatch]:
        return read_range(self.settings, [partition.range])

    def commit(self, end: dict) -> None:
        if self.options.commit_offsets:
            self.cluster.commit_offsets(self.options.consumer_group, from_spark(end))

    def stop(self) -> None:
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None
