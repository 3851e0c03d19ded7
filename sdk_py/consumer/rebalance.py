"""Rebalance (Java ``RebalanceImpl``): decide which queues this consumer owns and start or stop them.

Per subscribed topic: CLUSTERING asks one broker of the topic for the group's consumer ids
(GET_CONSUMER_LIST_BY_GROUP) and takes its :func:`allocate_average` share; BROADCASTING owns every
queue. Queues no longer owned are dropped after their offset is persisted (and, for orderly consumers,
unlocked); new ones start at the offset :meth:`compute_pull_from_where` finds. Orderly CLUSTERING
consumers must hold a broker lock (LOCK_BATCH_MQ) on a queue before consuming it.
"""

from __future__ import annotations

import enum
import logging
import time
from collections.abc import Callable
from typing import Any

from twisted.internet import defer

from ferrymq.wire.bodies import MessageQueue, SubscriptionData

from .allocate import allocate_average
from .offset_store import ReadOffsetType
from .process_queue import ProcessQueue

log = logging.getLogger("ferrymq.sdk.rebalance")


class MessageModel(str, enum.Enum):
    CLUSTERING = "CLUSTERING"
    BROADCASTING = "BROADCASTING"


class ConsumeFromWhere(str, enum.Enum):
    CONSUME_FROM_LAST_OFFSET = "CONSUME_FROM_LAST_OFFSET"
    CONSUME_FROM_FIRST_OFFSET = "CONSUME_FROM_FIRST_OFFSET"
    CONSUME_FROM_TIMESTAMP = "CONSUME_FROM_TIMESTAMP"


class Rebalancer:
    """Owns the consumer's process-queue table. ``start_queue(mq, pq, offset)`` starts pulling a newly
    owned queue; the consumer supplies it."""

    def __init__(
        self,
        consumer: Any,
        start_queue: Callable[[MessageQueue, ProcessQueue, int], None],
    ):
        self.consumer = consumer
        self.start_queue = start_queue
        self.pq_table: dict[MessageQueue, ProcessQueue] = {}
        #: topic -> its readable queues, from the latest route
        self.topic_queues: dict[str, set[MessageQueue]] = {}
        self._lock = defer.DeferredLock()
        self._queued: defer.Deferred | None = None

    @property
    def _clustering(self) -> bool:
        return self.consumer.message_model == MessageModel.CLUSTERING

    @property
    def _needs_lock(self) -> bool:
        return self.consumer.orderly and self._clustering

    def do_rebalance(self) -> defer.Deferred:
        """Rebalance after the one running (if any); requests arriving while one waits share it, so a
        burst of NOTIFY_CONSUMER_IDS_CHANGED costs one extra round, not one each."""
        if self._queued is not None:
            return self._queued
        waiter: defer.Deferred = defer.Deferred()
        self._queued = waiter

        def run() -> defer.Deferred:
            self._queued = None  # from here on a new request needs a new round
            return self._rebalance()

        self._lock.run(run).chainDeferred(waiter)
        return waiter

    @defer.inlineCallbacks
    def _rebalance(self):
        subs: dict[str, SubscriptionData] = self.consumer.subscriptions
        inst = self.consumer.instance
        for topic in sorted(subs):
            mqs = self.topic_queues.get(topic)
            if mqs is None:
                try:
                    yield inst.update_route(topic)
                except Exception as exc:  # noqa: BLE001
                    log.info("%s: no route for %s yet: %s", self.consumer.group, topic, exc)
                mqs = self.topic_queues.get(topic)
            if not mqs:
                # a routed topic without readable queues here (a consumer may leave some brokers' queues to
                # others) is told at DEBUG: it would otherwise be told at every rebalance
                (log.info if mqs is None else log.debug)(
                    "%s: topic %s has no readable queues (yet)", self.consumer.group, topic)
                continue
            if self._clustering:
                addr = inst.any_broker_addr(topic)
                if addr is None:
                    continue
                try:
                    cids = yield inst.api.get_consumer_ids(addr, self.consumer.group)
                except Exception as exc:  # noqa: BLE001 - the broker may not have our heartbeat yet
                    log.info("%s: consumer list from %s failed: %s", self.consumer.group, addr, exc)
                    continue
                owned = set(allocate_average(inst.client_id, mqs, cids))
            else:
                owned = set(mqs)
            yield self._update_process_queues(topic, owned)
        for mq in [mq for mq in self.pq_table if mq.topic not in subs]:
            yield self.remove_queue(mq)

    @defer.inlineCallbacks
    def _update_process_queues(self, topic: str, owned: set[MessageQueue]):
        for mq in [mq for mq in self.pq_table if mq.topic == topic and mq not in owned]:
            yield self.remove_queue(mq)
        for mq in sorted(owned - set(self.pq_table), key=lambda q: (q.broker_name or "", q.queue_id)):
            if self._needs_lock:
                locked = yield self.lock(mq)
                if not locked:
                    log.info("%s: %s is locked by another consumer; skipping it this round", self.consumer.group, mq)
                    continue
            store = self.consumer.offset_store
            store.remove_offset(mq)
            try:
                offset = yield self.compute_pull_from_where(mq)
            except Exception as exc:  # noqa: BLE001 - retried at the next rebalance
                log.warning("%s: cannot find where to start %s: %s", self.consumer.group, mq, exc)
                continue
            if mq in self.pq_table or mq.topic not in self.consumer.subscriptions:
                continue
            pq = self.pq_table.get(mq) or ProcessQueue()
            if self._needs_lock:
                pq.locked, pq.last_lock_time = True, time.monotonic()
            self.pq_table[mq] = pq
            log.info("%s: now consuming %s from offset %d", self.consumer.group, mq, offset)
            self.start_queue(mq, pq, offset)

    @defer.inlineCallbacks
    def remove_queue(self, mq: MessageQueue, *, persist: bool = True):
        pq = self.pq_table.pop(mq, None)
        if pq is None:
            return
        pq.dropped = True
        store = self.consumer.offset_store
        if persist:
            try:
                yield store.persist(mq)
            except Exception as exc:  # noqa: BLE001
                log.warning("%s: persisting %s on release failed: %s", self.consumer.group, mq, exc)
        store.remove_offset(mq)
        if self._needs_lock:
            yield self.unlock([mq])
        log.info("%s: released %s", self.consumer.group, mq)

    @defer.inlineCallbacks
    def compute_pull_from_where(self, mq: MessageQueue):
        """The committed offset, else where ConsumeFromWhere says (retry topics start at 0 / max)."""
        c = self.consumer
        last = yield c.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_STORE)
        if last >= 0:
            return last
        retry = (mq.topic or "").startswith("%RETRY%")
        where = c.consume_from_where
        if where == ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET:
            return 0
        addr = yield c.instance.require_broker_addr(mq.broker_name, mq.topic)
        if where == ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET:
            if retry:
                return 0
            off = yield c.instance.api.get_max_offset(addr, mq)
            return off
        if retry:
            off = yield c.instance.api.get_max_offset(addr, mq)
            return off
        off = yield c.instance.api.search_offset(addr, mq, c.consume_timestamp_ms(mq.topic))
        return off

    # ------------------------------------------------------------------ orderly locks

    @defer.inlineCallbacks
    def lock(self, mq: MessageQueue):
        inst = self.consumer.instance
        try:
            addr = yield inst.require_broker_addr(mq.broker_name, mq.topic)
            granted = yield inst.api.lock_batch_mq(addr, self.consumer.group, inst.client_id, [mq])
        except Exception as exc:  # noqa: BLE001
            log.info("%s: locking %s failed: %s", self.consumer.group, mq, exc)
            return False
        pq = self.pq_table.get(mq)
        if pq is not None:
            pq.locked = mq in granted
            if pq.locked:
                pq.last_lock_time = time.monotonic()
        return mq in granted

    @defer.inlineCallbacks
    def lock_all(self):
        """Renew the locks of every owned queue, per broker; queues not granted stop consuming."""
        inst = self.consumer.instance
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in self.pq_table:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, mqs in by_broker.items():
            addr = inst.find_broker_addr(broker)
            if addr is None:
                continue
            try:
                granted = yield inst.api.lock_batch_mq(addr, self.consumer.group, inst.client_id, mqs)
            except Exception as exc:  # noqa: BLE001
                log.info("%s: renewing locks on %s failed: %s", self.consumer.group, broker, exc)
                continue
            now = time.monotonic()
            for mq in mqs:
                pq = self.pq_table.get(mq)
                if pq is None:
                    continue
                pq.locked = mq in granted
                if pq.locked:
                    pq.last_lock_time = now

    @defer.inlineCallbacks
    def unlock(self, mqs: list[MessageQueue], *, oneway: bool = False):
        inst = self.consumer.instance
        by_broker: dict[str, list[MessageQueue]] = {}
        for mq in mqs:
            by_broker.setdefault(mq.broker_name, []).append(mq)
        for broker, group_mqs in by_broker.items():
            addr = inst.find_broker_addr(broker)
            if addr is None:
                continue
            try:
                yield inst.api.unlock_batch_mq(addr, self.consumer.group, inst.client_id, group_mqs, oneway=oneway)
            except Exception as exc:  # noqa: BLE001
                log.info("%s: unlocking on %s failed: %s", self.consumer.group, broker, exc)
