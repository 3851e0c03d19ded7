"""Push consumer (Java ``DefaultMQPushConsumerImpl``), Twisted-native.

Start: subscriptions (plus ``%RETRY%<group>`` / ``*`` in CLUSTERING), routes, HEART_BEAT to every broker
(the broker filters pulls by the subscription it got there), then an immediate rebalance; after that
rebalances run every ``rebalance_interval`` and whenever a broker sends NOTIFY_CONSUMER_IDS_CHANGED.

Each owned queue runs a long-poll pull loop: PULL_MESSAGE with the SUSPEND bit (the broker holds it up
to ``broker_suspend_max_time``) and the COMMIT bit carrying the current offset; 0/19/20 pull again at
``nextBeginOffset`` at once, 21 (offset moved) stores ``nextBeginOffset``, drops the queue and lets the
next rebalance restart it, any other failure waits ``pull_time_delay_when_exception``.

Listeners get a list of :class:`MessageExt` and a context; they return a status (or a Deferred of
one). Returning None counts as success; raising counts as failure.
- Concurrent: RECONSUME_LATER sends each message back (CONSUMER_SEND_MSG_BACK, delay level from the
  context; 0 lets the broker choose 3 + reconsume times); if that fails, a copy is sent to
  ``%RETRY%<group>`` directly. Retried messages arrive with their original topic restored.
- Orderly: one consumer at a time per queue, in offset order, only while the broker lock is held;
  SUSPEND_CURRENT_QUEUE_A_MOMENT re-delivers the same messages after ``suspend_current_queue_time``.
"""

from __future__ import annotations

import enum
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from twisted.internet import defer, task

from ferrymq.wire.bodies import (
    ConsumeMessageDirectlyResult,
    ConsumerData,
    ConsumerRunningInfo,
    MessageQueue,
    ProcessQueueInfo,
    SubscriptionData,
    TopicRouteData,
)
from ferrymq.wire.codes import CURRENT_VERSION_DESC, PullSysFlag
from ferrymq.wire.headers import PullMessageRequestHeader
from ferrymq.wire.message import MessageConst, MessageExt
from ferrymq.wire.topics import CLIENT_INNER_PRODUCER_GROUP, retry_topic

from ..client_config import ClientConfig, settle_config
from ..client_instance import ClientInstance, MQClientError
from ..errors import MQResponseError
from ..message import Message, PullStatus
from ..route import subscribe_queues
from .offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteOffsetStore
from .process_queue import ProcessQueue
from .rebalance import ConsumeFromWhere, MessageModel, Rebalancer
from .subscription import SUB_ALL, TAG, build_subscription, matches

log = logging.getLogger("ferrymq.sdk.push")

#: client-reported version in running info (Java MQVersion name of the protocol level we speak)
CLIENT_VERSION = CURRENT_VERSION_DESC


class ConsumeConcurrentlyStatus(enum.Enum):
    CONSUME_SUCCESS = "CONSUME_SUCCESS"
    RECONSUME_LATER = "RECONSUME_LATER"


class ConsumeOrderlyStatus(enum.Enum):
    SUCCESS = "SUCCESS"
    SUSPEND_CURRENT_QUEUE_A_MOMENT = "SUSPEND_CURRENT_QUEUE_A_MOMENT"


@dataclass
class ConsumeConcurrentlyContext:
    message_queue: MessageQueue
    #: 0: the broker picks (3 + reconsume times); -1: straight to the DLQ; n: that delay level
    delay_level_when_next_consume: int = 0


@dataclass
class ConsumeOrderlyContext:
    message_queue: MessageQueue
    #: seconds to wait before re-delivering after SUSPEND_CURRENT_QUEUE_A_MOMENT (None: the consumer's)
    suspend_current_queue_time: float | None = None


Listener = Callable[[list[MessageExt], Any], Any]


def _sleep(reactor, seconds: float) -> defer.Deferred:
    return task.deferLater(reactor, max(seconds, 0), lambda: None)


def restore_retry_topic(msg: MessageExt, group: str) -> None:
    """A message pulled from ``%RETRY%<group>`` shows its original topic, as the listener expects."""
    original = msg.properties.get(MessageConst.RETRY_TOPIC)
    if original and msg.topic == retry_topic(group):
        msg.topic = original


class PushConsumer:
    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        message_model: MessageModel | str = MessageModel.CLUSTERING,
        consume_from_where: ConsumeFromWhere | str = ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET,
        consume_timestamp: str | None = None,
        pull_batch_size: int = 32,
        pull_batch_size_in_bytes: int = 256 * 1024,
        consume_message_batch_max_size: int = 1,
        consume_concurrency: int = 20,
        max_reconsume_times: int = -1,
        pull_threshold_for_queue: int = 1000,
        broker_suspend_max_time: float = 15.0,
        consumer_timeout_when_suspend: float = 30.0,
        pull_time_delay_when_exception: float = 3.0,
        suspend_current_queue_time: float = 1.0,
        lock_interval: float = 20.0,
        await_termination_when_shutdown: float = 5.0,
        local_offset_dir: Path | str | None = None,
        instance: ClientInstance | None = None,
    ):
        config = settle_config(group, namesrv_addr, config)
        self.group = group
        self.config = config
        self.message_model = MessageModel(message_model)
        self.consume_from_where = ConsumeFromWhere(consume_from_where)
        #: yyyyMMddHHmmss, default half an hour ago (Java's default)
        self.consume_timestamp = consume_timestamp
        self.pull_batch_size = pull_batch_size
        self.pull_batch_size_in_bytes = pull_batch_size_in_bytes
        self.consume_message_batch_max_size = consume_message_batch_max_size
        self.max_reconsume_times = max_reconsume_times
        self.pull_threshold_for_queue = pull_threshold_for_queue
        self.broker_suspend_max_time = broker_suspend_max_time
        self.consumer_timeout_when_suspend = consumer_timeout_when_suspend
        self.pull_time_delay_when_exception = pull_time_delay_when_exception
        self.suspend_current_queue_time = suspend_current_queue_time
        self.lock_interval = lock_interval
        #: how long shutdown waits for listeners already running, so their offsets get committed
        #: (Java's awaitTerminationMillisWhenShutdown is 0: results finishing later are redelivered)
        self.await_termination_when_shutdown = await_termination_when_shutdown
        self._inflight: set[defer.Deferred] = set()
        self.local_offset_dir = local_offset_dir
        self._own_instance = instance is None
        self.instance = instance or ClientInstance(config)
        self.reactor = self.instance.reactor
        self.subscriptions: dict[str, SubscriptionData] = {}
        self.listener: Listener | None = None
        self.orderly = False
        self.offset_store: RemoteOffsetStore | LocalFileOffsetStore | None = None
        self.rebalancer = Rebalancer(self, self._start_queue)
        self._consume_slots = defer.DeferredSemaphore(consume_concurrency)
        self._inner_producer = None
        self._lock_loop: task.LoopingCall | None = None
        self._start_time = 0
        self.running = False
        self.consumed_ok = 0
        self.consumed_failed = 0

    # ------------------------------------------------------------------ configuration

    @property
    def effective_max_reconsume_times(self) -> int:
        return 16 if self.max_reconsume_times == -1 else self.max_reconsume_times

    def consume_timestamp_ms(self, topic: str | None = None) -> int:
        """Where CONSUME_FROM_TIMESTAMP starts a queue of ``topic`` that has no committed offset (the same
        for every topic here; a subclass may start each topic at its own time)."""
        if self.consume_timestamp is None:
            return int((time.time() - 30 * 60) * 1000)
        return int(time.mktime(time.strptime(self.consume_timestamp, "%Y%m%d%H%M%S")) * 1000)

    def subscribe(self, topic: str, expression: str = SUB_ALL, expression_type: str = TAG) -> None:
        """Subscribe ``topic`` with a TAG expression (``*``, ``TagA || TagB``) or an SQL92 one."""
        self.subscriptions[topic] = build_subscription(topic, expression, expression_type)
        if self.running:
            self.reactor.callLater(0, self._resubscribed)

    def unsubscribe(self, topic: str) -> None:
        self.subscriptions.pop(topic, None)

    @defer.inlineCallbacks
    def _resubscribed(self):
        yield self.instance.update_all_routes()
        yield self.instance.send_heartbeat_to_all()
        yield self.do_rebalance()

    def register_listener(self, listener: Listener, *, orderly: bool = False) -> None:
        """``listener(msgs, context)`` returns a ConsumeConcurrentlyStatus (or ConsumeOrderlyStatus when
        ``orderly``), a Deferred of one, or None for success."""
        self.listener = listener
        self.orderly = orderly

    # ------------------------------------------------------------------ lifecycle

    @defer.inlineCallbacks
    def start(self):
        if self.running:
            return
        if self.listener is None:
            raise MQClientError("register a message listener before starting the consumer")
        if not self.subscriptions:
            raise MQClientError("subscribe to at least one topic before starting the consumer")
        if self.message_model == MessageModel.CLUSTERING:
            rt = retry_topic(self.group)
            self.subscriptions.setdefault(rt, build_subscription(rt, SUB_ALL))
            self.offset_store = RemoteOffsetStore(self.group, self.instance.api, self._queue_master)
        else:
            self.offset_store = LocalFileOffsetStore(self.group, self.instance.client_id, self.local_offset_dir)
        self.offset_store.load()
        self.instance.register_consumer(self.group, self)
        self.instance.start()
        self.running = True
        self._start_time = int(time.time() * 1000)
        yield self.instance.update_all_routes()
        try:
            yield self._check_filters_in_brokers()
        except Exception:
            yield self.shutdown()
            raise
        yield self.instance.send_heartbeat_to_all()
        if self.orderly and self.message_model == MessageModel.CLUSTERING:
            self._lock_loop = task.LoopingCall(self.rebalancer.lock_all)
            self._lock_loop.clock = self.reactor
            self._lock_loop.start(self.lock_interval, now=False)
        yield self.do_rebalance()

    @defer.inlineCallbacks
    def _check_filters_in_brokers(self):
        """As Java does at start: every broker of a topic subscribed with SQL92 must accept the
        expression, else start() fails with the broker's reason instead of pulling nothing forever."""
        for topic, sub in self.subscriptions.items():
            if (sub.expression_type or TAG) == TAG:
                continue
            route = self.instance.route_table.get(topic)
            for bd in route.broker_datas if route else []:
                for addr in bd.broker_addrs.values():
                    try:
                        yield self.instance.api.check_client_config(addr, self.instance.client_id, self.group, sub)
                    except MQResponseError as exc:
                        raise MQClientError(
                            f"broker {bd.broker_name} ({addr}) refuses the {sub.expression_type} subscription "
                            f"{sub.sub_string!r} of {topic}: {exc.remark} (code {exc.code}); SQL92 needs "
                            f"enablePropertyFilter=true on the broker and a valid expression") from exc

    @defer.inlineCallbacks
    def shutdown(self):
        """Stop pulling, commit the offsets reached (waiting for the broker), unlock, unregister."""
        if not self.running:
            return
        self.running = False
        if self._lock_loop is not None and self._lock_loop.running:
            self._lock_loop.stop()
        yield self._await_inflight()
        owned = list(self.rebalancer.pq_table)
        for pq in self.rebalancer.pq_table.values():
            pq.dropped = True
        try:
            yield self.offset_store.persist_all(owned, oneway=False)
        except Exception as exc:  # noqa: BLE001
            log.warning("%s: final offset commit failed: %s", self.group, exc)
        if self.orderly and self.message_model == MessageModel.CLUSTERING:
            yield self.rebalancer.unlock(owned)
        self.rebalancer.pq_table.clear()
        yield self.instance.unregister(consumer_group=self.group)
        if self._own_instance:
            yield self.instance.shutdown()

    def _track(self, d: defer.Deferred) -> defer.Deferred:
        self._inflight.add(d)

        def done(result):
            self._inflight.discard(d)
            return result

        return d.addBoth(done)

    def _await_inflight(self) -> defer.Deferred:
        """Fires when the listeners running now have finished, or after await_termination_when_shutdown."""
        done = defer.Deferred()
        if not self._inflight:
            done.callback(None)
            return done

        def finish(_=None):
            if not done.called:
                done.callback(None)

        defer.DeferredList(list(self._inflight), consumeErrors=True).addBoth(finish)
        timer = self.reactor.callLater(self.await_termination_when_shutdown, finish)
        return done.addBoth(lambda r: (timer.active() and timer.cancel(), r)[1])

    # ------------------------------------------------------------------ hooks from the instance

    def subscribed_topics(self) -> list[str]:
        return list(self.subscriptions)

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.subscriptions:
            self.rebalancer.topic_queues[topic] = subscribe_queues(route, topic)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type="CONSUME_PASSIVELY",
            message_model=self.message_model.value,
            consume_from_where=self.consume_from_where.value,
            subscription_data_set=list(self.subscriptions.values()),
            unit_mode=False,
        )

    def do_rebalance(self) -> defer.Deferred:
        if not self.running:
            return defer.succeed(None)
        return self.rebalancer.do_rebalance()

    def persist_offsets(self) -> defer.Deferred:
        if not self.running:
            return defer.succeed(None)
        return self.offset_store.persist_all(list(self.rebalancer.pq_table))

    def _queue_master(self, mq: MessageQueue) -> defer.Deferred:
        return self.instance.require_broker_addr(mq.broker_name, mq.topic)

    # ------------------------------------------------------------------ pulling

    def _start_queue(self, mq: MessageQueue, pq: ProcessQueue, offset: int) -> None:
        pq.next_offset = offset
        self._pull_loop(mq, pq).addErrback(
            lambda f: log.error("%s: pull loop of %s stopped: %s", self.group, mq, f.getTraceback())
        )

    def _owned(self, mq: MessageQueue, pq: ProcessQueue) -> bool:
        return self.running and not pq.dropped and self.rebalancer.pq_table.get(mq) is pq

    @defer.inlineCallbacks
    def _pull_loop(self, mq: MessageQueue, pq: ProcessQueue):
        clustering = self.message_model == MessageModel.CLUSTERING
        while self._owned(mq, pq):
            if pq.msg_count >= self.pull_threshold_for_queue:
                yield _sleep(self.reactor, 0.05)
                continue
            if self.orderly and clustering and (not pq.locked or pq.lock_expired()):
                yield _sleep(self.reactor, min(3.0, self.pull_time_delay_when_exception))
                continue
            sub = self.subscriptions.get(mq.topic)
            if sub is None:
                return
            commit_offset = 0
            if clustering:
                commit_offset = yield self.offset_store.read_offset(mq, ReadOffsetType.READ_FROM_MEMORY)
            sys_flag = PullSysFlag.SUSPEND | (PullSysFlag.COMMIT_OFFSET if commit_offset > 0 else 0)
            header = PullMessageRequestHeader(
                consumer_group=self.group,
                topic=mq.topic,
                queue_id=mq.queue_id,
                queue_offset=pq.next_offset,
                max_msg_nums=self.pull_batch_size,
                max_msg_bytes=self.pull_batch_size_in_bytes,
                sys_flag=int(sys_flag),
                commit_offset=max(commit_offset, 0),
                suspend_timeout_millis=int(self.broker_suspend_max_time * 1000),
                sub_version=sub.sub_version,
                expression_type=sub.expression_type or TAG,
                broker_name=mq.broker_name,
            )
            try:
                addr = self.instance.broker_addrs.get(mq.broker_name, {}).get(pq.suggested_broker_id)
                if addr is None:
                    addr = yield self.instance.require_broker_addr(mq.broker_name, mq.topic, only_master=False)
                pq.last_pull_time = time.monotonic()
                pq.last_pull_ms = int(time.time() * 1000)
                result = yield self.instance.api.pull_message(addr, header, self.consumer_timeout_when_suspend)
            except Exception as exc:  # noqa: BLE001 - wait and pull again, as Java does
                if self._owned(mq, pq):
                    log.info("%s: pull of %s failed: %s", self.group, mq, exc)
                    yield _sleep(self.reactor, self.pull_time_delay_when_exception)
                continue
            if not self._owned(mq, pq):
                return
            pq.suggested_broker_id = result.suggest_which_broker_id  # e.g. a slave while the master is busy
            if result.status == PullStatus.FOUND:
                pq.next_offset = result.next_begin_offset
                # filtered by the subscription of now: one widened while the broker held this pull answers
                # with what the new one selects, and the old one would drop it for good
                sub = self.subscriptions.get(mq.topic, sub)
                msgs = [m for m in result.messages if matches(sub, m)]
                for m in msgs:
                    restore_retry_topic(m, self.group)
                if msgs:
                    pq.put(msgs)
                    self._dispatch(mq, pq, msgs)
                elif pq.msg_count == 0:  # everything was filtered out: move the offset past it
                    self.offset_store.update_offset(mq, result.next_begin_offset, True)
            elif result.status in (PullStatus.NO_NEW_MSG, PullStatus.NO_MATCHED_MSG):
                pq.next_offset = result.next_begin_offset
                if pq.msg_count == 0:
                    self.offset_store.update_offset(mq, result.next_begin_offset, True)
            else:  # OFFSET_ILLEGAL: the queue moved on (or was reset); start over from the broker's offset
                log.warning("%s: offset %d of %s is illegal; moving to %d", self.group, pq.next_offset, mq,
                            result.next_begin_offset)
                pq.dropped = True
                self.offset_store.update_offset(mq, result.next_begin_offset, False)
                try:
                    yield self.offset_store.persist(mq)
                except Exception as exc:  # noqa: BLE001
                    log.warning("%s: persisting moved offset of %s failed: %s", self.group, mq, exc)
                if self.rebalancer.pq_table.get(mq) is pq:
                    del self.rebalancer.pq_table[mq]
                self.reactor.callLater(0, self.do_rebalance)
                return

    # ------------------------------------------------------------------ consuming

    def _dispatch(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if self.orderly:
            if not pq.consuming_orderly:
                pq.consuming_orderly = True
                self._track(self._consume_orderly(mq, pq)).addErrback(
                    lambda f: log.error("%s: orderly consumption of %s failed: %s", self.group, mq, f.getTraceback())
                )
            return
        n = max(1, self.consume_message_batch_max_size)
        for i in range(0, len(msgs), n):
            chunk = msgs[i : i + n]
            self._track(self._consume_slots.run(self._consume_concurrently, mq, pq, chunk)).addErrback(
                lambda f: log.error("%s: consumption on %s failed: %s", self.group, mq, f.getTraceback())
            )

    def _call_listener(self, msgs: list[MessageExt], context: Any) -> defer.Deferred:
        start = str(int(time.time() * 1000))
        for m in msgs:
            m.properties[MessageConst.CONSUME_START_TIMESTAMP] = start
        return defer.maybeDeferred(self.listener, msgs, context)

    @defer.inlineCallbacks
    def _consume_concurrently(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]):
        if pq.dropped or not self.running:  # not started before shutdown: left for redelivery
            return
        ctx = ConsumeConcurrentlyContext(mq)
        try:
            status = yield self._call_listener(msgs, ctx)
        except Exception:  # noqa: BLE001 - a raising listener asks for redelivery
            log.exception("%s: listener raised on %d message(s) of %s", self.group, len(msgs), mq)
            status = ConsumeConcurrentlyStatus.RECONSUME_LATER
        if status is None:
            status = ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        status = ConsumeConcurrentlyStatus(status)
        if pq.dropped:
            return
        redo: list[MessageExt] = []
        if status == ConsumeConcurrentlyStatus.CONSUME_SUCCESS:
            self.consumed_ok += len(msgs)
        else:
            self.consumed_failed += len(msgs)
            if self.message_model == MessageModel.BROADCASTING:
                for m in msgs:
                    log.warning("%s: BROADCASTING drops failed message %s", self.group, m.msg_id)
            else:
                for m in msgs:
                    sent = yield self.send_message_back(m, ctx.delay_level_when_next_consume, mq)
                    if not sent:
                        m.reconsume_times += 1
                        redo.append(m)
        done = [m for m in msgs if m not in redo]
        offset = pq.remove(done)
        if offset >= 0 and not pq.dropped:
            self.offset_store.update_offset(mq, offset, True)
        if redo:
            self.reactor.callLater(5.0, self._redo, mq, pq, redo)

    def _redo(self, mq: MessageQueue, pq: ProcessQueue, msgs: list[MessageExt]) -> None:
        if not pq.dropped and self.running:
            self._track(self._consume_slots.run(self._consume_concurrently, mq, pq, msgs))

    @defer.inlineCallbacks
    def send_message_back(self, msg: MessageExt, delay_level: int, mq: MessageQueue | None = None):
        """CONSUMER_SEND_MSG_BACK to the broker that stored ``msg``; if that fails, re-send a copy to
        ``%RETRY%<group>``. Fires with True when one of them worked."""
        broker_name = mq.broker_name if mq is not None else None
        try:
            addr = None
            if broker_name is not None:
                addr = self.instance.find_broker_addr(broker_name)
            if addr is None:
                addr = "%s:%d" % msg.store_host
            yield self.instance.api.consumer_send_msg_back(
                addr, self.group, msg.commitlog_offset, delay_level, msg.msg_id, msg.topic,
                self.effective_max_reconsume_times, broker_name,
            )
            return True
        except Exception as exc:  # noqa: BLE001 - fall back to sending the copy ourselves
            log.info("%s: send-back of %s failed (%s); re-sending it to the retry topic", self.group, msg.msg_id, exc)
        try:
            yield self._inner().send(self._retry_copy(msg))
            return True
        except Exception as exc:  # noqa: BLE001
            log.warning("%s: re-sending %s to the retry topic failed: %s", self.group, msg.msg_id, exc)
            return False

    def _retry_copy(self, msg: MessageExt) -> Message:
        props = dict(msg.properties)
        props.setdefault(MessageConst.ORIGIN_MESSAGE_ID, msg.msg_id)
        props[MessageConst.RETRY_TOPIC] = msg.topic  # the original topic: retried messages are restored
        props.pop(MessageConst.TRANSACTION_PREPARED, None)
        props[MessageConst.RECONSUME_TIME] = str(msg.reconsume_times + 1)
        props[MessageConst.MAX_RECONSUME_TIMES] = str(self.effective_max_reconsume_times)
        for transient in (MessageConst.MIN_OFFSET, MessageConst.MAX_OFFSET, MessageConst.CONSUME_START_TIMESTAMP):
            props.pop(transient, None)
        props[MessageConst.DELAY_TIME_LEVEL] = str(3 + msg.reconsume_times)
        return Message(retry_topic(self.group), msg.body, flag=msg.flag, properties=props)

    def _inner(self):
        """The client's internal producer (group CLIENT_INNER_PRODUCER), for retry copies."""
        if self._inner_producer is None:
            from ..producer import Producer

            self._inner_producer = Producer(CLIENT_INNER_PRODUCER_GROUP, config=self.config, instance=self.instance)
            self._inner_producer.started = True  # shares this consumer's instance; nothing to register
        return self._inner_producer

    @defer.inlineCallbacks
    def _consume_orderly(self, mq: MessageQueue, pq: ProcessQueue):
        clustering = self.message_model == MessageModel.CLUSTERING
        try:
            while self._owned(mq, pq):
                if clustering and (not pq.locked or pq.lock_expired()):
                    locked = yield self.rebalancer.lock(mq)
                    if not locked:
                        yield _sleep(self.reactor, 0.1)
                        continue
                msgs = pq.take(max(1, self.consume_message_batch_max_size))
                if not msgs:
                    return
                ctx = ConsumeOrderlyContext(mq)
                try:
                    status = yield self._call_listener(msgs, ctx)
                except Exception:  # noqa: BLE001
                    log.exception("%s: orderly listener raised on %s", self.group, mq)
                    status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT
                status = ConsumeOrderlyStatus(status or ConsumeOrderlyStatus.SUCCESS)
                if pq.dropped:
                    return
                if status == ConsumeOrderlyStatus.SUCCESS:
                    self.consumed_ok += len(msgs)
                    offset = pq.commit()
                    if offset >= 0:
                        self.offset_store.update_offset(mq, offset, False)
                    continue
                self.consumed_failed += len(msgs)
                suspend = False
                for m in msgs:
                    if m.reconsume_times >= self.effective_max_reconsume_times:
                        # past the limit: a retry copy whose reconsume count exceeds the maximum, which
                        # the broker parks in %DLQ%<group> (as Java's orderly service does)
                        try:
                            yield self._inner().send(self._retry_copy(m))
                            continue
                        except Exception as exc:  # noqa: BLE001
                            log.warning("%s: moving %s to the DLQ failed: %s", self.group, m.msg_id, exc)
                    m.reconsume_times += 1
                    suspend = True
                if not suspend:
                    offset = pq.commit()
                    if offset >= 0:
                        self.offset_store.update_offset(mq, offset, False)
                    continue
                pq.make_available(msgs)
                wait = ctx.suspend_current_queue_time
                yield _sleep(self.reactor, self.suspend_current_queue_time if wait is None else wait)
        finally:
            pq.consuming_orderly = False
        if pq.msgs and self._owned(mq, pq):
            self._dispatch(mq, pq, [])

    # ------------------------------------------------------------------ requests from brokers

    def running_info(self) -> ConsumerRunningInfo:
        props = {
            "PROP_NAMESERVER_ADDR": self.config.namesrv_addr,
            "PROP_THREADPOOL_CORE_SIZE": str(self._consume_slots.limit),
            "PROP_CONSUMEORDERLY": "true" if self.orderly else "false",
            "PROP_CONSUME_TYPE": "CONSUME_PASSIVELY",
            "PROP_CLIENT_VERSION": CLIENT_VERSION,
            "PROP_CONSUMER_START_TIMESTAMP": str(self._start_time),
            "consumerGroup": self.group,
            "messageModel": self.message_model.value,
            "consumeFromWhere": self.consume_from_where.value,
            "pullBatchSize": str(self.pull_batch_size),
            "consumeMessageBatchMaxSize": str(self.consume_message_batch_max_size),
            "maxReconsumeTimes": str(self.max_reconsume_times),
            "language": "PYTHON",
            "pid": str(os.getpid()),
        }
        mq_table = {}
        for mq, pq in self.rebalancer.pq_table.items():
            offsets = sorted(pq.msgs)
            mq_table[mq] = ProcessQueueInfo(
                commit_offset=self.offset_store.table.get(mq, -1),
                cached_msg_min_offset=offsets[0] if offsets else 0,
                cached_msg_max_offset=offsets[-1] if offsets else 0,
                cached_msg_count=len(pq.msgs),
                locked=pq.locked,
                droped=pq.dropped,
                last_pull_timestamp=pq.last_pull_ms,
                last_consume_timestamp=pq.last_consume_ms,
            )
        return ConsumerRunningInfo(properties=props, subscription_set=list(self.subscriptions.values()),
                                   mq_table=mq_table)

    def consumer_status(self, topic: str) -> dict[MessageQueue, int]:
        return self.offset_store.clone_table(topic) if self.offset_store else {}

    @defer.inlineCallbacks
    def reset_offset(self, topic: str, offsets: dict[MessageQueue, int]):
        """RESET_CONSUMER_CLIENT_OFFSET: drop the queues, store the new offsets, start again from them."""
        for mq, off in offsets.items():
            if mq.topic != topic:
                continue
            pq = self.rebalancer.pq_table.pop(mq, None)
            if pq is not None:
                pq.dropped = True
            self.offset_store.update_offset(mq, off, False)
            try:
                yield self.offset_store.persist(mq)
            except Exception as exc:  # noqa: BLE001
                log.warning("%s: persisting reset offset of %s failed: %s", self.group, mq, exc)
        yield self.do_rebalance()

    @defer.inlineCallbacks
    def consume_directly(self, msg: MessageExt, broker_name: str | None):
        """CONSUME_MESSAGE_DIRECTLY (mqadmin consumeMessage): run the listener on one message."""
        mq = MessageQueue(msg.topic, broker_name, msg.queue_id)
        ctx = ConsumeOrderlyContext(mq) if self.orderly else ConsumeConcurrentlyContext(mq)
        started = time.monotonic()
        try:
            status = yield self._call_listener([msg], ctx)
            ok = status in (None, ConsumeConcurrentlyStatus.CONSUME_SUCCESS, ConsumeOrderlyStatus.SUCCESS,
                            "CONSUME_SUCCESS", "SUCCESS")
            result, remark = ("CR_SUCCESS" if ok else "CR_LATER"), None
        except Exception as exc:  # noqa: BLE001
            result, remark = "CR_THROW_EXCEPTION", repr(exc)
        return ConsumeMessageDirectlyResult(
            order=self.orderly, auto_commit=True, consume_result=result, remark=remark,
            spent_time_mills=int((time.monotonic() - started) * 1000),
        )
