"""The broker's view of ``server.store.MessageStore`` (the calls :mod:`.store_port` lists, both parts).

Puts take a MessageExt whose topic, queue and properties are final; a SYNC_FLUSH put becomes a
:class:`~server.remoting.pending.Pending` (a light Deferred) that fires after the fsync covering it.
The young-queue rule of QUERY_CONSUMER_OFFSET needs "is this offset still in memory", which the store
does not expose: it is computed here from the same ratio Apache uses (``accessMessageInMemoryMaxRatio``
of physical memory behind the head).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ferrymq.remoting.pending import Pending
from ferrymq.server.histogram import HistogramCounts
from ferrymq.server.store.message_store import MessageStore, total_memory
from ferrymq.server.store.status import GetMessageResult, PutMessageResult, PutMessageStatus, QueryMessageResult
from ferrymq.server.store.twisted_adapter import deferred_for, flush_watch
from ferrymq.wire.message import Host, MessageExt

from .store_port import ArrivalListener, QueueUnit


class StoreAdapter:
    def __init__(self, store: MessageStore, reactor: Any):
        self.store = store
        self.reactor = reactor
        self._memory_limit = total_memory() * store.config.accessMessageInMemoryMaxRatio // 100
        self._watch = flush_watch(store, reactor)
        #: SYNC_MASTER with inSyncReplicas > 1: (the HA master, slave acks a put waits for, slaveTimeout ms)
        self.replicas: tuple[Any, int, int] | None = None

    def _promise(self, result: PutMessageResult, properties: dict[str, str]) -> Any:
        """The answer to a put: at once, or once flushed (SYNC_FLUSH) and on enough slaves (SYNC_MASTER).
        A message whose ``properties`` say WAIT=false waits for neither, as in Apache."""
        promise = deferred_for(self.store, result, self.reactor, self._watch, Pending) \
            if result.needs_flush_wait else result
        if (self.replicas is None or result.status is not PutMessageStatus.PUT_OK
                or properties.get("WAIT") == "false"):
            return promise
        return self._replicated(promise, result)

    def _replicated(self, promise: Any, result: PutMessageResult) -> Pending:
        """Apache's handleDiskFlushAndHA: both waits run from the put on; a slave timeout is the answer's
        status (FLUSH_SLAVE_TIMEOUT) whatever the flush's."""
        master, slaves, timeout_ms = self.replicas
        acked = master.wait_for_replicas(result.commitlog_offset + result.wrote_bytes, slaves, timeout_ms)
        if isinstance(promise, PutMessageResult):  # no flush to wait for: the slaves' answer is the put's
            return acked.addCallback(_replicated_result, promise)
        out = Pending()

        def replicated(ok: bool, flushed: PutMessageResult) -> None:
            out.callback(_replicated_result(ok, flushed))

        def flushed(r: PutMessageResult) -> None:
            acked.addCallback(replicated, r)

        promise.addCallback(flushed)
        return out

    def put_message(self, msg: MessageExt, properties_str: str | None = None) -> Any:
        """``properties_str``: ``msg.properties`` already encoded (the send path has it), stored verbatim."""
        return self._promise(self.store.put_message(
            msg.topic, msg.queue_id, msg.body, msg.properties, flag=msg.flag, sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp, born_host=msg.born_host, reconsume_times=msg.reconsume_times,
            prepared_transaction_offset=msg.prepared_transaction_offset, properties_str=properties_str,
        ), msg.properties)

    def put_batch(self, topic: str, queue_id: int, body: bytes, container: dict[str, str], *, sys_flag: int,
                  born_timestamp: int, born_host: tuple[str, int], reconsume_times: int) -> Any:
        return self._promise(self.store.put_batch(
            topic, queue_id, body, container, sys_flag=sys_flag, born_timestamp=born_timestamp,
            born_host=born_host, reconsume_times=reconsume_times,
        ), container)

    def get_message(self, topic: str, queue_id: int, offset: int, max_nums: int, max_bytes: int,
                    tag_filter: Any) -> GetMessageResult:
        return self.store.get_message("", topic, queue_id, offset, max_nums, max_bytes, tag_filter)

    def get_max_offset(self, topic: str, queue_id: int) -> int:
        return self.store.get_max_offset(topic, queue_id)

    def get_min_offset(self, topic: str, queue_id: int) -> int:
        return self.store.get_min_offset(topic, queue_id)

    def get_store_time(self, topic: str, queue_id: int, offset: int) -> int:
        return self.store.get_store_time(topic, queue_id, offset) if offset >= 0 else -1

    def get_unit(self, topic: str, queue_id: int, offset: int) -> tuple[int, int, int] | None:
        """The consume-queue unit (commit-log offset, size, tag code) at ``offset``, or None."""
        cq = self.store.find_consume_queue(topic, queue_id)
        return cq.get_unit(offset) if cq is not None else None

    def search_offset_by_time(self, topic: str, queue_id: int, timestamp: int, upper: bool = False) -> int:
        return self.store.search_offset_by_time(topic, queue_id, timestamp, "UPPER" if upper else "LOWER")

    def look_message_by_offset(self, phys_offset: int) -> bytes | None:
        if phys_offset < 0:
            return None
        try:
            view = self.store.select_one_message_by_offset(phys_offset)
        except Exception:  # noqa: BLE001 - an offset that is no record start is "not found"
            return None
        return bytes(view) if view is not None else None

    def query_message(self, topic: str, key: str, max_num: int, begin: int, end: int) -> QueryMessageResult:
        return self.store.query_message(topic, key, max_num, begin, end)

    def is_in_memory(self, topic: str, queue_id: int, offset: int) -> bool:
        cq = self.store.find_consume_queue(topic, queue_id)
        if cq is None or not (cq.min_offset <= offset < cq.max_offset):
            return False
        unit = cq.get_unit(offset)
        if unit is None:
            return False
        return self.store.get_max_phy_offset() - unit[0] <= self._memory_limit

    def add_arrival_listener(self, listener: ArrivalListener) -> None:
        self.store.add_arriving_listener(
            lambda topic, queue_id, max_offset, tags_code, _ts: listener(topic, queue_id, max_offset, tags_code)
        )

    def delete_topics(self, topics: set[str]) -> None:
        self.store.delete_topics(topics)

    def clean_expired_files(self) -> None:
        self.store.clean_expired_files_manually()

    def commitlog_min_offset(self) -> int:
        return self.store.get_min_phy_offset()

    def commitlog_max_offset(self) -> int:
        return self.store.get_max_phy_offset()

    def earliest_message_time(self) -> int:
        return self.store.get_earliest_message_time()

    def commitlog_flush_times(self) -> HistogramCounts:
        return self.store.commitlog.flush_times.read()

    # ------------------------------------------------------------------ SystemStore

    @property
    def store_host(self) -> Host:
        return self.store.store_host

    @property
    def config_dir(self) -> str:
        return self.store.config.config_dir

    @property
    def delay_levels_ms(self) -> list[int]:
        return self.store.config.delay_level_millis()

    def queue_range(self, topic: str, queue_id: int) -> tuple[int, int] | None:
        cq = self.store.find_consume_queue(topic, queue_id)
        return None if cq is None else (cq.min_offset, cq.max_offset)

    def iter_queue(self, topic: str, queue_id: int, start: int, end: int) -> Iterator[QueueUnit]:
        return self.store.iter_queue(topic, queue_id, start, end)

    def read_record(self, phys_offset: int, size: int | None = None) -> memoryview | None:
        return self.store.select_one_message_by_offset(phys_offset, size)

    def append(self, topic: str, queue_id: int, body: bytes, properties: dict[str, str] | str | None = None, *,
               flag: int = 0, sys_flag: int = 0, born_timestamp: int = 0, born_host: Host = ("127.0.0.1", 0),
               reconsume_times: int = 0, prepared_transaction_offset: int = 0) -> PutMessageResult:
        return self.store.put_message(
            topic, queue_id, body, properties, flag=flag, sys_flag=sys_flag, born_timestamp=born_timestamp,
            born_host=born_host, reconsume_times=reconsume_times, prepared_transaction_offset=prepared_transaction_offset,
        )


def _replicated_result(ok: bool, result: PutMessageResult) -> PutMessageResult:
    """``result`` once the slaves answered: FLUSH_SLAVE_TIMEOUT when they did not in time."""
    if not ok:
        result.status = PutMessageStatus.FLUSH_SLAVE_TIMEOUT
    return result
