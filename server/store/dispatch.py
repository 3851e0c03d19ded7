"""Dispatch: what a record in the commit log adds to the rest of the store.

A record is findable once its consume-queue unit is written (unless it is a prepared or rolled-back
transaction message), its keys are in the index, and the arriving listeners (long polling) have been
told. :meth:`Dispatcher.dispatch` is that step, for a record or a run of records of one queue, and every
writer of the commit log goes through it:

* a put, with the units and index items its encoder made while writing the records (a batch's in one
  pass, by :func:`wire.batch.write`): nothing is read back;
* recovery and replication, for records read from the commit log: :meth:`Dispatcher.dispatch_record`
  takes a record (its parsed header, :func:`wire.message.peek_record`, and its commit-log offset) and
  makes the same unit and items a put of it made.
"""

from __future__ import annotations

import functools
import struct
from typing import Callable

from ferrymq.wire.message import MessageConst, MessageSysFlag, RecordInfo, decode_properties
from ferrymq.wire.message import tags_code as compute_tags_code

from .consume_queue import UNIT, UNIT_SIZE, ConsumeQueue
from .index import IndexService, key_items

#: the delay service's queue: its tag codes are delivery times
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
TX_PREPARED = MessageSysFlag.TRANSACTION_PREPARED_TYPE
TX_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE

#: ``listener(topic, queue_id, max_offset, tags_code, store_timestamp)``
ArrivingListener = Callable[[str, int, int, int | None, int], None]
_TAG_CODE = struct.Struct(">12xq")


@functools.lru_cache(maxsize=256)
def _tag_codes_of(count: int) -> struct.Struct:
    """Reads the tag codes out of ``count`` packed consume-queue units in one call."""
    return struct.Struct(">" + "12xq" * count)


def common_tag_code(units: bytes) -> int | None:
    """The tag code every one of the packed units has, or None when they differ."""
    count = len(units) // UNIT_SIZE
    if count == 1:
        return _TAG_CODE.unpack(units)[0]
    codes = _tag_codes_of(count).unpack(units)
    first = codes[0]
    return first if codes.count(first) == count else None


class Dispatcher:
    """Dispatches records to the consume queues, the index and the arriving listeners (writer thread)."""

    def __init__(self, cq_for_write: Callable[[str, int], ConsumeQueue], index: IndexService, *,
                 index_enabled: bool, delay_ms: list[int]):
        self._cq_for_write = cq_for_write
        self.index = index
        self.index_enabled = index_enabled
        self._delay_ms = delay_ms
        self.listeners: list[ArrivingListener] = []
        #: the commit-log offset up to which every record is dispatched (read by the flush thread: it is
        #: set after the units and items it covers are written)
        self.dispatched_offset = 0

    def tags_code(self, topic: str, props: dict[str, str], store_ts: int) -> int:
        """A record's consume-queue tag code: the TAGS hash; for :data:`SCHEDULE_TOPIC`, the delivery time."""
        if topic == SCHEDULE_TOPIC:
            try:
                level = int(props.get(MessageConst.DELAY_TIME_LEVEL, "0"))
            except ValueError:
                level = 0
            if level > 0:
                return store_ts + self._delay_ms[min(level, len(self._delay_ms)) - 1]
            return store_ts
        return compute_tags_code(props.get(MessageConst.TAGS))

    def dispatch(self, cq: ConsumeQueue | None, queue_offset: int, units: bytes, index_items: bytes,
                 store_ts: int, end: int, notify: bool = True) -> None:
        """Dispatch the records that end at commit-log offset ``end``: ``units`` (packed, one per record,
        consecutive from ``queue_offset``) go to ``cq`` (None for records with no unit), ``index_items``
        (packed :data:`wire.batch.INDEX_ITEM`) to the index; then the listeners hear of them once, with
        the queue's new max offset and the tag code the units share (None when they differ)."""
        if cq is not None:
            cq.append(queue_offset, units)
        if index_items:
            self.index.add_items(index_items, store_ts)
        self.dispatched_offset = end
        if notify and cq is not None and self.listeners:
            tc = common_tag_code(units)
            max_offset = queue_offset + len(units) // UNIT_SIZE
            for listener in self.listeners:
                listener(cq.topic, cq.queue_id, max_offset, tc, store_ts)

    def dispatch_record(self, info: RecordInfo, phys: int, index: bool = True, notify: bool = True) -> None:
        """Dispatch the record read from the commit log at ``phys`` (recovery, replication): the unit and
        index items are the ones its put made. ``index=False`` leaves the index alone (recovery: the
        record is in it already)."""
        tx = info.sys_flag & MessageSysFlag.TRANSACTION_MASK
        props = decode_properties(info.properties) if info.properties else {}
        ts = info.store_timestamp
        if tx == TX_PREPARED or tx == TX_ROLLBACK:
            cq, units = None, b""
        else:
            cq = self._cq_for_write(info.topic, info.queue_id)
            units = UNIT.pack(phys, info.size, self.tags_code(info.topic, props, ts))
        items = b""
        if index and self.index_enabled and tx != TX_ROLLBACK:
            items = key_items(info.topic, props.get(MessageConst.KEYS), props.get(MessageConst.UNIQ_KEY), phys)
        self.dispatch(cq, info.queue_offset, units, items, ts, phys + info.size, notify)
