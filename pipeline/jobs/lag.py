"""The lag job: a consumer group's lag and throughput per queue, and their totals.

A snapshot holds, per queue, what ``mqadmin consumerProgress -g`` shows (the broker's end offset, the
group's committed offset, their difference as the lag, the in-flight count and the last consume time,
from the brokers' GET_CONSUME_STATS), and what it leaves out: how old the first unconsumed message is
(its store time, pulled from the queue), and how many messages the queue took in the last ``window``
seconds (the broker's offset-by-time look-up), as a rate. The totals add the queues up as
consumerProgress does (Diff Total, Inflight Total) beside the brokers' consume TPS.

With a history directory each snapshot is appended there as Parquet, and the group's consume rate per
queue is how far its committed offset moved since the previous snapshot, over the time between them.
"""

from __future__ import annotations

import datetime
import time
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, Window, functions as F

from ferrymq.sdk.blocking_clients import BlockingMQAdmin
from ferrymq.wire.bodies import ConsumeStats

from ..cluster import LOOKUP_TIMEOUT, Cluster
from ..options import DEFAULT_CONSUMER_GROUP
from ..queues import QueueRange, QueueRef
from ..reader import PullSettings, read_range

#: one row per queue of a snapshot
SNAPSHOT_DDL = (
    "snapshotTime TIMESTAMP, group STRING, topic STRING, broker STRING, queueId INT, brokerOffset BIGINT, "
    "consumerOffset BIGINT, lag BIGINT, inflight BIGINT, lastTimestamp TIMESTAMP, "
    "oldestPendingTimestamp TIMESTAMP, lagSeconds DOUBLE, storedInWindow BIGINT, inTps DOUBLE"
)
KEY = ("topic", "broker", "queueId")


@dataclass(frozen=True)
class LagSpec:
    name_server: str
    group: str
    #: only this topic's queues (None: every topic the group has offsets in, its retry topic included)
    topic: str | None = None
    #: the window the intake rate is measured over, in seconds
    window_s: float = 300.0
    #: a directory the snapshots are appended to (Parquet); with it, the consume rate is computed
    history: str | None = None


@dataclass(frozen=True)
class LagReport:
    #: the snapshot, one row per queue ordered by topic, broker, queue id (SNAPSHOT_DDL's columns, and
    #: ``consumeTps`` when there is a history)
    queues: list[dict[str, Any]]
    totals: dict[str, Any]


def consume_stats(spec: LagSpec) -> ConsumeStats:
    with BlockingMQAdmin(spec.name_server, timeout=LOOKUP_TIMEOUT) as admin:
        return admin.consume_stats(spec.group, spec.topic)


def pending_heads(name_server: str, offsets: dict[QueueRef, int], ends: dict[QueueRef, int]) -> dict[QueueRef, int]:
    """The store time (ms) of each queue's first unconsumed message, for the queues that have one."""
    ranges = [QueueRange(q, offsets[q], offsets[q] + 1) for q in sorted(offsets) if ends[q] > offsets[q]]
    heads: dict[QueueRef, int] = {}
    for batch in read_range(PullSettings(name_server, DEFAULT_CONSUMER_GROUP), ranges):
        row = batch.slice(0, 1).to_pylist()[0]
        queue = QueueRef(row["topic"], row["broker"], row["queueId"])
        heads.setdefault(queue, int(row["storeTimestamp"].timestamp() * 1000))
    return heads


def snapshot_rows(spec: LagSpec, stats: ConsumeStats, now_ms: int) -> list[tuple]:
    wrappers = {QueueRef.of(mq): w for mq, w in stats.offset_table.items()}
    consumed = {q: max(w.consumer_offset, 0) for q, w in wrappers.items()}
    heads = pending_heads(spec.name_server, consumed, {q: w.broker_offset for q, w in wrappers.items()})
    since = now_ms - int(spec.window_s * 1000)
    rows = []
    with Cluster(spec.name_server) as cluster:
        for queue in sorted(wrappers):
            w = wrappers[queue]
            stored = max(0, w.broker_offset - max(cluster.offset_at(queue, since), 0))
            head = heads.get(queue)
            rows.append((
                _ts(now_ms), spec.group, queue.topic, queue.broker, queue.queue_id, w.broker_offset,
                w.consumer_offset, w.broker_offset - w.consumer_offset, w.pull_offset - w.consumer_offset,
                _ts(w.last_timestamp) if w.last_timestamp else None, _ts(head) if head is not None else None,
                max(0.0, (now_ms - head) / 1000) if head is not None else 0.0, stored, stored / spec.window_s,
            ))
    return rows


def _ts(ms: int) -> datetime.datetime:
    return datetime.datetime.fromtimestamp(ms / 1000, datetime.timezone.utc)


def with_consume_rate(history: DataFrame, group: str, at: Any) -> DataFrame:
    """``group``'s snapshot taken ``at`` in ``history``, each queue with ``consumeTps``: its committed
    offset's move since the queue's previous snapshot, per second (null for a queue's first snapshot)."""
    by_queue = Window.partitionBy(*KEY).orderBy("snapshotTime")
    seconds = (F.unix_micros("snapshotTime") - F.unix_micros(F.lag("snapshotTime").over(by_queue))) / 1e6
    moved = F.col("consumerOffset") - F.lag("consumerOffset").over(by_queue)
    return (history.where(F.col("group") == group).withColumn("consumeTps", moved / seconds)
            .where(F.col("snapshotTime") == F.lit(at)))


def consumer_lag(spark: Any, spec: LagSpec, now_ms: int | None = None) -> LagReport:
    stats = consume_stats(spec)
    now_ms = int(time.time() * 1000) if now_ms is None else now_ms
    rows = snapshot_rows(spec, stats, now_ms)
    queues = spark.createDataFrame(rows, SNAPSHOT_DDL)
    if spec.history:
        queues.write.mode("append").parquet(spec.history)
        queues = with_consume_rate(spark.read.parquet(spec.history), spec.group, _ts(now_ms))
    totals = {
        "group": spec.group,
        "lag": sum(r[7] for r in rows),
        "inflight": sum(r[8] for r in rows),
        "consumeTps": stats.consume_tps,
        "inTps": sum(r[13] for r in rows),
        "maxLagSeconds": max((r[11] for r in rows), default=0.0),
    }
    return LagReport([r.asDict() for r in queues.orderBy(*KEY).collect()], totals)


QUEUE_HEADER = "%-48s  %-20s  %-4s  %-14s  %-16s  %-10s  %-10s  %-12s  %-10s  %s\n"
QUEUE_ROW = "%-48s  %-20s  %-4d  %-14d  %-16d  %-10d  %-10d  %-12.1f  %-10.2f  %s\n"


def report_text(rows: list[dict[str, Any]], totals: dict[str, Any]) -> str:
    """The snapshot as a table (consumerProgress's columns first), then the totals."""
    lines = [QUEUE_HEADER % ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                             "#Inflight", "#Lag Seconds", "#In TPS", "#Consume TPS")]
    for r in rows:
        rate = r.get("consumeTps")
        lines.append(QUEUE_ROW % (r["topic"], r["broker"], r["queueId"], r["brokerOffset"], r["consumerOffset"],
                                  r["lag"], r["inflight"], r["lagSeconds"], r["inTps"],
                                  "N/A" if rate is None else f"{rate:.2f}"))
    lines.append(f"\nConsume TPS: {totals['consumeTps']:.2f}\nConsume Diff Total: {totals['lag']}\n"
                 f"Consume Inflight Total: {totals['inflight']}\nIn TPS: {totals['inTps']:.2f}\n"
                 f"Max Lag Seconds: {totals['maxLagSeconds']:.1f}\n")
    return "".join(lines)
