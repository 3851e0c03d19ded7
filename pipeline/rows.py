"""The rows a read yields: the schema, and messages turned into Arrow record batches column by column."""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from ferrymq.sdk.message import MessageExt
from ferrymq.wire.message import MessageConst

from .queues import QueueRef

#: the DataFrame schema (Spark DDL), in column order
SCHEMA_DDL = (
    "topic STRING, broker STRING, queueId INT, queueOffset BIGINT, msgId STRING, keys STRING, tags STRING, "
    "body BINARY, properties MAP<STRING, STRING>, bornTimestamp TIMESTAMP, storeTimestamp TIMESTAMP, "
    "reconsumeTimes INT"
)

#: the same schema in Arrow; timestamps are UTC microseconds, as Spark keeps TimestampType
ARROW_SCHEMA = pa.schema([
    ("topic", pa.string()),
    ("broker", pa.string()),
    ("queueId", pa.int32()),
    ("queueOffset", pa.int64()),
    ("msgId", pa.string()),
    ("keys", pa.string()),
    ("tags", pa.string()),
    ("body", pa.binary()),
    ("properties", pa.map_(pa.string(), pa.string())),
    ("bornTimestamp", pa.timestamp("us", tz="UTC")),
    ("storeTimestamp", pa.timestamp("us", tz="UTC")),
    ("reconsumeTimes", pa.int32()),
])


def record_batch(queue: QueueRef, messages: Sequence[MessageExt]) -> pa.RecordBatch:
    """One record batch of ``queue``'s ``messages``; ``keys`` is the KEYS property as stored (space-separated)."""
    n = len(messages)
    return _batch([queue.topic] * n, [queue.broker] * n, [queue.queue_id] * n, messages)


def stored_batch(broker: str | None, messages: Sequence[MessageExt]) -> pa.RecordBatch:
    """One record batch of records read from the commit log, which mixes queues: each row's topic and
    queue id are its record's; ``broker`` names the broker the store belongs to."""
    return _batch([m.topic for m in messages], [broker] * len(messages), [m.queue_id for m in messages], messages)


def _batch(topics: list, brokers: list, queue_ids: list, messages: Sequence[MessageExt]) -> pa.RecordBatch:
    return pa.RecordBatch.from_arrays([
        pa.array(topics, pa.string()),
        pa.array(brokers, pa.string()),
        pa.array(queue_ids, pa.int32()),
        pa.array([m.queue_offset for m in messages], pa.int64()),
        pa.array([m.msg_id for m in messages], pa.string()),
        pa.array([m.properties.get(MessageConst.KEYS) for m in messages], pa.string()),
        pa.array([m.properties.get(MessageConst.TAGS) for m in messages], pa.string()),
        pa.array([m.body for m in messages], pa.binary()),
        pa.array([list(m.properties.items()) for m in messages], pa.map_(pa.string(), pa.string())),
        pa.array([m.born_timestamp * 1000 for m in messages], pa.timestamp("us", tz="UTC")),
        pa.array([m.store_timestamp * 1000 for m in messages], pa.timestamp("us", tz="UTC")),
        pa.array([m.reconsume_times for m in messages], pa.int32()),
    ], schema=ARROW_SCHEMA)
