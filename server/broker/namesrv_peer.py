"""The broker's calls to a name server (Apache's BrokerOuterAPI): REGISTER_BROKER, UNREGISTER_BROKER,
QUERY_DATA_VERSION, and GET_ROUTEINFO_BY_TOPIC for the gRPC service's routes (the proxy's local mode
asks its name server too). The broker owns them; the SDK's admin client does not register brokers."""

from __future__ import annotations

import zlib
from collections.abc import Iterable
from dataclasses import dataclass

from twisted.internet import defer

from ferrymq.remoting import RemotingClient
from ferrymq.wire.bodies import (
    DataVersion,
    KVTable,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicRouteData,
)
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.headers import (
    GetRouteInfoRequestHeader,
    QueryDataVersionRequestHeader,
    RegisterBrokerRequestHeader,
    UnRegisterBrokerRequestHeader,
)


@dataclass(slots=True)
class RegisterBrokerReply:
    """What REGISTER_BROKER answers: the master's HA address (for slaves) and ORDER_TOPIC_CONFIG KVs."""

    ha_server_addr: str | None
    master_addr: str | None
    order_topic_config: dict[str, str]


class NamesrvPeer:
    """One name server (``host:port``) as the broker talks to it, over a shared client."""

    def __init__(self, addr: str, client: RemotingClient, timeout: float):
        self.addr = addr
        self.client = client
        self.timeout = timeout

    def _call(self, cmd: RemotingCommand) -> defer.Deferred:
        return self.client.call(self.addr, cmd, self.timeout)

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int = 0,
        ha_server_addr: str = "",
        topics: Iterable[TopicConfig] | TopicConfigSerializeWrapper = (),
        *,
        data_version: DataVersion | None = None,
        compressed: bool = False,
        heartbeat_timeout_ms: int | None = None,
        enable_acting_master: bool | None = False,
        filter_servers: Iterable[str] = (),
        with_crc: bool = True,
    ) -> defer.Deferred:
        """Register (or re-register) a broker with its topic table, as a broker does every 30 s."""
        if isinstance(topics, TopicConfigSerializeWrapper):
            wrapper = topics
        else:
            wrapper = TopicConfigSerializeWrapper(
                topic_config_table={t.topic_name: t for t in topics},
                data_version=data_version or DataVersion(),
            )
        body = RegisterBrokerBody(wrapper, list(filter_servers)).encode(compressed=compressed)
        header = RegisterBrokerRequestHeader(
            broker_name=broker_name,
            broker_addr=broker_addr,
            cluster_name=cluster_name,
            ha_server_addr=ha_server_addr,
            broker_id=broker_id,
            heartbeat_timeout_millis=heartbeat_timeout_ms,
            enable_acting_master=enable_acting_master,
            compressed=compressed,
            body_crc32=(zlib.crc32(body) & 0x7FFFFFFF) if with_crc else 0,
        )

        def reply(resp: RemotingCommand) -> RegisterBrokerReply:
            table = KVTable.decode(resp.body).table if resp.body else {}
            return RegisterBrokerReply(resp.ext("haServerAddr"), resp.ext("masterAddr"), table)

        return self._call(request(RequestCode.REGISTER_BROKER, header.to_ext(), body)).addCallback(reply)

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int = 0):
        header = UnRegisterBrokerRequestHeader(broker_name, broker_addr, cluster_name, broker_id)
        return self._call(request(RequestCode.UNREGISTER_BROKER, header.to_ext())).addCallback(lambda _: None)

    def topic_route(self, topic: str) -> defer.Deferred:
        """Fires with the topic's TopicRouteData, or None when the name server has no route for it."""
        d = self.client.call(self.addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC,
                                                GetRouteInfoRequestHeader(topic).to_ext()),
                             self.timeout, accept=(ResponseCode.SUCCESS, ResponseCode.TOPIC_NOT_EXIST))
        return d.addCallback(lambda r: TopicRouteData.decode(r.body) if r.code == ResponseCode.SUCCESS else None)

    def query_data_version(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int, version: DataVersion
    ) -> defer.Deferred:
        """Fires with (changed, the name server's DataVersion or None)."""
        header = QueryDataVersionRequestHeader(broker_name, broker_addr, cluster_name, broker_id)
        d = self._call(request(RequestCode.QUERY_DATA_VERSION, header.to_ext(), version.encode()))
        return d.addCallback(
            lambda r: (r.ext("changed") == "true", DataVersion.decode(r.body) if r.body else None)
        )
