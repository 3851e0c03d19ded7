"""The admin calls an application needs next to its producers and consumers (Java ``MQAdminImpl`` and
the topic part of ``DefaultMQAdminExt``): create a topic on brokers, list a topic's queues, and ask a
queue for its min/max offset, earliest store time, or the offset of a point in time; list the consumer
groups and read their offsets as ``mqadmin consumerProgress`` does; read the cluster, the brokers' runtime
figures and a topic's queues as ``clusterList`` and ``topicStatus`` do; find messages by id or key and
what each consumer group did with one, as ``queryMsgById`` does.
"""

from __future__ import annotations

import io

from twisted.internet import defer, task

from ferrymq.wire.bodies import MessageQueue, TopicRouteData, TopicStatsTable
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.signature import Credentials

from .access_admin import AccessAdmin
from .admin import DEFAULT_TIMEOUT, NamesrvAdmin
from .broker_api import BrokerAPI
from .client_instance import MQClientError
from .errors import MQResponseError
from ferrymq.remoting import RemotingClient
from .route import master_addr, publish_info, subscribe_queues


class MQAdmin:
    def __init__(self, namesrv_addr: str, client: RemotingClient | None = None, timeout: float = DEFAULT_TIMEOUT,
                 credentials: Credentials | None = None):
        """``credentials``: sign the requests of the client made here (not of a ``client`` given)."""
        self.client = client or RemotingClient(credentials=credentials)
        self._owns_client = client is None
        self.namesrv = NamesrvAdmin(namesrv_addr.split(";")[0].strip(), self.client, timeout)
        self.api = BrokerAPI(self.client, timeout)
        #: users and ACLs of a broker (mqadmin's createUser ... listAcl)
        self.access = AccessAdmin(self.api)

    def close(self) -> defer.Deferred:
        return self.client.close() if self._owns_client else defer.succeed(None)

    # ------------------------------------------------------------------ topics

    def list_topics(self) -> defer.Deferred:
        """The names of every topic the name server has a route for (system topics included)."""
        return self.namesrv.get_all_topics().addCallback(sorted)

    @defer.inlineCallbacks
    def master_addrs(self, cluster: str | None = None):
        """Master addresses of ``cluster`` (all clusters when None), sorted by broker name."""
        info = yield self.namesrv.get_cluster_info()
        names = set(info.broker_addr_table)
        if cluster is not None:
            if cluster not in info.cluster_addr_table:
                raise MQClientError(f"cluster {cluster!r} is not known to the name server "
                                    f"(known: {sorted(info.cluster_addr_table)})")
            names = set(info.cluster_addr_table[cluster])
        return [info.broker_addr_table[n].broker_addrs[0] for n in sorted(names)
                if 0 in info.broker_addr_table[n].broker_addrs]

    @defer.inlineCallbacks
    def create_topic(self, topic: str, queue_nums: int = 4, *, cluster: str | None = None,
                     broker_addr: str | None = None, perm: int = 6, order: bool = False,
                     attributes: dict[str, str] | None = None):
        """UPDATE_AND_CREATE_TOPIC with ``queue_nums`` read and write queues on one broker, or on every
        master of ``cluster`` (of all clusters when neither is given), with ``attributes`` (as mqadmin's
        ``-a``: ``{"message.type": "FIFO"}``). Fires with the addresses used."""
        addrs = [broker_addr] if broker_addr else (yield self.master_addrs(cluster))
        if not addrs:
            raise MQClientError("no master broker is registered with the name server; start one first")
        edits = ",".join(f"+{key}={value}" for key, value in (attributes or {}).items()) or None
        for addr in addrs:
            yield self.api.create_topic(addr, topic, queue_nums, queue_nums, perm, order=order, attributes=edits)
        return addrs

    @defer.inlineCallbacks
    def wait_for_route(self, topic: str, timeout: float = 30.0, interval: float = 0.2):
        """Poll the name server until it has a route for ``topic`` with readable queues."""
        from twisted.internet import reactor

        waited = 0.0
        while True:
            try:
                route = yield self.namesrv.get_route_info(topic)
                if subscribe_queues(route, topic):
                    return route
            except MQResponseError as exc:
                if exc.code != ResponseCode.TOPIC_NOT_EXIST:
                    raise
            if waited >= timeout:
                raise MQClientError(f"topic {topic} has no route in the name server after {timeout} s")
            yield task.deferLater(reactor, interval, lambda: None)
            waited += interval

    def fetch_route(self, topic: str) -> defer.Deferred:
        return self.namesrv.get_route_info(topic)

    @defer.inlineCallbacks
    def fetch_subscribe_queues(self, topic: str):
        route = yield self.fetch_route(topic)
        return sorted(subscribe_queues(route, topic), key=lambda q: (q.broker_name or "", q.queue_id))

    @defer.inlineCallbacks
    def fetch_publish_queues(self, topic: str):
        route = yield self.fetch_route(topic)
        return list(publish_info(route, topic).queues)

    # ------------------------------------------------------------------ queue offsets

    @defer.inlineCallbacks
    def _addr(self, mq: MessageQueue):
        route: TopicRouteData = yield self.fetch_route(mq.topic)
        addr = master_addr(route, mq.broker_name)
        if addr is None:
            raise MQClientError(f"broker {mq.broker_name} of {mq} has no master in the route")
        return addr

    @defer.inlineCallbacks
    def max_offset(self, mq: MessageQueue):
        addr = yield self._addr(mq)
        return (yield self.api.get_max_offset(addr, mq))

    @defer.inlineCallbacks
    def min_offset(self, mq: MessageQueue):
        addr = yield self._addr(mq)
        return (yield self.api.get_min_offset(addr, mq))

    @defer.inlineCallbacks
    def earliest_msg_store_time(self, mq: MessageQueue):
        addr = yield self._addr(mq)
        return (yield self.api.get_earliest_msg_store_time(addr, mq))

    @defer.inlineCallbacks
    def search_offset(self, mq: MessageQueue, timestamp_ms: int, boundary: str | None = None):
        """Offset of the first message stored at or after ``timestamp_ms``."""
        addr = yield self._addr(mq)
        return (yield self.api.search_offset(addr, mq, timestamp_ms, boundary))

    @defer.inlineCallbacks
    def query_consumer_offset(self, group: str, mq: MessageQueue):
        """The group's committed offset of ``mq``, -1 when it has none."""
        addr = yield self._addr(mq)
        return (yield self.api.query_consumer_offset(addr, group, mq))

    # ------------------------------------------------------------------ consumer groups

    @defer.inlineCallbacks
    def subscription_groups(self):
        """The names of every subscription group the masters keep settings for, sorted."""
        names: set[str] = set()
        for addr in (yield self.master_addrs()):
            wrapper = yield self.api.get_all_subscription_groups(addr)
            names.update(wrapper.subscription_group_table)
        return sorted(names)

    def consume_stats(self, group: str, topic: str | None = None) -> defer.Deferred:
        """The group's broker and committed offsets per queue on every broker of its route, as ``mqadmin
        consumerProgress -g`` reads them (GET_CONSUME_STATS); fails when the brokers keep no offsets for it
        (a broadcasting group, or none consumed yet with no consumer online)."""
        from .admin_cli.consumer import consume_stats

        return consume_stats(self._context(), group, topic)

    def _context(self):
        """What the mqadmin command helpers run with, their printing going nowhere."""
        from .admin_cli.command import Context

        return Context(self, [], io.StringIO(), io.StringIO())

    # ------------------------------------------------------------------ cluster and brokers

    def cluster_info(self) -> defer.Deferred:
        """The name server's clusters and brokers (GET_BROKER_CLUSTER_INFO), a ClusterInfo."""
        return self.namesrv.get_cluster_info()

    def runtime_info(self, addr: str) -> defer.Deferred:
        """The broker's runtime figures (GET_BROKER_RUNTIME_INFO), as ``clusterList`` reads them."""
        return self.api.get_runtime_info(addr)

    @defer.inlineCallbacks
    def topic_stats(self, topic: str):
        """The topic's queues' min/max offsets and its put TPS over every broker of its route, as
        ``mqadmin topicStatus`` gathers them (a TopicStatsTable)."""
        from .admin_cli.cluster import select_addr

        route: TopicRouteData = yield self.fetch_route(topic)
        result = TopicStatsTable()
        for broker in route.broker_datas:
            addr = select_addr(broker)
            if addr:
                stats = yield self.api.get_topic_stats(addr, topic)
                result.offset_table.update(stats.offset_table)
                result.topic_put_tps += stats.topic_put_tps
        return result

    # ------------------------------------------------------------------ messages

    def message_by_id(self, topic: str, msg_id: str) -> defer.Deferred:
        """The message ``msg_id`` names in ``topic``: an offset message id, else a unique key (UNIQ_KEY)
        of the last three days, as ``mqadmin queryMsgById`` finds it; fails when there is none."""
        from .admin_cli.message import message_by_id

        return message_by_id(self._context(), topic, msg_id)

    def messages_by_key(self, topic: str, key: str, max_num: int = 64) -> defer.Deferred:
        """The messages of ``topic`` carrying ``key`` among their keys, as ``mqadmin queryMsgByKey`` finds
        them; fails when there are none."""
        from .admin_cli.message import query_messages

        return query_messages(self._context(), topic, key, max_num=max_num)

    def message_tracks(self, msg) -> defer.Deferred:
        """What each consumer group of the message's topic did with it (MessageTracks: consumed, not
        consumed yet, filtered out, ...), as ``mqadmin queryMsgById`` prints below the message."""
        from .admin_cli.message import tracks_of

        return tracks_of(self._context(), msg)
