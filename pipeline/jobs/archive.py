"""The archive job: a topic landed as Parquet, partitioned by the UTC date its messages were stored.

It is a streaming query run with ``trigger(availableNow=True)``: each run reads what the topic held when
it began and stops. Spark's checkpoint keeps the offsets each batch read, and the Parquet sink's own log
(``_spark_metadata``) lists the files each batch committed, so a run stopped anywhere and started again
on the same directories writes each message exactly once; readers see committed files only when they read
the archive's root (``spark.read.parquet(path)``), which goes through that log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pyspark.sql import functions as F

MICROS_PER_DAY = 86_400_000_000


@dataclass(frozen=True)
class ArchiveSpec:
    name_server: str
    topic: str
    #: where the Parquet files go (``date=YYYY-MM-DD/`` below it)
    path: str
    #: Spark's checkpoint of the query; by default ``_checkpoint`` in ``path`` (readers skip names with ``_``)
    checkpoint: str | None = None
    #: the most offsets one micro-batch reads (None: all at once)
    max_offsets_per_trigger: int | None = None
    #: further options of the ``rocketmq`` format (consumerGroup, commitOffsets, subExpression, ...)
    options: dict[str, str] = field(default_factory=dict)

    @property
    def checkpoint_location(self) -> str:
        return self.checkpoint or f"{self.path.rstrip('/')}/_checkpoint"


def start_archive(spark: Any, spec: ArchiveSpec) -> Any:
    """Start one run of the archive query; returns the StreamingQuery (it stops by itself when done)."""
    reader = spark.readStream.format("rocketmq").option("nameServer", spec.name_server).option("topic", spec.topic)
    if spec.max_offsets_per_trigger is not None:
        reader = reader.option("maxOffsetsPerTrigger", str(spec.max_offsets_per_trigger))
    messages = reader.options(**spec.options).load()
    # the UTC day, whatever the session's time zone (to_date would use the session's)
    day = F.date_from_unix_date(F.floor(F.unix_micros("storeTimestamp") / MICROS_PER_DAY).cast("int"))
    return (messages.withColumn("date", day).writeStream.format("parquet").partitionBy("date")
            .option("path", spec.path).option("checkpointLocation", spec.checkpoint_location)
            .trigger(availableNow=True).queryName(f"archive {spec.topic}").start())


def archive(spark: Any, spec: ArchiveSpec) -> int:
    """One run to its end; returns how many messages it archived."""
    query = start_archive(spark, spec)
    query.awaitTermination()
    if query.exception() is not None:
        raise RuntimeError(f"archive of {spec.topic} failed: {query.exception()}")
    return sum(p["numInputRows"] for p in query.recentProgress)
