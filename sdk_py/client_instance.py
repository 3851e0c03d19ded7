"""One client's connection to a cluster (Java ``MQClientInstance``): routes, broker addresses, heartbeats,
scheduled tasks, and the requests brokers send to clients.

Producers and consumers register with an instance by group; the instance keeps the route of every topic
they use fresh (every ``poll_name_server_interval``), heartbeats every broker in those routes, persists
consumer offsets and rebalances on schedule, and answers NOTIFY_CONSUMER_IDS_CHANGED,
RESET_CONSUMER_CLIENT_OFFSET, GET_CONSUMER_RUNNING_INFO, GET_CONSUMER_STATUS_FROM_CLIENT,
CONSUME_MESSAGE_DIRECTLY and CHECK_TRANSACTION_STATE on the connections it opened.
"""

from __future__ import annotations

import logging
from typing import Any, Protocol

from twisted.internet import defer, task

from ferrymq.wire.bodies import (
    ConsumerData,
    GetConsumerStatusBody,
    HeartbeatData,
    ProducerData,
    ResetOffsetBody,
    TopicRouteData,
)
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.headers import (
    CheckTransactionStateRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetConsumerStatusRequestHeader,
    NotifyConsumerIdsChangedRequestHeader,
    ResetOffsetRequestHeader,
)
from ferrymq.wire.message import MessageConst, decode_record
from ferrymq.wire.topics import CLIENT_INNER_PRODUCER_GROUP

from .admin import NamesrvAdmin
from .broker_api import BrokerAPI
from .client_config import ClientConfig
from .errors import MQResponseError
from ferrymq.remoting import RemotingClient
from ferrymq.remoting.tls import ClientTls

log = logging.getLogger("ferrymq.sdk")

MASTER_ID = 0


class ConsumerHooks(Protocol):
    """What the instance needs from a consumer it serves."""

    group: str

    def consumer_data(self) -> ConsumerData: ...
    def subscribed_topics(self) -> list[str]: ...
    def on_route_changed(self, topic: str, route: TopicRouteData) -> None: ...
    def do_rebalance(self) -> defer.Deferred: ...
    def persist_offsets(self) -> defer.Deferred: ...
    def running_info(self) -> Any: ...
    def reset_offset(self, topic: str, offsets: dict) -> defer.Deferred: ...
    def consumer_status(self, topic: str) -> dict: ...


class MQClientError(Exception):
    """A client-side failure: no route, no broker address, not started..."""


class ClientInstance:
    def __init__(self, config: ClientConfig, reactor: Any = None):
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.reactor = reactor
        self.config = config
        self.client_id = config.client_id
        handlers = {
            RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: self._on_notify_ids_changed,
            RequestCode.RESET_CONSUMER_CLIENT_OFFSET: self._on_reset_offset,
            RequestCode.GET_CONSUMER_RUNNING_INFO: self._on_running_info,
            RequestCode.GET_CONSUMER_STATUS_FROM_CLIENT: self._on_consumer_status,
            RequestCode.CHECK_TRANSACTION_STATE: self._on_check_transaction,
            RequestCode.CONSUME_MESSAGE_DIRECTLY: self._on_consume_directly,
        }
        self.remoting = RemotingClient(handlers, reactor=reactor, tls=ClientTls() if config.use_tls else None,
                                       credentials=config.credentials)
        self.api = BrokerAPI(self.remoting, config.api_timeout)
        self.namesrvs = [NamesrvAdmin(a, self.remoting, config.api_timeout) for a in config.namesrv_addrs]
        if not self.namesrvs:
            raise MQClientError("no name server address given: set namesrv_addr to 'host:port[;host:port]'")
        self._ns_index = 0
        self.route_table: dict[str, TopicRouteData] = {}
        self.broker_addrs: dict[str, dict[int, str]] = {}
        #: broker address -> version it answered a heartbeat with
        self.broker_versions: dict[str, int] = {}
        self.producers: dict[str, Any] = {}
        self.consumers: dict[str, ConsumerHooks] = {}
        self._route_listeners: list[Any] = []
        self._loops: list[task.LoopingCall] = []
        self._consumer_tasks = False
        self.started = False

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        """Start the scheduled tasks; called by every client sharing the instance (the consumer tasks
        start once a consumer has registered)."""
        c = self.config
        if not self.started:
            self.started = True
            self._every(c.poll_name_server_interval, self.update_all_routes)
            self._every(c.heartbeat_broker_interval, self.send_heartbeat_to_all)
        if self.consumers and not self._consumer_tasks:
            self._consumer_tasks = True
            self._every(c.persist_consumer_offset_interval, self.persist_all_offsets)
            self._every(c.rebalance_interval, self.rebalance_all)

    def _every(self, seconds: float, fn) -> None:
        def run() -> defer.Deferred:
            return defer.maybeDeferred(fn).addErrback(
                lambda f: log.warning("%s: scheduled %s failed: %s", self.client_id, fn.__name__, f.getErrorMessage())
            )

        loop = task.LoopingCall(run)
        loop.clock = self.reactor
        self._loops.append(loop)
        loop.start(seconds, now=False)

    @defer.inlineCallbacks
    def shutdown(self):
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        self.started = self._consumer_tasks = False
        yield self.remoting.close()

    # ------------------------------------------------------------------ registration

    def register_producer(self, group: str, producer: Any) -> None:
        if group in self.producers:
            raise MQClientError(f"producer group {group!r} is already registered in client {self.client_id}")
        self.producers[group] = producer

    def register_consumer(self, group: str, consumer: ConsumerHooks) -> None:
        if group in self.consumers:
            raise MQClientError(f"consumer group {group!r} is already registered in client {self.client_id}")
        self.consumers[group] = consumer

    @defer.inlineCallbacks
    def unregister(self, producer_group: str | None = None, consumer_group: str | None = None):
        """UNREGISTER_CLIENT to every broker we know, then forget the group."""
        self.producers.pop(producer_group, None)
        self.consumers.pop(consumer_group, None)
        for addrs in list(self.broker_addrs.values()):
            for addr in addrs.values():
                try:
                    yield self.api.unregister_client(addr, self.client_id, producer_group, consumer_group)
                except Exception as exc:  # noqa: BLE001 - a broker that is gone has forgotten us anyway
                    log.info("%s: UNREGISTER_CLIENT to %s failed: %s", self.client_id, addr, exc)

    # ------------------------------------------------------------------ routes

    @defer.inlineCallbacks
    def fetch_route(self, topic: str):
        """GET_ROUTEINFO_BY_TOPIC from the name servers, trying each in turn; raises the last error."""
        last: Exception | None = None
        for i in range(len(self.namesrvs)):
            ns = self.namesrvs[(self._ns_index + i) % len(self.namesrvs)]
            try:
                route = yield ns.get_route_info(topic)
            except MQResponseError:
                raise
            except Exception as exc:  # noqa: BLE001 - next name server
                last = exc
                continue
            self._ns_index = (self._ns_index + i) % len(self.namesrvs)
            return route
        raise last  # type: ignore[misc]

    @defer.inlineCallbacks
    def update_route(self, topic: str):
        """Refresh one topic's route; fires with the route or None when the name server has none (17)."""
        try:
            route = yield self.fetch_route(topic)
        except MQResponseError as exc:
            if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                self.route_table.pop(topic, None)
                return None
            raise
        self._apply_route(topic, route)
        return route

    def _apply_route(self, topic: str, route: TopicRouteData) -> None:
        self.route_table[topic] = route
        for bd in route.broker_datas:
            self.broker_addrs[bd.broker_name] = dict(bd.broker_addrs)
        for producer in list(self.producers.values()):
            producer.on_route_changed(topic, route)
        for consumer in list(self.consumers.values()):
            consumer.on_route_changed(topic, route)

    def topics_in_use(self) -> set[str]:
        topics: set[str] = set()
        for producer in self.producers.values():
            topics.update(producer.published_topics())
        for consumer in self.consumers.values():
            topics.update(consumer.subscribed_topics())
        return topics

    @defer.inlineCallbacks
    def update_all_routes(self):
        for topic in sorted(self.topics_in_use()):
            try:
                yield self.update_route(topic)
            except Exception as exc:  # noqa: BLE001 - one topic failing must not stop the others
                log.info("%s: route refresh of %s failed: %s", self.client_id, topic, exc)
        self._forget_offline_brokers()

    def _forget_offline_brokers(self) -> None:
        """Drop brokers (and addresses) no route mentions any more, so heartbeats stop going to them
        (Java ``cleanOfflineBroker``)."""
        live: dict[str, set[str]] = {}
        for route in self.route_table.values():
            for bd in route.broker_datas:
                live.setdefault(bd.broker_name, set()).update(bd.broker_addrs.values())
        for name in list(self.broker_addrs):
            if name not in live:
                log.info("%s: broker %s is in no route any more; forgetting it", self.client_id, name)
                del self.broker_addrs[name]
                continue
            addrs = self.broker_addrs[name]
            for broker_id in [i for i, addr in addrs.items() if addr not in live[name]]:
                del addrs[broker_id]

    def find_broker_addr(self, broker_name: str, *, only_master: bool = True) -> str | None:
        addrs = self.broker_addrs.get(broker_name) or {}
        if MASTER_ID in addrs:
            return addrs[MASTER_ID]
        if only_master or not addrs:
            return None
        return addrs[min(addrs)]

    @defer.inlineCallbacks
    def require_broker_addr(self, broker_name: str, topic: str, *, only_master: bool = True):
        """The broker's address, refreshing ``topic``'s route once if it is not known yet."""
        addr = self.find_broker_addr(broker_name, only_master=only_master)
        if addr is None:
            yield self.update_route(topic)
            addr = self.find_broker_addr(broker_name, only_master=only_master)
        if addr is None:
            raise MQClientError(f"broker {broker_name!r} has no {'master ' if only_master else ''}address "
                                f"in the route of topic {topic!r}; is it running and registered?")
        return addr

    def any_broker_addr(self, topic: str) -> str | None:
        """An address of some broker serving ``topic`` (GET_CONSUMER_LIST_BY_GROUP goes to one)."""
        route = self.route_table.get(topic)
        if route is None:
            return None
        for bd in sorted(route.broker_datas, key=lambda b: b.broker_name or ""):
            if bd.broker_addrs:
                return bd.broker_addrs.get(MASTER_ID) or bd.broker_addrs[min(bd.broker_addrs)]
        return None

    # ------------------------------------------------------------------ heartbeat

    def heartbeat_data(self) -> HeartbeatData:
        producers = [ProducerData(g) for g in self.producers]
        if (self.producers or self.consumers) and CLIENT_INNER_PRODUCER_GROUP not in self.producers:
            producers.append(ProducerData(CLIENT_INNER_PRODUCER_GROUP))
        return HeartbeatData(
            client_id=self.client_id,
            producer_data_set=producers,
            consumer_data_set=[c.consumer_data() for c in self.consumers.values()],
        )

    @defer.inlineCallbacks
    def send_heartbeat_to_all(self):
        """HEART_BEAT to every broker of every known route: all of a broker's addresses when this client
        has consumers, masters only for a producer-only client. Fires with the number that answered 0."""
        data = self.heartbeat_data()
        if not data.producer_data_set and not data.consumer_data_set:
            return 0
        ok = 0
        for name, addrs in sorted(self.broker_addrs.items()):
            for broker_id, addr in sorted(addrs.items()):
                if broker_id != MASTER_ID and not self.consumers:
                    continue
                try:
                    resp = yield self.api.send_heartbeat(addr, data)
                except Exception as exc:  # noqa: BLE001 - logged, the next round tries again
                    log.warning("%s: HEART_BEAT to %s (%s) failed: %s", self.client_id, addr, name, exc)
                    continue
                self.broker_versions[addr] = resp.version
                ok += 1
        return ok

    # ------------------------------------------------------------------ consumers

    @defer.inlineCallbacks
    def rebalance_all(self):
        for consumer in list(self.consumers.values()):
            try:
                yield consumer.do_rebalance()
            except Exception as exc:  # noqa: BLE001
                log.warning("%s: rebalance of %s failed: %s", self.client_id, consumer.group, exc)

    @defer.inlineCallbacks
    def persist_all_offsets(self):
        for consumer in list(self.consumers.values()):
            try:
                yield consumer.persist_offsets()
            except Exception as exc:  # noqa: BLE001
                log.warning("%s: persisting offsets of %s failed: %s", self.client_id, consumer.group, exc)

    # ------------------------------------------------------------------ requests from brokers

    def _on_notify_ids_changed(self, cmd: RemotingCommand, channel) -> None:
        header = NotifyConsumerIdsChangedRequestHeader.from_ext(cmd.ext_fields or {})
        log.info("%s: broker %s says the consumers of %s changed", self.client_id, channel.remote_address,
                 header.consumer_group)
        self.reactor.callLater(0, self.rebalance_all)
        return None

    def _on_reset_offset(self, cmd: RemotingCommand, channel) -> defer.Deferred | None:
        header = ResetOffsetRequestHeader.from_ext(cmd.ext_fields or {})
        consumer = self.consumers.get(header.group)
        if consumer is None or not cmd.body:
            return None
        offsets = ResetOffsetBody.decode(cmd.body).offset_table
        d = consumer.reset_offset(header.topic, offsets)
        d.addErrback(lambda f: log.warning("%s: offset reset failed: %s", self.client_id, f.getErrorMessage()))
        return d.addCallback(lambda _: None)

    def _on_running_info(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = GetConsumerRunningInfoRequestHeader.from_ext(cmd.ext_fields or {})
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"The Consumer Group <{header.consumer_group}> not exist in this consumer")
        return cmd.response(ResponseCode.SUCCESS, None, None, consumer.running_info().encode())

    def _on_consumer_status(self, cmd: RemotingCommand, channel) -> RemotingCommand:
        header = GetConsumerStatusRequestHeader.from_ext(cmd.ext_fields or {})
        consumer = self.consumers.get(header.group)
        table = consumer.consumer_status(header.topic) if consumer is not None else {}
        return cmd.response(ResponseCode.SUCCESS, None, None, GetConsumerStatusBody(table).encode())

    def _on_consume_directly(self, cmd: RemotingCommand, channel):
        header = ConsumeMessageDirectlyResultRequestHeader.from_ext(cmd.ext_fields or {})
        consumer = self.consumers.get(header.consumer_group)
        if consumer is None or not hasattr(consumer, "consume_directly"):
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"The Consumer Group <{header.consumer_group}> not exist in this consumer")
        msg, _ = decode_record(cmd.body)
        d = defer.maybeDeferred(consumer.consume_directly, msg, header.broker_name)
        return d.addCallback(lambda result: cmd.response(ResponseCode.SUCCESS, None, None, result.encode()))

    def _on_check_transaction(self, cmd: RemotingCommand, channel) -> None:
        header = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields or {})
        msg, _ = decode_record(cmd.body)
        group = msg.properties.get(MessageConst.PRODUCER_GROUP)
        producer = self.producers.get(group) if group else None
        if producer is None or not hasattr(producer, "check_transaction_state"):
            log.warning("%s: CHECK_TRANSACTION_STATE for group %r that has no transactional producer here",
                        self.client_id, group)
            return None
        producer.check_transaction_state(channel.remote_address, header, msg)
        return None
