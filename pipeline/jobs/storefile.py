"""The storefile job: a broker's commit-log files, read offline, written out as Parquet or JSON (or shown).

For audits and recovery: what a store holds, with no broker running, in the rows a ``rocketmq`` read
gives (``rocketmq-store`` format, :mod:`~ferrymq.pipeline.store_files`), optionally cut to some topics.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, functions as F


@dataclass(frozen=True)
class StoreFileSpec:
    #: a commit-log directory or a store root (storePathRootDir)
    store: str
    broker_name: str | None = None
    #: keep these topics' records only (empty: every topic, system topics included)
    topics: tuple[str, ...] = ()


def store_frame(spark: Any, spec: StoreFileSpec) -> DataFrame:
    reader = spark.read.format("rocketmq-store")
    if spec.broker_name:
        reader = reader.option("brokerName", spec.broker_name)
    frame = reader.load(spec.store)
    return frame.where(F.col("topic").isin(list(spec.topics))) if spec.topics else frame
