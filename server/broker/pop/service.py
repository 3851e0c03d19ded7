"""POP consumption: the broker hands out messages, each invisible to the group until acked or until its
invisible time passes, instead of the client tracking offsets (Apache's PopMessageProcessor,
AckMessageProcessor, ChangeInvisibleTimeProcessor and PopReviveService, in one object).

:meth:`PopService.pop` reads through the store's ordinary read API and answers a :class:`PopResult`
whose messages each carry a :class:`~ferrymq.wire.extra_info.ReceiptHandle`; :meth:`ack` and
:meth:`change_invisible` take that handle back. The remoting processors and the gRPC service call
these methods; nothing here knows a connection.

- Revive: a message not acked in time is copied to the group's POP retry topic (``%RETRY%group_topic``,
  ``+`` with enableRetryTopicV2) with reconsumeTimes + 1, or to ``%DLQ%group`` once that would pass the
  group's retryMaxTimes; the copy is popped with the topic's own messages.
- FIFO (``fifo=True``): a queue is locked to what one pop handed out until all of it is acked; past its
  invisible time the unacked rest is handed out again in order, with one more attempt counted.
- Long polling: a pop that finds nothing with ``poll_ms`` > 0 answers a Deferred, fired when a message
  arrives (or a FIFO queue unlocks) and is popped, or empty when the time is up.
- Persistence: what is in flight (and each FIFO batch) is saved as ``popState.json`` in the config
  directory by the broker, with the consumer offsets (the lowest unacked offset of each queue). After a
  restart everything saved as in flight comes back at its deadline; messages popped after the last save
  are popped again from the consumer offset. Delivery is at least once.
"""

from __future__ import annotations

import enum
import heapq
import logging
from dataclasses import dataclass, field
from typing import Any, Callable

from twisted.internet import defer, task

from ferrymq.server.sql92 import FilterSyntaxError, compile_expression
from ferrymq.server.store.status import GetMessageStatus, PutMessageStatus
from ferrymq.wire import topics as names
from ferrymq.wire.codes import Perm
from ferrymq.wire.extra_info import ReceiptHandle, offset_info, real_topic, retry_mark
from ferrymq.wire.message import MessageConst, decode_record, encode_record

from ..sql_subscriptions import SqlMessageFilter
from ..tag_subscriptions import TagFilter, build_subscription, is_tag_type
from .state import Inflight, OrderBatch, QueueKey, QueueState, from_json_obj, to_json_obj

log = logging.getLogger("ferrymq.broker.pop")

#: Most messages one pop hands out (Apache refuses more).
MAX_POP_NUMS = 32
#: ConsumeInitMode: where a group without an offset starts.
INIT_MIN, INIT_MAX = 0, 1
#: Queues of a POP retry topic (Apache's PopAckConstants.retryQueueNum).
RETRY_QUEUE_NUMS = 1
POP_STATE = "popState.json"


class PopError(Exception):
    """A pop the broker refuses: ``kind`` is one of topic, group, param, filter."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class AckStatus(enum.Enum):
    OK = "OK"
    #: the handle is stale (acked, revived or renewed already): nothing changed
    NOT_FOUND = "NOT_FOUND"


@dataclass(frozen=True)
class PoppedMessage:
    #: the record as a client decodes it; a retried message shows its original topic and its POP_CK
    record: bytes
    handle: ReceiptHandle
    topic: str
    queue_id: int
    queue_offset: int
    #: deliveries before this one (a FIFO redelivery's count; a retry's reconsumeTimes)
    attempts: int


@dataclass
class PopResult:
    messages: list[PoppedMessage] = field(default_factory=list)
    pop_time: int = 0
    invisible_ms: int = 0
    revive_qid: int = 0
    #: messages left behind in the queues looked at
    rest_num: int = 0
    start_offset_info: str = ""
    msg_offset_info: str = ""
    order_count_info: str = ""

    @property
    def found(self) -> bool:
        return bool(self.messages)


@dataclass
class _Pop:
    """One pop request, kept while it waits (long polling)."""

    group: str
    topic: str
    queue_id: int
    max_nums: int
    invisible_ms: int
    fifo: bool
    init_mode: int
    message_filter: Any
    #: False once whoever waits is gone (its connection closed): woken, it pops nothing
    alive: Callable[[], bool] | None = None
    deferred: defer.Deferred | None = None
    timer: Any = None


class PopService:
    def __init__(self, ctx: Any):
        self.ctx = ctx
        self.queues: dict[QueueKey, QueueState] = {}
        #: (deadline, key, offset or -1 for a FIFO batch, pop time) of everything in flight; stale entries
        #: (acked, renewed) are skipped when they come up
        self._deadlines: list[tuple[int, QueueKey, int, int]] = []
        #: topic -> pops waiting for it (a pop waits on its topic and on its retry topic)
        self._waiting: dict[str, list[_Pop]] = {}
        self._loop: task.LoopingCall | None = None
        self.running = False
        #: something to save since the broker last wrote popState.json
        self.changed = False
        #: whether the store tells :meth:`notify` of arrivals: only once a pop has waited, so a broker
        #: without POP long polling pays nothing per message sent
        self._listening = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self._loop = task.LoopingCall(self.revive)
        self._loop.clock = self.ctx.reactor
        self._loop.start(max(self.ctx.config.reviveInterval, 10) / 1000.0, now=False)
        self.running = True

    def stop(self) -> None:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.running = False
        for waiting in list(self._waiting.values()):
            for req in list(waiting):
                self._finish(req, PopResult())

    def to_json_obj(self) -> dict[str, Any]:
        return to_json_obj(self.queues)

    def load_json_obj(self, obj: dict[str, Any]) -> None:
        self.queues = from_json_obj(obj)
        self._deadlines = []
        for key, qs in self.queues.items():
            for offset, f in qs.inflight.items():
                self._deadlines.append((f.deadline, key, offset, f.pop_time))
            if qs.order is not None:
                self._deadlines.append((qs.order.deadline, key, -1, qs.order.pop_time))
        heapq.heapify(self._deadlines)

    # ------------------------------------------------------------------ pop

    def retry_topic(self, group: str, topic: str) -> str:
        return names.pop_retry_topic(topic, group, self.ctx.config.enableRetryTopicV2)

    def pop(self, group: str, topic: str, queue_id: int = -1, max_nums: int = MAX_POP_NUMS,
            invisible_ms: int = 60_000, *, expression: str = "*", expression_type: str = "TAG",
            fifo: bool = False, poll_ms: int = 0, init_mode: int = INIT_MAX,
            alive: Callable[[], bool] | None = None) -> PopResult | defer.Deferred:
        """Pop up to ``max_nums`` messages of ``topic`` (one queue, or every readable one for -1).

        Raises :class:`PopError` for an unknown topic or group, a bad queue or count, or an expression
        that does not compile. With ``poll_ms`` > 0 and nothing to pop, answers a Deferred; ``alive``
        says whether its caller still waits (a closed connection's pop takes no messages when woken)."""
        ctx = self.ctx
        topic_config = ctx.topics.get(topic)
        if topic_config is None:
            raise PopError("topic", f"topic[{topic}] not exist")
        if not topic_config.perm & Perm.READ:
            raise PopError("perm", f"the topic[{topic}] peeking message is forbidden")
        if queue_id >= topic_config.read_queue_nums:
            raise PopError("param", f"queueId[{queue_id}] is illegal, topic:[{topic}] "
                                    f"topicConfig.readQueueNums:[{topic_config.read_queue_nums}]")
        if not 0 < max_nums <= MAX_POP_NUMS:
            raise PopError("param", f"pop message's num must be between 1 and {MAX_POP_NUMS}")
        group_config = ctx.groups.find(group)
        if group_config is None:
            raise PopError("group", f"subscription group [{group}] does not exist")
        if not group_config.consume_enable:
            raise PopError("perm", f"subscription group no permission, {group}")
        req = _Pop(group, topic, queue_id, max_nums, invisible_ms, fifo, init_mode,
                   self._filter(topic, expression, expression_type), alive)
        result = self._pop_now(req)
        if result.found or poll_ms <= 0:
            return result
        if not self._listening:
            ctx.store.add_arrival_listener(self.notify)
            self._listening = True
        req.deferred = defer.Deferred()
        req.timer = ctx.reactor.callLater(poll_ms / 1000.0, self._finish, req, result)
        for t in (topic, self.retry_topic(group, topic)):
            self._waiting.setdefault(t, []).append(req)
        return req.deferred

    def _filter(self, topic: str, expression: str, expression_type: str) -> Any:
        if not is_tag_type(expression_type):
            try:
                return SqlMessageFilter(compile_expression(expression or ""))
            except FilterSyntaxError as exc:
                raise PopError("filter", f"parse the consumer's subscription failed: {exc}") from None
        tag_filter = TagFilter(build_subscription(topic, expression, expression_type))
        return None if tag_filter.matches_all else tag_filter

    def _pop_now(self, req: _Pop) -> PopResult:
        ctx = self.ctx
        now = ctx.now_ms()
        out = PopResult(pop_time=now, invisible_ms=req.invisible_ms,
                        revive_qid=names.POP_ORDER_REVIVE_QUEUE if req.fifo else 0)
        starts: list[tuple[str, int, str]] = []
        offsets: list[tuple[str, int, str]] = []
        counts: list[str] = []
        sources = [(req.topic, req.message_filter)]
        retry = self.retry_topic(req.group, req.topic)
        if not req.fifo and retry in ctx.topics:
            # retries first now and then, so a steady backlog cannot starve them (Apache: 20% of pops)
            first = ctx.rng.randrange(100) < ctx.config.popFromRetryProbability
            sources.insert(0 if first else 1, (retry, None))
        for topic, message_filter in sources:
            config = ctx.topics.get(topic)
            if config is None:
                continue
            queue_ids = ([req.queue_id] if req.queue_id >= 0 and topic == req.topic
                         else _rotated(config.read_queue_nums, ctx.rng))
            for queue_id in queue_ids:
                room = req.max_nums - len(out.messages)
                key = (req.group, topic, queue_id)
                if room <= 0:
                    qs = self.queues.get(key)
                    out.rest_num += max(0, ctx.store.get_max_offset(topic, queue_id) - (
                        qs.next if qs is not None else 0))
                    continue
                popped = (self._pop_fifo if req.fifo else self._pop_queue)(req, key, room, message_filter, now, out)
                if popped:
                    start, got, count_info = popped
                    starts.append((topic, queue_id, str(start)))
                    offsets.append((topic, queue_id, ",".join(str(m.queue_offset) for m in got)))
                    counts.extend(count_info)
        out.start_offset_info = offset_info(starts)
        out.msg_offset_info = offset_info(offsets)
        out.order_count_info = ";".join(counts)
        return out

    def _state(self, key: QueueKey, init_mode: int) -> QueueState:
        """The queue's state, (re)started from the offset table when new or when the table was reset."""
        group, topic, queue_id = key
        ctx = self.ctx
        committed = ctx.offsets.query(group, topic, queue_id, with_reset=False)
        qs = self.queues.get(key)
        if qs is not None and committed in (qs.committed, -1):
            return qs
        if committed < 0:
            store = ctx.store
            if init_mode == INIT_MIN or topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX):
                committed = store.get_min_offset(topic, queue_id)
            elif (ctx.config.initPopOffsetByCheckMsgInMem and store.get_min_offset(topic, queue_id) <= 0
                  and store.is_in_memory(topic, queue_id, 0)):
                committed = 0
            else:
                committed = max(0, store.get_max_offset(topic, queue_id) - 1)
            ctx.offsets.commit(group, topic, queue_id, committed)
        if qs is not None:
            log.info("POP state of group %s on %s queue %d restarts at %d: its offset was reset", *key, committed)
        qs = self.queues[key] = QueueState(next=committed, committed=committed)
        return qs

    def _commit(self, key: QueueKey, qs: QueueState) -> None:
        offset = qs.commit_offset()
        if offset != qs.committed:
            qs.committed = offset
            self.ctx.offsets.commit(key[0], key[1], key[2], offset)

    def _read(self, topic: str, queue_id: int, offset: int, room: int, message_filter: Any):
        """The store's read, restarted at the queue's start when ``offset`` fell out of its range."""
        store = self.ctx.store
        result = store.get_message(topic, queue_id, offset, room, 4 << 20, message_filter)
        if result.status in (GetMessageStatus.OFFSET_TOO_SMALL, GetMessageStatus.OFFSET_OVERFLOW_BADLY,
                             GetMessageStatus.OFFSET_FOUND_NULL) and result.next_begin_offset != offset:
            offset = result.next_begin_offset
            result = store.get_message(topic, queue_id, offset, room, 4 << 20, message_filter)
        return offset, result

    def _pop_queue(self, req: _Pop, key: QueueKey, room: int, message_filter: Any, now: int, out: PopResult):
        _group, topic, queue_id = key
        qs = self._state(key, req.init_mode)
        start, result = self._read(topic, queue_id, qs.next, room, message_filter)
        out.rest_num += max(0, result.max_offset - result.next_begin_offset)
        if result.status is GetMessageStatus.FOUND or result.next_begin_offset > qs.next:
            qs.next = max(qs.next, result.next_begin_offset)
        if not result.message_count:
            self._commit(key, qs)
            return None
        got = []
        for offset, record in zip(result.queue_offsets, result.messages):
            handle = ReceiptHandle(start, now, req.invisible_ms, 0, retry_mark(topic), self.ctx.config.brokerName,
                                   queue_id, offset)
            qs.inflight[offset] = Inflight(now, req.invisible_ms, start)
            self.changed = True
            heapq.heappush(self._deadlines, (now + req.invisible_ms, key, offset, now))
            got.append(self._popped(req, topic, queue_id, offset, record, handle, None))
        out.messages.extend(got)
        self._commit(key, qs)
        return start, got, []

    def _pop_fifo(self, req: _Pop, key: QueueKey, room: int, message_filter: Any, now: int, out: PopResult):
        _group, topic, queue_id = key
        qs = self._state(key, req.init_mode)
        old = qs.order
        if old is not None and old.deadline > now and old.first_unacked() < old.end:
            return None  # locked to what is in flight
        attempts = {} if old is None else {o: old.attempts.get(o, 0) + 1 for o in old.offsets if o not in old.acked}
        max_times = self._max_reconsume(req.group)
        while True:  # again when everything read went to the DLQ
            start, result = self._read(topic, queue_id, qs.commit_offset(), room, message_filter)
            if not result.message_count:
                out.rest_num += max(0, result.max_offset - result.next_begin_offset)
                if result.next_begin_offset > start:  # filtered-out messages only: consumed as far as they go
                    qs.order, qs.next = None, result.next_begin_offset
                    self._commit(key, qs)
                return None
            batch = OrderBatch(offsets=[], end=result.next_begin_offset, pop_time=now, invisible_ms=req.invisible_ms)
            got, counts = [], []
            for offset, record in zip(result.queue_offsets, result.messages):
                n = attempts.get(offset, 0)
                batch.offsets.append(offset)
                if n > max_times:  # out of attempts: to the DLQ, and the queue moves on
                    self._to_dlq(req.group, bytes(record), n)
                    batch.acked.add(offset)
                    continue
                if n:
                    batch.attempts[offset] = n
                    counts.append(f"{retry_mark(topic)} qo{queue_id}%{offset} {n}")
                handle = ReceiptHandle(start, now, req.invisible_ms, names.POP_ORDER_REVIVE_QUEUE, retry_mark(topic),
                                       self.ctx.config.brokerName, queue_id, offset)
                got.append(self._popped(req, topic, queue_id, offset, record, handle, n))
            self.changed = True
            qs.order, qs.next = (batch if got else None), batch.end
            self._commit(key, qs)
            if got:
                break
        out.rest_num += max(0, result.max_offset - result.next_begin_offset)
        heapq.heappush(self._deadlines, (batch.deadline, key, -1, now))
        counts.append(f"{retry_mark(topic)} {queue_id} {min(m.attempts for m in got)}")
        out.messages.extend(got)
        return start, got, counts

    def _popped(self, req: _Pop, topic: str, queue_id: int, offset: int, record: memoryview,
                handle: ReceiptHandle, attempts: int | None) -> PoppedMessage:
        """A retried message goes out under its original topic with its handle in POP_CK (as Apache
        answers unless popResponseReturnActualRetryTopic); any other goes out as stored."""
        if topic == req.topic:
            msg = None
            data = bytes(record)
        else:
            msg, _ = decode_record(record)
            msg.topic = req.topic
            msg.properties[MessageConst.POP_CK] = str(handle)
            data = encode_record(msg)
        if attempts is None:
            attempts = msg.reconsume_times if msg is not None else decode_record(record)[0].reconsume_times
        return PoppedMessage(data, handle, topic, queue_id, offset, attempts)

    # ------------------------------------------------------------------ ack and invisibility

    def _locate(self, group: str, topic: str, handle: ReceiptHandle) -> tuple[QueueKey, QueueState | None]:
        if not topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX):  # remoting clients name the retry topic
            topic = real_topic(topic, group, handle.mark)
        key = (group, topic, handle.queue_id)
        return key, self.queues.get(key)

    def ack(self, group: str, topic: str, handle: ReceiptHandle) -> AckStatus:
        """Consumed: the message is never handed out again (a stale handle changes nothing). ``topic``
        is the one popped, or the retry topic the handle names."""
        key, qs = self._locate(group, topic, handle)
        if qs is None:
            return AckStatus.NOT_FOUND
        offset = handle.queue_offset
        self.changed = True
        if handle.is_order:
            batch = qs.order
            if batch is None or offset not in batch.offsets or not _current(handle, batch) or offset in batch.acked:
                return AckStatus.NOT_FOUND
            batch.acked.add(offset)
            if batch.first_unacked() >= batch.end:
                qs.order = None
                self._commit(key, qs)
                self._wake(key[1])  # the queue is unlocked
            else:
                self._commit(key, qs)
            return AckStatus.OK
        f = qs.inflight.get(offset)
        if f is None or not _current(handle, f):
            return AckStatus.NOT_FOUND
        del qs.inflight[offset]
        self._commit(key, qs)
        return AckStatus.OK

    def change_invisible(self, group: str, topic: str, handle: ReceiptHandle, invisible_ms: int) -> ReceiptHandle | None:
        """Hide the message ``invisible_ms`` from now; the new handle replaces the old one (None: stale)."""
        key, qs = self._locate(group, topic, handle)
        if qs is None:
            return None
        now = self.ctx.now_ms()
        self.changed = True
        if handle.is_order:
            batch = qs.order
            if batch is None or handle.queue_offset not in batch.offsets or not _current(handle, batch):
                return None
            batch.pop_time, batch.invisible_ms = now, invisible_ms
            heapq.heappush(self._deadlines, (batch.deadline, key, -1, now))
            return handle.renewed(now, invisible_ms)
        f = qs.inflight.get(handle.queue_offset)
        if f is None or not _current(handle, f):
            return None
        f.pop_time, f.invisible_ms = now, invisible_ms
        heapq.heappush(self._deadlines, (f.deadline, key, handle.queue_offset, now))
        return handle.renewed(now, invisible_ms)

    # ------------------------------------------------------------------ revive

    def revive(self) -> int:
        """Bring back what passed its invisible time; how many messages were revived."""
        now = self.ctx.now_ms()
        revived = 0
        woken: set[str] = set()
        while self._deadlines and self._deadlines[0][0] <= now:
            deadline, key, offset, _pop_time = heapq.heappop(self._deadlines)
            qs = self.queues.get(key)
            if qs is None:
                continue
            if offset < 0:
                if qs.order is not None and qs.order.deadline == deadline:
                    woken.add(key[1])  # unlocked: the next FIFO pop hands the rest out again
                continue
            f = qs.inflight.get(offset)
            if f is None or f.deadline != deadline:
                continue
            self.changed = True
            if self._revive_one(key, offset):
                del qs.inflight[offset]
                self._commit(key, qs)
                revived += 1
            else:  # the store refused: try again on the next pass
                f.pop_time = now
                f.invisible_ms = self.ctx.config.reviveInterval
                heapq.heappush(self._deadlines, (f.deadline, key, offset, now))
        for topic in woken:
            self._wake(topic)
        return revived

    def _max_reconsume(self, group: str) -> int:
        config = self.ctx.groups.find(group)
        return config.retry_max_times if config is not None else 16

    def _revive_one(self, key: QueueKey, offset: int) -> bool:
        group, topic, queue_id = key
        store = self.ctx.store
        unit = store.get_unit(topic, queue_id, offset)
        record = store.read_record(unit[0], unit[1]) if unit is not None else None
        if record is None:
            log.warning("POP revive of group %s on %s queue %d offset %d: the message is gone", *key, offset)
            return True
        msg, _ = decode_record(record)
        times = msg.reconsume_times + 1
        if times > self._max_reconsume(group):
            return self._to_dlq(group, bytes(record), times)
        target = topic if topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX) else self.retry_topic(group, topic)
        self.ctx.topics.create_if_absent(target, RETRY_QUEUE_NUMS, Perm.READ | Perm.WRITE)
        props = dict(msg.properties)
        props.pop(MessageConst.POP_CK, None)
        props.setdefault(MessageConst.FIRST_POP_TIME, str(self.queues[key].inflight[offset].pop_time))
        return self._append(target, msg, props, times)

    def _to_dlq(self, group: str, record: bytes, times: int) -> bool:
        msg, _ = decode_record(record)
        target = names.dlq_topic(group)
        self.ctx.topics.create_if_absent(target, 1, Perm.READ | Perm.WRITE)
        props = dict(msg.properties)
        props.pop(MessageConst.POP_CK, None)
        log.info("POP message %s of group %s to %s after %d deliveries", msg.uniq_key, group, target, times)
        return self._append(target, msg, props, times)

    def _append(self, topic: str, msg: Any, props: dict[str, str], reconsume_times: int) -> bool:
        result = self.ctx.store.append(topic, 0, msg.body, props, flag=msg.flag, sys_flag=msg.sys_flag,
                                       born_timestamp=msg.born_timestamp, born_host=msg.born_host,
                                       reconsume_times=reconsume_times)
        return result.status is PutMessageStatus.PUT_OK

    # ------------------------------------------------------------------ long polling

    def notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> None:
        """The store dispatched a message: pops waiting on its topic try again."""
        if topic in self._waiting:
            self._wake(topic)

    def _wake(self, topic: str) -> None:
        for req in list(self._waiting.get(topic, ())):
            if req.deferred is None or req.deferred.called:
                continue
            if req.alive is not None and not req.alive():
                self._finish(req, PopResult())
                continue
            result = self._pop_now(req)
            if result.found:
                self._finish(req, result)

    def _finish(self, req: _Pop, result: PopResult) -> None:
        for t in (req.topic, self.retry_topic(req.group, req.topic)):
            waiting = self._waiting.get(t)
            if waiting and req in waiting:
                waiting.remove(req)
                if not waiting:
                    del self._waiting[t]
        if req.timer is not None and req.timer.active():
            req.timer.cancel()
        if req.deferred is not None and not req.deferred.called:
            req.deferred.callback(result)


def _current(handle: ReceiptHandle, held: Inflight | OrderBatch) -> bool:
    """Whether ``handle`` is the latest one handed out for what is held (a renewal replaces it)."""
    return handle.pop_time == held.pop_time and handle.invisible_ms == held.invisible_ms


def _rotated(n: int, rng: Any) -> list[int]:
    start = rng.randrange(n) if n > 0 else 0
    return [(start + i) % n for i in range(n)]
