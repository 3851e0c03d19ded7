"""What the broker needs from the message store, stated once.

The processors call only :class:`BrokerStore`; the services that keep their state in system queues
(delay levels, the timer wheel, transactions) call only :class:`SystemStore`. :class:`StorePort` is
both, and :mod:`server.broker.store_adapter` maps it onto ``server.store``'s MessageStore. Results use
the store's own types (PutMessageResult, GetMessageResult, QueryMessageResult with Apache's status names).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Callable, Protocol

from ferrymq.server.histogram import HistogramCounts
from ferrymq.server.store.status import GetMessageResult, PutMessageResult, QueryMessageResult
from ferrymq.wire.message import Host, MessageExt

#: ``listener(topic, queue_id, max_offset, tags_code)`` after a message is dispatched.
ArrivalListener = Callable[[str, int, int, int], None]
#: One unit of a queue as the services walk it: (queue offset, tags code, the record or None when the
#: commit log no longer has it).
QueueUnit = tuple[int, int, "memoryview | None"]


class BrokerStore(Protocol):
    def put_message(self, msg: MessageExt, properties_str: str | None = None) -> PutMessageResult | Any:
        """Append one message (topic/queue/properties already final); may return a Deferred."""

    def put_batch(self, topic: str, queue_id: int, body: bytes, container: dict[str, str], *, sys_flag: int,
                  born_timestamp: int, born_host: tuple[str, int], reconsume_times: int) -> PutMessageResult | Any:
        """Append a SEND_BATCH_MESSAGE body to one queue with consecutive offsets; may return a Deferred.
        Each entry keeps its properties string, with the ``container``'s properties it lacks appended; a
        malformed body is MESSAGE_ILLEGAL with a remark saying where."""

    def get_message(self, topic: str, queue_id: int, offset: int, max_nums: int, max_bytes: int,
                    tag_filter: Callable[[int], bool] | None) -> GetMessageResult: ...

    def get_max_offset(self, topic: str, queue_id: int) -> int: ...

    def get_min_offset(self, topic: str, queue_id: int) -> int: ...

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        """Store timestamp of the message at a queue offset; -1 when there is none."""

    def get_unit(self, topic: str, queue_id: int, offset: int) -> tuple[int, int, int] | None:
        """The consume-queue unit (commit-log offset, size, tag code) at ``offset``, or None."""

    def search_offset_by_time(self, topic: str, queue_id: int, timestamp: int, upper: bool = False) -> int: ...

    def look_message_by_offset(self, phys_offset: int) -> bytes | None:
        """The raw record at a commit-log offset, or None."""

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult: ...

    def is_in_memory(self, topic: str, queue_id: int, offset: int) -> bool:
        """Whether the message at a queue offset is still "hot" (QUERY_CONSUMER_OFFSET's young-queue rule)."""

    def add_arrival_listener(self, listener: ArrivalListener) -> None: ...

    def delete_topics(self, topics: set[str]) -> None: ...

    def clean_expired_files(self) -> None:
        """Run the retention pass now (TRIGGER_DELETE_FILES and friends)."""

    def commitlog_min_offset(self) -> int: ...

    def commitlog_max_offset(self) -> int: ...

    def earliest_message_time(self) -> int: ...

    def commitlog_flush_times(self) -> HistogramCounts:
        """How long the commit log's flushes took so far (any thread may be flushing meanwhile)."""


class SystemStore(Protocol):
    """What the delay-level, timer and transaction services need: walk a system queue, read a record,
    and append a message at once (they never wait for a flush: no client is waiting for the answer)."""

    @property
    def store_host(self) -> Host:
        """``(ip, port)`` written into STOREHOST and offset message ids."""

    @property
    def config_dir(self) -> str:
        """Where the services keep their progress files, next to the store's own."""

    @property
    def delay_levels_ms(self) -> list[int]:
        """``messageDelayLevel`` in ms; index 0 is level 1."""

    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int] | None:
        """(min offset, max offset) of a queue; None while it does not exist."""

    def iter_queue(self, topic: str, queue_id: int, start: int, end: int) -> Iterator[QueueUnit]:
        """Each unit of one queue in ``[start, end)``."""

    def get_unit(self, topic: str, queue_id: int, offset: int) -> tuple[int, int, int] | None: ...

    def read_record(self, phys_offset: int, size: int | None = None) -> memoryview | None:
        """The record at a commit-log offset (``size`` bytes when known), or None."""

    def append(self, topic: str, queue_id: int, body: bytes, properties: dict[str, str] | str | None = None, *,
               flag: int = 0, sys_flag: int = 0, born_timestamp: int = 0, born_host: Host = ("127.0.0.1", 0),
               reconsume_times: int = 0, prepared_transaction_offset: int = 0) -> PutMessageResult:
        """Append one message now; the result is final (no flush wait)."""


class StorePort(BrokerStore, SystemStore, Protocol):
    """The whole port: what :class:`server.broker.store_adapter.StoreAdapter` provides."""
