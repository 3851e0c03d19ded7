"""Name-server admin calls (what mqadmin and a broker send to a name server), Deferred-based.

Each method builds the request from the typed header in ``wire.headers``, sends it through the
shared :class:`RemotingClient` and turns the answer into typed bodies; an unexpected response code
raises :class:`MQResponseError` with the server's code and remark.
"""

from __future__ import annotations

import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from twisted.internet import defer

from server.config import parse_properties
from wire.bodies import (
    ClusterInfo,
    DataVersion,
    KVTable,
    QueueData,
    RegisterBrokerBody,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from wire.codes import RequestCode, ResponseCode
from wire.command import RemotingCommand, request
from wire.headers import (
    AddWritePermOfBrokerRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    QueryDataVersionRequestHeader,
    RegisterBrokerRequestHeader,
    RegisterTopicRequestHeader,
    UnRegisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)

from .errors import MQResponseError
from .remoting import RemotingClient

DEFAULT_TIMEOUT = 3.0


@dataclass(slots=True)
class RegisterBrokerReply:
    """What REGISTER_BROKER answers: the master's HA address (for slaves) and ORDER_TOPIC_CONFIG KVs."""

    ha_server_addr: str | None
    master_addr: str | None
    order_topic_config: dict[str, str]


class NamesrvAdmin:
    """Admin client for one name server address (``host:port``)."""

    def __init__(self, namesrv_addr: str, client: RemotingClient | None = None, timeout: float = DEFAULT_TIMEOUT):
        self.addr = namesrv_addr
        self.client = client or RemotingClient()
        self._owns_client = client is None
        self.timeout = timeout

    def close(self) -> defer.Deferred:
        return self.client.close() if self._owns_client else defer.succeed(None)

    # ------------------------------------------------------------------ plumbing

    def call(self, cmd: RemotingCommand, *accept: int, operation: str | None = None) -> defer.Deferred:
        """Send ``cmd``; fire with the response if its code is in ``accept`` (default SUCCESS)."""
        accept = accept or (ResponseCode.SUCCESS,)
        operation = operation or RequestCode(cmd.code).name

        def check(resp: RemotingCommand) -> RemotingCommand:
            if resp.code not in accept:
                raise MQResponseError(operation, self.addr, resp.code, resp.remark)
            return resp

        return self.client.invoke(self.addr, cmd, self.timeout).addCallback(check)

    def _req(self, code: int, header: Any = None, body: bytes = b"") -> RemotingCommand:
        return request(code, header.to_ext() if header is not None else None, body)

    # ------------------------------------------------------------------ brokers

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

        return self.call(self._req(RequestCode.REGISTER_BROKER, header, body)).addCallback(reply)

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int = 0):
        header = UnRegisterBrokerRequestHeader(broker_name, broker_addr, cluster_name, broker_id)
        return self.call(self._req(RequestCode.UNREGISTER_BROKER, header)).addCallback(lambda _: None)

    def query_data_version(
        self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int, version: DataVersion
    ) -> defer.Deferred:
        """Fires with (changed, the name server's DataVersion or None)."""
        header = QueryDataVersionRequestHeader(broker_name, broker_addr, cluster_name, broker_id)
        d = self.call(self._req(RequestCode.QUERY_DATA_VERSION, header, version.encode()))
        return d.addCallback(
            lambda r: (r.ext("changed") == "true", DataVersion.decode(r.body) if r.body else None)
        )

    def get_cluster_info(self) -> defer.Deferred:
        d = self.call(self._req(RequestCode.GET_BROKER_CLUSTER_INFO))
        return d.addCallback(lambda r: ClusterInfo.decode(r.body))

    def wipe_write_perm(self, broker_name: str) -> defer.Deferred:
        """Fires with the number of topics whose write permission was removed."""
        d = self.call(self._req(RequestCode.WIPE_WRITE_PERM_OF_BROKER, WipeWritePermOfBrokerRequestHeader(broker_name)))
        return d.addCallback(lambda r: int(r.ext("wipeTopicCount", "0")))

    def add_write_perm(self, broker_name: str) -> defer.Deferred:
        d = self.call(self._req(RequestCode.ADD_WRITE_PERM_OF_BROKER, AddWritePermOfBrokerRequestHeader(broker_name)))
        return d.addCallback(lambda r: int(r.ext("addTopicCount", "0")))

    # ------------------------------------------------------------------ topics

    def get_route_info(self, topic: str, *, version: int | None = None) -> defer.Deferred:
        """Fires with the TopicRouteData, or fails with MQResponseError code 17 for an unknown topic.

        ``version`` overrides the request's version (e.g. 317, as the Go client sends, for the legacy form).
        """
        cmd = self._req(RequestCode.GET_ROUTEINFO_BY_TOPIC, GetRouteInfoRequestHeader(topic))
        if version is not None:
            cmd.version = version
        return self.call(cmd).addCallback(lambda r: TopicRouteData.decode(r.body))

    def get_all_topics(self) -> defer.Deferred:
        d = self.call(self._req(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        return d.addCallback(lambda r: TopicList.decode(r.body).topic_list)

    def get_topics_by_cluster(self, cluster: str) -> defer.Deferred:
        d = self.call(self._req(RequestCode.GET_TOPICS_BY_CLUSTER, GetTopicsByClusterRequestHeader(cluster)))
        return d.addCallback(lambda r: TopicList.decode(r.body).topic_list)

    def get_system_topics(self) -> defer.Deferred:
        d = self.call(self._req(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS))
        return d.addCallback(lambda r: TopicList.decode(r.body))

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> defer.Deferred:
        header = DeleteTopicFromNamesrvRequestHeader(topic, cluster_name)
        return self.call(self._req(RequestCode.DELETE_TOPIC_IN_NAMESRV, header)).addCallback(lambda _: None)

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> defer.Deferred:
        body = TopicRouteData(queue_datas=list(queue_datas)).encode()
        cmd = self._req(RequestCode.REGISTER_TOPIC_IN_NAMESRV, RegisterTopicRequestHeader(topic), body)
        return self.call(cmd).addCallback(lambda _: None)

    # ------------------------------------------------------------------ KV config

    def put_kv(self, namespace: str, key: str, value: str) -> defer.Deferred:
        header = PutKVConfigRequestHeader(namespace, key, value)
        return self.call(self._req(RequestCode.PUT_KV_CONFIG, header)).addCallback(lambda _: None)

    def get_kv(self, namespace: str, key: str) -> defer.Deferred:
        """Fires with the value, or None when the name server has no such item."""
        cmd = self._req(RequestCode.GET_KV_CONFIG, GetKVConfigRequestHeader(namespace, key))
        d = self.call(cmd, ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)
        return d.addCallback(lambda r: r.ext("value") if r.code == ResponseCode.SUCCESS else None)

    def delete_kv(self, namespace: str, key: str) -> defer.Deferred:
        header = DeleteKVConfigRequestHeader(namespace, key)
        return self.call(self._req(RequestCode.DELETE_KV_CONFIG, header)).addCallback(lambda _: None)

    def get_kv_list(self, namespace: str) -> defer.Deferred:
        """Fires with the namespace's items as a dict, or None when the namespace does not exist."""
        cmd = self._req(RequestCode.GET_KVLIST_BY_NAMESPACE, GetKVListByNamespaceRequestHeader(namespace))
        d = self.call(cmd, ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)
        return d.addCallback(lambda r: KVTable.decode(r.body).table if r.code == ResponseCode.SUCCESS else None)

    # ------------------------------------------------------------------ name server config

    def get_namesrv_config(self) -> defer.Deferred:
        d = self.call(self._req(RequestCode.GET_NAMESRV_CONFIG))
        return d.addCallback(lambda r: parse_properties(r.body.decode()) if r.body else {})

    def update_namesrv_config(self, settings: Mapping[str, Any]) -> defer.Deferred:
        text = "".join(f"{k}={_prop(v)}\n" for k, v in settings.items())
        cmd = self._req(RequestCode.UPDATE_NAMESRV_CONFIG, None, text.encode())
        return self.call(cmd).addCallback(lambda _: None)


def _prop(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)
