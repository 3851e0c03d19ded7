"""RocketMQ topics as Spark DataFrames: the ``rocketmq`` data source (docs/pipeline.md).

``register(spark)`` adds the format to a session; then ``spark.read.format("rocketmq")`` reads queues as
partitions, ``spark.readStream`` reads them in micro-batches, and ``df.write`` / ``df.writeStream`` send rows
as messages, against FerryMQ or Apache RocketMQ; ``spark.read.format("rocketmq-store")`` reads a broker's
commit-log files offline into the same rows. ``ferrymq.pipeline.jobs`` holds the jobs built on them.
Needs the ``spark`` extra (pyspark, pyarrow).
"""

from __future__ import annotations

from typing import Any


def register(spark: Any) -> None:
    """Register the ``rocketmq`` and ``rocketmq-store`` formats with ``spark`` (a SparkSession)."""
    from .source import RocketMQDataSource
    from .store_files import StoreFilesDataSource

    spark.dataSource.register(RocketMQDataSource)
    spark.dataSource.register(StoreFilesDataSource)


__all__ = ["register"]
