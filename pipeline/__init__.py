"""RocketMQ topics as Spark DataFrames: the ``rocketmq`` data source (docs/pipeline.md).

``register(spark)`` adds the format to a session; then ``spark.read.format("rocketmq")`` reads queues as
partitions, ``spark.readStream`` reads them in micro-batches, and ``df.write`` / ``df.writeStream`` send rows
as messages, against FerryMQ or Apache RocketMQ.
Needs the ``spark`` extra (pyspark, pyarrow).
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the ``rocketmq`` format with ``spark`` (a SparkSession)."""
    from .source import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)


__all__ = ["register"]
