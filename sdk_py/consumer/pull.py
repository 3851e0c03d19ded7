"""Pull consumer (Java ``DefaultMQPullConsumer``): the application picks queues and offsets itself.

Each pull sends its subscription expression in the request (SUBSCRIPTION bit), so the broker needs no
heartbeat subscription; ``pull(..., block=True)`` long-polls like the push consumer. Offsets are the
application's to commit (:meth:`update_offset`), kept on the broker as for a push consumer.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from twisted.internet import defer

from ferrymq.wire.bodies import ConsumerData, MessageQueue, SubscriptionData, TopicRouteData
from ferrymq.wire.codes import PullSysFlag
from ferrymq.wire.headers import PullMessageRequestHeader

from ..client_config import ClientConfig, settle_config
from ..client_instance import ClientInstance, MQClientError
from ..message import PullResult, PullStatus
from ..route import subscribe_queues
from .offset_store import ReadOffsetType, RemoteOffsetStore
from .push import restore_retry_topic
from .subscription import SUB_ALL, TAG, build_subscription, matches

log = logging.getLogger("ferrymq.sdk.pull")


class PullConsumer:
    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        broker_suspend_max_time: float = 20.0,
        consumer_timeout_when_suspend: float = 30.0,
        instance: ClientInstance | None = None,
    ):
        config = settle_config(group, namesrv_addr, config)
        self.group = group
        self.config = config
        self.message_model = "CLUSTERING"
        self.broker_suspend_max_time = broker_suspend_max_time
        self.consumer_timeout_when_suspend = consumer_timeout_when_suspend
        self._own_instance = instance is None
        self.instance = instance or ClientInstance(config)
        self.offset_store = RemoteOffsetStore(
            group, self.instance.api, lambda mq: self.instance.require_broker_addr(mq.broker_name, mq.topic)
        )
        #: topics this consumer has asked about (kept in heartbeats and route refreshes)
        self.registered_topics: dict[str, SubscriptionData] = {}
        self.topic_queues: dict[str, set[MessageQueue]] = {}
        self.running = False

    # ------------------------------------------------------------------ lifecycle

    @defer.inlineCallbacks
    def start(self):
        if self.running:
            return
        self.instance.register_consumer(self.group, self)
        self.instance.start()
        self.running = True
        yield self.instance.send_heartbeat_to_all()

    @defer.inlineCallbacks
    def shutdown(self):
        if not self.running:
            return
        self.running = False
        yield self.offset_store.persist_all(list(self.offset_store.table), oneway=False)
        yield self.instance.unregister(consumer_group=self.group)
        if self._own_instance:
            yield self.instance.shutdown()

    # ------------------------------------------------------------------ hooks from the instance

    def subscribed_topics(self) -> list[str]:
        return list(self.registered_topics)

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.registered_topics:
            self.topic_queues[topic] = subscribe_queues(route, topic)

    def consumer_data(self) -> ConsumerData:
        return ConsumerData(
            group_name=self.group,
            consume_type="CONSUME_ACTIVELY",
            message_model=self.message_model,
            consume_from_where="CONSUME_FROM_LAST_OFFSET",
            subscription_data_set=list(self.registered_topics.values()),
            unit_mode=False,
        )

    def do_rebalance(self) -> defer.Deferred:
        return defer.succeed(None)  # the application assigns queues itself

    def persist_offsets(self) -> defer.Deferred:
        if not self.running:
            return defer.succeed(None)
        return self.offset_store.persist_all(list(self.offset_store.table))

    def running_info(self):
        from ferrymq.wire.bodies import ConsumerRunningInfo

        return ConsumerRunningInfo(
            properties={"PROP_CONSUME_TYPE": "CONSUME_ACTIVELY", "consumerGroup": self.group},
            subscription_set=list(self.registered_topics.values()),
        )

    def consumer_status(self, topic: str) -> dict:
        return self.offset_store.clone_table(topic)

    def reset_offset(self, topic: str, offsets: dict) -> defer.Deferred:
        for mq, off in offsets.items():
            if mq.topic == topic:
                self.offset_store.update_offset(mq, off, False)
        return defer.succeed(None)

    # ------------------------------------------------------------------ queues and pulls

    @defer.inlineCallbacks
    def fetch_subscribe_queues(self, topic: str):
        """The topic's readable queues, sorted (registers the topic for heartbeats and route refresh)."""
        self.registered_topics.setdefault(topic, build_subscription(topic, SUB_ALL))
        route = yield self.instance.update_route(topic)
        if route is None:
            raise MQClientError(f"topic {topic} has no route in the name server; create it first")
        queues = subscribe_queues(route, topic)
        self.topic_queues[topic] = queues
        return sorted(queues, key=lambda q: (q.broker_name or "", q.queue_id))

    @defer.inlineCallbacks
    def pull(
        self,
        mq: MessageQueue,
        expression: str = SUB_ALL,
        offset: int = 0,
        max_nums: int = 32,
        *,
        block: bool = False,
        expression_type: str = TAG,
        timeout: float | None = None,
    ):
        """PULL_MESSAGE from ``offset``; with ``block`` the broker holds the request until messages arrive
        or ``broker_suspend_max_time`` passes. Fires with a PullResult (messages tag-filtered)."""
        if not self.running:
            raise MQClientError(f"pull consumer {self.group} is not started; call start() first")
        sub = build_subscription(mq.topic, expression, expression_type, sub_version=0)
        flags = PullSysFlag.SUBSCRIPTION | (PullSysFlag.SUSPEND if block else 0)
        header = PullMessageRequestHeader(
            consumer_group=self.group,
            topic=mq.topic,
            queue_id=mq.queue_id,
            queue_offset=offset,
            max_msg_nums=max_nums,
            sys_flag=int(flags),
            commit_offset=0,
            suspend_timeout_millis=int(self.broker_suspend_max_time * 1000),
            sub_version=0,
            subscription=sub.sub_string,
            expression_type=sub.expression_type,
            broker_name=mq.broker_name,
        )
        addr = yield self.instance.require_broker_addr(mq.broker_name, mq.topic, only_master=False)
        if timeout is None:
            timeout = self.consumer_timeout_when_suspend if block else self.config.api_timeout + 7
        result: PullResult = yield self.instance.api.pull_message(addr, header, timeout)
        if result.status == PullStatus.FOUND:
            result.messages = [m for m in result.messages if matches(sub, m)]
            for m in result.messages:
                restore_retry_topic(m, self.group)
        return result

    def pull_block_if_not_found(self, mq: MessageQueue, expression: str = SUB_ALL, offset: int = 0,
                                max_nums: int = 32) -> defer.Deferred:
        return self.pull(mq, expression, offset, max_nums, block=True)

    def update_offset(self, mq: MessageQueue, offset: int) -> None:
        """Remember ``offset`` as consumed up to (persisted on schedule and at shutdown)."""
        self.offset_store.update_offset(mq, offset, False)

    @defer.inlineCallbacks
    def commit(self, mqs: Iterable[MessageQueue] | None = None):
        """Write the remembered offsets (of ``mqs``, default all) to the brokers and wait for them."""
        for mq in list(mqs) if mqs is not None else list(self.offset_store.table):
            yield self.offset_store.persist(mq, oneway=False)

    def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> defer.Deferred:
        how = ReadOffsetType.READ_FROM_STORE if from_store else ReadOffsetType.MEMORY_FIRST_THEN_STORE
        return self.offset_store.read_offset(mq, how)
