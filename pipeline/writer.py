"""Writing rows as messages, in a Spark task: the task's rows go out in SEND_BATCH_MESSAGE requests.

Columns: ``body`` (binary or string, required), and optionally ``topic`` (else the ``topic`` option),
``tags``, ``keys`` (a string, space-separated, or an array of strings), ``properties`` (map of strings)
and ``delay`` (a delay level; such rows are sent one by one, as a batch cannot be delayed).

Each row's UNIQ_KEY (the msgId consumers see) is fixed by the write, the task's partition and the row's
place in it, not by the attempt: a retried task sends its rows again under the same msgIds, so a consumer
that keeps the msgIds it has handled (or ``dropDuplicates(["msgId"])`` on a read) sees each row once.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa

from ferrymq.sdk.blocking_clients import BlockingProducer
from ferrymq.sdk.message import Message
from ferrymq.wire.message import MessageConst

from .options import SEND_BATCH_BYTES, OptionError, WriteOptions

#: the columns a written DataFrame may have
COLUMNS = ("body", "topic", "tags", "keys", "properties", "delay")


class ColumnError(ValueError):
    """The DataFrame lacks a body column or has one the write does not know."""


def check_columns(names: list[str], options: WriteOptions) -> None:
    """Fail at ``save()`` on a DataFrame the write cannot send."""
    if "body" not in names:
        raise ColumnError(f"rocketmq write: the DataFrame needs a body column (it has {', '.join(names)})")
    extra = [n for n in names if n not in COLUMNS]
    if extra:
        raise ColumnError(f"rocketmq write: column(s) {', '.join(extra)} cannot be written; the columns are "
                          f"{', '.join(COLUMNS)}")
    if options.topic is None and "topic" not in names:
        raise OptionError("topic", "required: give the option or a topic column")


def uniq_key(write_id: str, partition: int, index: int) -> str:
    """32 hex digits like the client's own UNIQ_KEYs: the write (16), the partition (6), the row (10)."""
    return f"{write_id}{partition:06X}{index:010X}"


@dataclass(frozen=True)
class SendSettings:
    options: WriteOptions
    #: 16 hex digits chosen once per write on the driver
    write_id: str


def _messages(settings: SendSettings, partition: int, batches: Iterator[pa.RecordBatch]) -> Iterator[Message]:
    index = 0
    for batch in batches:
        columns = {name: batch.column(name).to_pylist() for name in batch.schema.names}
        absent = [None] * batch.num_rows
        bodies, topics, tags, keys, properties, delays = (columns.get(name, absent) for name in COLUMNS)
        for row in range(batch.num_rows):
            topic = topics[row] or settings.options.topic
            if topic is None:
                raise ValueError(f"row {index} of partition {partition} has no topic and the write has no topic option")
            row_keys = keys[row]
            row_properties = dict(properties[row] or ())
            row_properties[MessageConst.UNIQ_KEY] = uniq_key(settings.write_id, partition, index)
            yield Message(topic, bodies[row] or b"", tags=tags[row],
                          keys=list(row_keys) if isinstance(row_keys, list) else row_keys, properties=row_properties,
                          delay_level=int(delays[row] or 0))
            index += 1


def send_partition(settings: SendSettings, partition: int, batches: Iterator[pa.RecordBatch]) -> int:
    """Send the task's rows in order, consecutive rows of one topic in one batch; returns how many were sent."""
    producer = BlockingProducer(settings.options.producer_group, settings.options.name_server)
    producer.start()
    sent = 0
    pending: list[Message] = []
    pending_bytes = 0

    def flush() -> None:
        nonlocal sent, pending_bytes
        if len(pending) == 1:
            producer.send(pending[0])
        elif pending:
            producer.send_batch(list(pending))
        sent += len(pending)
        pending.clear()
        pending_bytes = 0

    try:
        for msg in _messages(settings, partition, batches):
            if msg.delay_level > 0:
                flush()
                producer.send(msg)
                sent += 1
                continue
            size = len(msg.body) + sum(len(k) + len(v) for k, v in msg.properties.items())
            if pending and (pending[0].topic != msg.topic or len(pending) >= settings.options.batch_size
                            or pending_bytes + size > SEND_BATCH_BYTES):
                flush()
            pending.append(msg)
            pending_bytes += size
        flush()
    finally:
        producer.shutdown()
    return sent
