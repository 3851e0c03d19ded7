"""The MQTT gateway's RocketMQ side, on the Deferred SDK in the reactor that serves the devices.

One producer stores what devices publish; in a broker process the messages for that broker are
stored through its send checks and store path without a request
(:mod:`ferrymq.gateways.store_send`). Deliveries to devices come from two kinds of consumer:

- **one BROADCASTING consumer for the whole gateway** serves every non-shared subscription: it pulls
  each subscribed RocketMQ topic once (tag expression: the union of the exact filters' tags, or ``*``,
  :func:`~.mapping.tag_expression`) and the gateway hands each message to every session whose filters
  match (found through :class:`~.fanout.FanOutIndex`, by RocketMQ topic), as an MQTT broker fans out. A
  consumer per client would pull every message once per client and keep a RocketMQ client registration
  per device, which does not scale to fleets of idle devices;
- **one CLUSTERING consumer per share name** (``$share/{name}/...``, group ``{name}``) serves the shared
  subscriptions: RocketMQ splits the topic's queues between the gateways (and any RocketMQ consumer of
  that group), and this gateway gives each message to one of its members, round robin. The message's
  consume completes when that member has acknowledged it; a member gone first hands it back
  (RECONSUME_LATER, delivered again through the group's retry topic).

Each topic starts, for a consumer, at the messages stored since it was first subscribed here (a consumer
that overrides the SDK's consume timestamp per topic), so a device gets what was published after its
SUBACK even when the topic's queues are found later (a topic created by that first publish).

In a broker process (:meth:`Gateway.deliver_in_process`) the queues of that broker are read from its
store directly (:class:`~.store_fanout.StoreFanOut`), with the same offsets and the same "since
subscribed" start; the broadcasting consumer pulls only the queues on the cluster's other brokers, if
any. The shared subscriptions stay on their clustering consumers, whose groups other RocketMQ consumers
may share.

With a state directory (``{storePathRootDir}/mqtt`` in a broker, :mod:`.persistence`), persistent sessions, retained
messages and the broadcasting consumer's offsets outlive a restart: the sessions are read back before the
consumers start, and each topic they subscribe resumes from its offsets (or from when it was first
subscribed), so what was stored while a session's messages were being handed out is not skipped.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable
from itertools import count
from typing import Any

from twisted.internet import defer

from ferrymq.remoting import Processor
from ferrymq.remoting.local import LocalPeer
from ferrymq.sdk.client_config import ClientConfig
from ferrymq.sdk.client_instance import ClientInstance
from ferrymq.sdk.consumer.offset_store import LocalFileOffsetStore
from ferrymq.sdk.consumer.push import ConsumeConcurrentlyStatus, PushConsumer
from ferrymq.sdk.consumer.rebalance import ConsumeFromWhere, MessageModel
from ferrymq.sdk.message import Message
from ferrymq.sdk.producer import Producer, select_by_hash
from ferrymq.wire.message import DEFAULT_MAX_MESSAGE_SIZE, MessageExt

from ..access import Access
from ..store_send import StoreSend
from . import mapping, topics
from .persistence import StateFiles
from .retained import RetainedMessages
from .fanout import FanOutIndex
from .in_order import InOrder
from .session import Ack, Release, Session, Sessions, deliver
from .store_fanout import StoreFanOut

log = logging.getLogger("ferrymq.gateway.mqtt")

#: the producer group of what devices publish; it shows in the brokers' producer lists
PRODUCER_GROUP = "FERRYMQ_MQTT_PRODUCER"
#: the group of the gateway's broadcasting consumer (BROADCASTING: every gateway gets every message)
FAN_OUT_GROUP = "FERRYMQ_MQTT_FAN_OUT"
#: messages handed to the fan-out at once: what one pull brings (it never fails a message, so a batch
#: costs one consume instead of one per message)
FAN_OUT_BATCH = 32


class _SinceSubscribed(PushConsumer):
    """A consumer whose queues without a committed offset start where their topic was subscribed, and
    that passes over what was stored before (a queue resumed from an offset kept from an earlier
    subscription of the topic)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, consume_from_where=ConsumeFromWhere.CONSUME_FROM_TIMESTAMP, **kwargs)
        self.since: dict[str, int] = {}

    def consume_timestamp_ms(self, topic: str | None = None) -> int:
        return self.since.get(topic, int(time.time() * 1000))

    def is_new(self, msg: MessageExt) -> bool:
        since = self.since.get(msg.topic)
        return since is not None and msg.store_timestamp >= since

    def knows_queues(self, topic: str) -> bool:
        return bool(self.rebalancer.topic_queues.get(topic))


class _Elsewhere(_SinceSubscribed):
    """A broadcasting consumer of the queues on brokers other than ``local_broker``, whose queues the
    gateway reads from the store (:class:`~.store_fanout.StoreFanOut`)."""

    def __init__(self, *args, local_broker: str, **kwargs):
        super().__init__(*args, **kwargs)
        self.local_broker = local_broker

    def on_route_changed(self, topic: str, route) -> None:
        super().on_route_changed(topic, route)
        queues = self.rebalancer.topic_queues.get(topic)
        if queues is not None:
            self.rebalancer.topic_queues[topic] = {mq for mq in queues if mq.broker_name != self.local_broker}

    def knows_queues(self, topic: str) -> bool:
        """Whether the topic's route is known: it may have no queue elsewhere."""
        return topic in self.rebalancer.topic_queues


class _Consumer:
    """One RocketMQ consumer of the gateway, started at its first subscription; ``expressions`` gives the
    tag expression each of its topics needs now (a topic it returns nothing for is unsubscribed)."""

    def __init__(self, consumer: _SinceSubscribed, expressions: Callable[[], dict[str, str]]):
        self.consumer = consumer
        self.expressions = expressions
        self._started: defer.Deferred | None = None

    def update(self) -> None:
        wanted = self.expressions()
        consumer = self.consumer
        removed = False
        for topic in [t for t in consumer.subscriptions if not t.startswith("%RETRY%") and t not in wanted]:
            consumer.unsubscribe(topic)
            consumer.since.pop(topic, None)
            removed = True
        for topic, expression in wanted.items():
            current = consumer.subscriptions.get(topic)
            if current is None:
                consumer.since.setdefault(topic, int(time.time() * 1000))
            if current is None or current.sub_string != expression:
                consumer.subscribe(topic, expression)  # announced (heartbeat, rebalance) by the SDK when running
        if self._started is None:
            if wanted:
                self._started = consumer.start()
                self._started.addErrback(self._failed)
        elif removed and consumer.running:
            consumer.do_rebalance()  # drop the queues of topics no session subscribes any more

    def _failed(self, failure) -> None:
        log.error("MQTT gateway consumer %s did not start: %s", self.consumer.group, failure.getErrorMessage())
        self._started = None

    @property
    def since(self) -> dict[str, int]:
        return self.consumer.since

    def is_new(self, msg: MessageExt) -> bool:
        return self.consumer.is_new(msg)

    def nudge(self, topic: str) -> None:
        """A message was just stored in ``topic``: if its queues are not known yet, find them now rather
        than at the next periodic rebalance."""
        consumer = self.consumer
        if consumer.running and topic in consumer.subscriptions and not consumer.knows_queues(topic):
            # the route names the broker, which learns the subscription from a heartbeat before any pull
            d = consumer.instance.update_route(topic)
            d.addCallback(lambda _: consumer.instance.send_heartbeat_to_all())
            d.addCallback(lambda _: consumer.do_rebalance())
            d.addErrback(lambda f: log.info("MQTT gateway: queues of %s: %s", topic, f.getErrorMessage()))

    def stop(self) -> defer.Deferred:
        return self.consumer.shutdown() if self.consumer.running else defer.succeed(None)


class Gateway:
    """The sessions of every device connected here, and the RocketMQ clients serving them."""

    def __init__(self, namesrv_addr: str, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 client_config: dict[str, Any] | None = None, state_dir: str | None = None,
                 sync_state: bool = False):
        """``state_dir``: where sessions, retained messages and offsets persist (``None``: in memory
        only); ``sync_state``: fsync them (the broker's SYNC_FLUSH)."""
        self.namesrv_addr = namesrv_addr
        self.max_message_size = max_message_size
        self._config_kwargs = dict(client_config or {})
        # the local offset files are found by client id: a stable one resumes them after a restart
        instance = (f"ferrymq-mqtt-{hashlib.sha256(os.path.abspath(state_dir).encode()).hexdigest()[:8]}"
                    if state_dir else f"ferrymq-mqtt-{os.getpid()}")
        self._config_kwargs.setdefault("instance_name", instance)
        self.sessions: Sessions = {}
        self.retained = RetainedMessages()
        self.state = StateFiles(state_dir, sync=sync_state) if state_dir else None
        self._restored = False
        #: how to run a session's actions on the connection it is attached to (set by the listener)
        self.run_actions: Callable[[Session, list], None] = lambda session, actions: None
        #: called when a batch of deliveries was handed to :attr:`run_actions` (the listener writes them then)
        self.deliveries_done: Callable[[], None] = lambda: None
        self._instance: ClientInstance | None = None
        self.producer: Producer | None = None
        self._offset_dir: str | None = None
        self._fan_out: _Consumer | StoreFanOut | None = None
        #: beside a store fan-out, the broadcasting consumer of the queues on the cluster's other brokers
        self._elsewhere: _Consumer | None = None
        self._index = FanOutIndex()
        self._shares: dict[str, _Consumer] = {}
        self._turn = count()
        #: the broker of this process, if any: (its address, its request table, the sends' BORNHOST)
        self._local_broker: tuple[str, Processor, str] | None = None
        #: the users and ACLs of the broker of this process when it checks them (docs/acl.md); None: devices
        #: connect and publish unchecked
        self.access: Access | None = None
        #: the store of this process's broker, if the fan-out reads it: (its store port, its name, its queues)
        self._local_store: tuple[Any, str, Callable[[str], Iterable[int]]] | None = None
        #: the send processor of this process's broker, if devices' messages are stored through it
        self._local_sends: Any = None
        self._store_send: StoreSend | None = None
        #: once :meth:`closing` was called, the sends since (the wills of the devices a stop disconnects),
        #: which :meth:`stop` waits for before the RocketMQ client stops
        self._last_sends: list[defer.Deferred] | None = None
        self._in_order = InOrder()

    # ------------------------------------------------------------------ lifecycle

    def restore(self) -> None:
        """Read back the persisted sessions and retained messages, before devices connect (one that
        reconnects as soon as the port opens finds its session); :meth:`start` does it if not done."""
        if self.state is None or self._restored:
            return
        self._restored = True
        sessions, retained = self.state.load(time.time())
        self.sessions.update(sessions)
        for message in retained:
            self.retained.set(message)
        self.state.watch(self.sessions, self.retained.get)
        if sessions or retained:
            log.info("MQTT gateway: %d persistent session(s) and %d retained message(s) restored",
                     len(sessions), len(retained))

    def send_in_process(self, addr: str, processor: Processor, born_host: str) -> None:
        """Hand the sends to the broker at ``addr`` straight to its request table (call before
        :meth:`start`): the gateway served by a broker process stores what devices publish without a
        socket. Queue selection, retries and the broker's answers stay the producer's."""
        self._local_broker = (addr, processor, born_host)

    def store_in_process(self, sends: Any) -> None:
        """Store what devices publish through ``sends``, the send processor of the broker that
        :meth:`send_in_process` names, without a send request (call before :meth:`start`;
        :mod:`ferrymq.gateways.store_send`)."""
        self._local_sends = sends

    def deliver_in_process(self, store: Any, broker_name: str, queue_ids: Callable[[str], Iterable[int]]) -> None:
        """Read the non-shared subscriptions' messages from ``store``, the port of the broker named
        ``broker_name`` in this process, whose queues of a topic ``queue_ids`` gives (call before
        :meth:`start`; :mod:`.store_fanout`)."""
        self._local_store = (store, broker_name, queue_ids)

    @defer.inlineCallbacks
    def start(self):
        self.restore()
        config = ClientConfig(self.namesrv_addr, **self._config_kwargs)
        self._instance = ClientInstance(config)
        if self._local_broker is not None:
            addr, processor, born_host = self._local_broker
            self._instance.api.local_brokers[addr] = LocalPeer(processor, born_host)
        self.producer = Producer(PRODUCER_GROUP, config=config, instance=self._instance,
                                 max_message_size=self.max_message_size)
        yield self.producer.start()
        if self._local_sends is not None and self._local_broker is not None:
            addr, processor, born_host = self._local_broker
            self._store_send = StoreSend(self._local_sends, processor, addr, born_host, self.producer)
        if self.state is None:
            # a broadcasting consumer's offsets are local; the sessions they serve end with the process,
            # so every start begins at the subscriptions' own times
            self._offset_dir = tempfile.mkdtemp(prefix="ferrymq-mqtt-")
        else:
            self._offset_dir = str(self.state.offsets_dir)

        def broadcasting(cls: type[_SinceSubscribed], **kwargs) -> _Consumer:
            consumer = _Consumer(
                cls(FAN_OUT_GROUP, config=config, instance=self._instance, message_model=MessageModel.BROADCASTING,
                    local_offset_dir=self._offset_dir, consume_message_batch_max_size=FAN_OUT_BATCH,
                    await_termination_when_shutdown=0.5, **kwargs),
                self._fan_out_expressions)
            consumer.consumer.register_listener(lambda msgs, context: self._pulled(msgs, consumer.is_new))
            return consumer

        if self._local_store is not None:
            store, broker_name, queue_ids = self._local_store
            self._fan_out = StoreFanOut(
                store, broker_name, queue_ids, self._fan_out_expressions, self._store_messages,
                LocalFileOffsetStore(FAN_OUT_GROUP, config.client_id, self._offset_dir),
                persist_interval=config.persist_consumer_offset_interval, turn_done=lambda: self.deliveries_done())
            self._elsewhere = broadcasting(_Elsewhere, local_broker=broker_name)
            if self._store_send is not None:
                self._store_send.on_stored = self._fan_out.stored
        else:
            self._fan_out = broadcasting(_SinceSubscribed)
        if self.sessions:
            # each restored topic resumes from its offsets, else from when it was first subscribed
            for fan_out in self._fan_outs:
                since = fan_out.since
                for session in self.sessions.values():
                    for topic_filter, at in session.subscribed_at.items():
                        if not topic_filter.startswith(topics.SHARE_PREFIX):
                            topic = mapping.subscription(topic_filter).topic
                            since[topic] = min(since.get(topic, int(at * 1000)), int(at * 1000))
            self.subscriptions_changed()
        log.info("MQTT gateway in front of name server(s) %s as client %s", self.namesrv_addr, config.client_id)

    def closing(self) -> None:
        """The devices are about to be disconnected: :meth:`stop` waits for what is sent from now on."""
        self._last_sends = []

    @defer.inlineCallbacks
    def stop(self):
        if self._last_sends:
            sends, self._last_sends = self._last_sends, None
            yield defer.DeferredList(sends)  # each sender handles its own outcome
        for consumer in [*self._shares.values(), *self._fan_outs]:
            try:
                yield consumer.stop()
            except Exception as exc:  # noqa: BLE001 - the rest stops regardless
                log.warning("MQTT gateway: a consumer did not stop cleanly: %s", exc)
        self._shares.clear()
        if self.state is not None:
            yield self.state.flush()
        if self.producer is not None:
            producer, self.producer, self._store_send = self.producer, None, None
            yield producer.shutdown()
        if self._instance is not None:
            yield self._instance.shutdown()
        if self._offset_dir is not None and self.state is None:
            shutil.rmtree(self._offset_dir, ignore_errors=True)

    @property
    def ready(self) -> bool:
        return self.producer is not None and self._fan_out is not None

    # ------------------------------------------------------------------ device -> RocketMQ

    def send(self, message: Message) -> defer.Deferred:
        """Store ``message``; the Deferred fires once the broker answered (QoS 1 and 2 acknowledge then).

        Every message of one MQTT topic goes to the same queue (by hash of the topic), so that subscribers
        get them in the order they were published, as MQTT's ordered topics promise (4.6)."""
        outcome = self.publish(message)
        return outcome if isinstance(outcome, defer.Deferred) else defer.succeed(outcome)

    def publish(self, message: Message) -> Any:
        """:meth:`send`, whose outcome is the broker's answer itself when it was given at once, as the store
        of this process answers an ASYNC_FLUSH put: a device's PUBLISH is then acknowledged without a
        Deferred's callbacks. The answer says only that the message was stored (a SendResult when sent
        by route, the PutMessageResult when stored in process, ``None`` for an empty retained message)."""
        if self.producer is None:
            return defer.fail(RuntimeError("the MQTT gateway's RocketMQ client is not started"))
        retain = message.properties.get(mapping.RETAIN) == "1"
        if retain and not message.body:
            # RocketMQ stores no empty message: an empty retained PUBLISH only clears the retained one
            self._retain(message)
            return None
        key = message.properties.get(mapping.MQTT_TOPIC)
        if self._store_send is not None:
            outcome = self._store_send.store_orderly(message, key, answer=False, by_route=self._send_by_route)
        else:
            outcome = self._send_by_route(message, key)
        return self._published(outcome, message)

    def publish_many(self, messages: list[Message]) -> list[Any]:
        """:meth:`publish` of each of ``messages`` (a device's PUBLISHes of one read), their outcomes in
        order; those to one MQTT topic that the broker of this process stores go in one
        :meth:`~ferrymq.gateways.store_send.StoreSend.store_orderly_many`."""
        store_send = self._store_send
        if store_send is None or self.producer is None or any(not message.body for message in messages):
            # an empty message is refused, or clears a retained one, in its place among the others
            return [self.publish(message) for message in messages]
        by_key: dict[str, list[int]] = {}
        for i, message in enumerate(messages):
            by_key.setdefault(message.properties.get(mapping.MQTT_TOPIC), []).append(i)
        outcomes: list[Any] = [None] * len(messages)
        for key, indexes in by_key.items():
            stored = store_send.store_orderly_many([messages[i] for i in indexes], key, self._send_by_route)
            for i, outcome in zip(indexes, stored):
                outcomes[i] = self._published(outcome, messages[i])
        return outcomes

    def _published(self, outcome: Any, message: Message) -> Any:
        retain = message.properties.get(mapping.RETAIN) == "1"
        if not isinstance(outcome, defer.Deferred):
            return self._stored(outcome, message, retain)
        outcome.addCallback(self._stored, message, retain)
        if self._last_sends is not None:
            self._last_sends.append(outcome)
        return outcome

    def _send_by_route(self, message: Message, key: str) -> Any:
        """Send to the broker of the topic's queue for ``key``, after the broker answered the message of
        ``key`` on its way, if any (:mod:`.in_order`); the store of this process puts in order itself."""
        producer = self.producer
        return self._in_order.run(key, lambda: producer.send_orderly(message, select_by_hash, key))

    def _stored(self, result: Any, message: Message, retain: bool) -> Any:
        if retain:
            self._retain(message)
        for fan_out in self._fan_outs:
            fan_out.nudge(message.topic)
        for consumer in self._shares.values():
            consumer.nudge(message.topic)
        return result

    def hold_deliveries(self) -> StoreFanOut | None:
        """What this broker stores from now on is handed to the sessions when the fan-out returned is
        flushed (``flush()``, once), in this reactor turn rather than the next (:meth:`.StoreFanOut.hold`);
        ``None`` in front of a cluster, where the fan-out is a consumer."""
        fan_out = self._fan_out
        if isinstance(fan_out, StoreFanOut):
            fan_out.hold()
            return fan_out
        return None

    def _retain(self, message: Message) -> None:
        topic_name = self.retained.set(message)
        if self.state is not None:
            self.state.retained_changed(topic_name)

    def session_changed(self, session: Session) -> None:
        """``session`` changed, or ended: its file is rewritten (or removed) shortly."""
        if self.state is not None:
            self.state.changed(session.client_id)

    def retained_deliveries(self, topic_filter: str) -> list[mapping.Delivery]:
        """The retained messages a new subscription to ``topic_filter`` receives."""
        now_ms = int(time.time() * 1000)
        deliveries = []
        for message in self.retained.matching(topic_filter):
            delivery = mapping.to_delivery(message.topic, message.properties, message.body, now_ms)
            if delivery is None:  # its Message Expiry Interval passed: it is retained no more (3.3.2.3.3)
                self._retain(Message(message.topic, properties=message.properties))
            else:
                deliveries.append(delivery)
        return deliveries

    # ------------------------------------------------------------------ subscriptions

    def subscriptions_changed(self, *sessions: Session) -> None:
        """Re-derive what the consumers subscribe after a SUBSCRIBE, UNSUBSCRIBE or the end of a session:
        ``sessions`` are those that changed or ended (none: any may have, every session is indexed anew)."""
        if sessions:
            for session in sessions:
                self._index.update(session, self.sessions.get(session.client_id) is session)
        else:
            self._index.rebuild(self.sessions.values())
        for fan_out in self._fan_outs:
            fan_out.update()
        for name in {shared.group for shared in _shares_of(sessions or self.sessions.values())} | set(self._shares):
            self._share_consumer(name).update()

    @property
    def _fan_outs(self) -> list[_Consumer | StoreFanOut]:
        return [f for f in (self._fan_out, self._elsewhere) if f is not None]

    def _fan_out_expressions(self) -> dict[str, str]:
        return self._index.expressions()

    def _share_consumer(self, name: str) -> _Consumer:
        consumer = self._shares.get(name)
        if consumer is None:
            def expressions() -> dict[str, str]:
                tags: dict[str, list] = {}
                for shared in _shares_of(self.sessions.values()):
                    if shared.group == name:
                        sub = mapping.subscription(shared.topic_filter)
                        tags.setdefault(sub.topic, []).append(sub.tag)
                return {topic: mapping.tag_expression(t) for topic, t in tags.items()}

            push = _SinceSubscribed(mapping.share_group(name), config=self._instance.config, instance=self._instance,
                                    await_termination_when_shutdown=0.5)
            push.register_listener(lambda msgs, context: self._share_listener(name, msgs))
            consumer = self._shares[name] = _Consumer(push, expressions)
        return consumer

    # ------------------------------------------------------------------ RocketMQ -> devices

    def _pulled(self, msgs: list[MessageExt], is_new: Callable[[MessageExt], bool]) -> ConsumeConcurrentlyStatus:
        try:
            self._fan_out_messages(msgs, is_new, placed=False)
        finally:
            self.deliveries_done()
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    def _store_messages(self, msgs: list[MessageExt]) -> None:
        self._fan_out_messages(msgs, self._fan_out.is_new, placed=True)

    def _fan_out_messages(self, msgs: list[MessageExt], is_new: Callable[[MessageExt], bool], *, placed: bool) -> None:
        """Hand each message new to its fan-out (``is_new``) to every session whose non-shared filters
        match it. ``placed``: read from this broker's store, where a message's place (queue, commit-log
        offset) is one a persistent session records, so that a message read again after a crash is not
        handed to it again."""
        now_ms = int(time.time() * 1000)
        for msg in msgs:
            if not is_new(msg):
                continue
            delivery = mapping.to_delivery(msg.topic, msg.properties, msg.body, now_ms)
            if delivery is None:
                continue
            stored_at = msg.store_timestamp / 1000
            queue = (msg.topic, msg.queue_id)
            for session in self._index.sessions_for(msg.topic, delivery.topic_name):
                if placed and session.expiry_interval:
                    if msg.commitlog_offset <= session.served.get(queue, -1):
                        continue
                    session.served[queue] = msg.commitlog_offset
                filters = session.matching(delivery, None, stored_at)
                if filters:
                    self._run(session, deliver(session, delivery, None, filters=filters))

    def _share_listener(self, name: str, msgs: list[MessageExt]):
        """One message (the consumer's batch size is 1) to one member of share ``name``: the consume
        finishes when the member acknowledges it."""
        outcomes = []
        now_ms = int(time.time() * 1000)
        try:
            for msg in msgs:
                delivery = mapping.to_delivery(msg.topic, msg.properties, msg.body, now_ms)
                if delivery is None:
                    continue
                members = [(session, f) for session in self.sessions.values() for f in session.subscriptions
                           if (shared := topics.parse_shared(f)) is not None and shared.group == name
                           and topics.matches(shared.topic_filter, delivery.topic_name)]
                if not members:
                    continue
                connected = [m for m in members if m[0].owner is not None] or members
                session, topic_filter = connected[next(self._turn) % len(connected)]
                outcome = defer.Deferred()
                outcomes.append(outcome)
                self._run(session, deliver(session, delivery, outcome, share=topic_filter))
        finally:
            self.deliveries_done()
        if not outcomes:
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS
        return defer.gatherResults(outcomes).addCallback(
            lambda results: ConsumeConcurrentlyStatus.CONSUME_SUCCESS if all(results)
            else ConsumeConcurrentlyStatus.RECONSUME_LATER)

    def _run(self, session: Session, actions: list) -> None:
        if session.expiry_interval:
            self.session_changed(session)
        if session.owner is not None:
            self.run_actions(session, actions)
        else:
            settle(actions)


def settle(actions: Iterable) -> None:
    """Complete the delivery tokens of :class:`~.session.Ack` (done) and :class:`~.session.Release`
    (handed back) actions; the fan-out's deliveries carry no token (they completed when handed over)."""
    for action in actions:
        if isinstance(action, Ack) and action.token is not None and not action.token.called:
            action.token.callback(True)
        elif isinstance(action, Release):
            for token in action.tokens:
                if token is not None and not token.called:
                    token.callback(False)


def _shares_of(sessions: Iterable[Session]) -> Iterable[topics.SharedFilter]:
    for session in sessions:
        for topic_filter in session.subscriptions:
            shared = topics.parse_shared(topic_filter)
            if shared is not None:
                yield shared


__all__ = ["PRODUCER_GROUP", "FAN_OUT_GROUP", "Gateway", "settle"]
