"""Reading one queue range, in a Spark task: pulls of ``pullBatchSize`` messages, gathered into Arrow
batches of about :data:`BATCH_ROWS` rows (whole pulls; the range's last batch holds what is left).

The filter (tags or SQL92) travels in each pull request and is applied by the broker; the broker's answer
still moves the next offset past the messages it skipped, so a filtered range ends where an unfiltered one
does.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
from pyspark.sql.datasource import InputPartition

from ferrymq.sdk.blocking_clients import BlockingPullConsumer
from ferrymq.sdk.message import PullStatus

from .queues import QueueRange
from .rows import record_batch

#: rows an Arrow batch gathers (whole pulls) before it goes to Spark, which pays a fixed cost per batch
BATCH_ROWS = 1024


@dataclass
class QueuePartition(InputPartition):
    """One Spark partition: the range of one message queue."""

    range: QueueRange


@dataclass(frozen=True)
class PullSettings:
    """What every task of one read pulls with (picklable: it is shipped to the tasks)."""

    name_server: str
    consumer_group: str
    expression: str = "*"
    expression_type: str = "TAG"
    pull_batch_size: int = 32


def read_range(settings: PullSettings, ranges: list[QueueRange]) -> Iterator[pa.RecordBatch]:
    """The messages of each range in offset order, as record batches (none for an empty range)."""
    if all(r.empty for r in ranges):
        return
    consumer = BlockingPullConsumer(settings.consumer_group, settings.name_server)
    consumer.start()
    try:
        for queue_range in ranges:
            yield from _pull_range(consumer, settings, queue_range)
    finally:
        consumer.shutdown()


def _pull_range(consumer: BlockingPullConsumer, settings: PullSettings, queue_range: QueueRange):
    mq = queue_range.queue.message_queue()
    offset = queue_range.start
    pending: list = []
    while offset < queue_range.end:
        wanted = min(settings.pull_batch_size, queue_range.end - offset)
        result = consumer.pull(mq, settings.expression, offset, wanted, expression_type=settings.expression_type)
        if result.status is PullStatus.FOUND:
            pending += [m for m in result.messages if m.queue_offset < queue_range.end]
            if len(pending) >= BATCH_ROWS:
                yield record_batch(queue_range.queue, pending)
                pending = []
        elif result.status is PullStatus.NO_NEW_MSG or result.next_begin_offset <= offset:
            # the range was planned from the broker's own offsets; a queue that ends early was truncated
            break
        offset = result.next_begin_offset
    if pending:
        yield record_batch(queue_range.queue, pending)
