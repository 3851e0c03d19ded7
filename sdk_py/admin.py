"""Name-server admin calls (what mqadmin sends to a name server), Deferred-based.

Each method builds the request from the typed header in ``wire.headers``, sends it through the
shared :class:`RemotingClient` and turns the answer into typed bodies; an unexpected response code
raises :class:`MQResponseError` with the server's code and remark.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from twisted.internet import defer

from ferrymq.wire.bodies import (
    ClusterInfo,
    KVTable,
    QueueData,
    TopicList,
    TopicRouteData,
)
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.properties import parse_properties
from ferrymq.wire.headers import (
    AddWritePermOfBrokerRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetKVConfigRequestHeader,
    GetKVListByNamespaceRequestHeader,
    GetRouteInfoRequestHeader,
    GetTopicsByClusterRequestHeader,
    PutKVConfigRequestHeader,
    RegisterTopicRequestHeader,
    WipeWritePermOfBrokerRequestHeader,
)

from ferrymq.remoting import RemotingClient

DEFAULT_TIMEOUT = 3.0


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
        return self.client.call(self.addr, cmd, self.timeout, accept or (ResponseCode.SUCCESS,), operation)

    def _req(self, code: int, header: Any = None, body: bytes = b"") -> RemotingCommand:
        return request(code, header.to_ext() if header is not None else None, body)

    # ------------------------------------------------------------------ brokers

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
