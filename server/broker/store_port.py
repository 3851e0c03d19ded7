"""What the broker needs from the message store, stated once.

The processors call only these methods; :mod:`server.broker.store_adapter` maps them onto
``server.store``'s MessageStore. Results use the store's own types (PutMessageResult,
GetMessageResult, QueryMessageResult with Apache's status names).
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from ferrymq.server.store.status import GetMessageResult, PutMessageResult, QueryMessageResult
from ferrymq.wire.message import MessageExt

#: ``listener(topic, queue_id, max_offset, tags_code)`` after a message is dispatched.
ArrivalListener = Callable[[str, int, int, int], None]


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
