"""Name-server request processor: request code -> typed header -> registry/KV call -> response or Refusal.

Answers, codes and remarks follow Apache's DefaultRequestProcessor and ClientRequestProcessor so that
mqadmin and the brokers see what they expect (e.g. TOPIC_NOT_EXIST's remark, QUERY_NOT_FOUND for a
missing KV item, SYSTEM_ERROR "crc32 not match").
"""

from __future__ import annotations

import dataclasses
import logging
import zlib
from collections.abc import Callable
from typing import Any

from ferrymq.server.config import ConfigError, NamesrvConfig, NettyServerConfig, from_properties, to_properties
from ferrymq.remoting import Channel, handles
from ferrymq.wire import fastjson
from ferrymq.wire.bodies import DataVersion, RegisterBrokerBody, TopicConfigSerializeWrapper, TopicRouteData
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.properties import PropertiesError, parse_properties
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.errors import BodyError, Refusal
from ferrymq.wire.headers import (
    AddWritePermOfBrokerRequestHeader,
    BrokerHeartbeatRequestHeader,
    DeleteKVConfigRequestHeader,
    DeleteTopicFromNamesrvRequestHeader,
    GetBrokerMemberGroupRequestHeader,
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

from .kvconfig import NAMESPACE_ORDER_TOPIC_CONFIG, KVConfigStore
from .registry import RouteRegistry

log = logging.getLogger("ferrymq.namesrv")

#: Requesters at or above this version (V4_9_4) get the route with quoted broker ids.
STANDARD_JSON_MIN_VERSION = 401
#: Brokers older than V3_0_11 sent a bare TopicConfigSerializeWrapper as the REGISTER_BROKER body.
REGISTER_BODY_MIN_VERSION = 37
FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
ZONE_NAME_KEY = "__ZONE_NAME"


def body_crc32(body: bytes) -> int:
    """Apache's UtilAll.crc32: CRC-32 masked to a non-negative int."""
    return zlib.crc32(body) & 0x7FFFFFFF


def topic_not_exist_remark(topic: str) -> str:
    return f"No topic route info in name server for the topic: {topic}\nSee {FAQ_URL} for further details."


class NamesrvProcessor:
    """Holds the registry, the KV store and the live config; ``routes([processor])`` is the transport's table."""

    def __init__(
        self,
        registry: RouteRegistry,
        kv: KVConfigStore,
        config: NamesrvConfig,
        netty: NettyServerConfig | None = None,
        persist_config: Callable[[str, bytes], object] | None = None,
        clock_ms: Callable[[], int] | None = None,
    ):
        self.registry = registry
        self.kv = kv
        self.config = config
        self.netty = netty or NettyServerConfig()
        self.persist_config = persist_config
        self.clock_ms = clock_ms or registry.now
        self.started_ms = self.clock_ms()

    # ------------------------------------------------------------------ routes

    @handles(RequestCode.GET_ROUTEINFO_BY_TOPIC)
    def get_route_info_by_topic(self, cmd: RemotingCommand, 
                                channel: Channel, header: GetRouteInfoRequestHeader) -> RemotingCommand:
        if self.config.needWaitForService and self.clock_ms() - self.started_ms < self.config.waitSecondsForService * 1000:
            raise Refusal(ResponseCode.SYSTEM_ERROR, "name server not ready")
        route = self.registry.pickup_topic_route_data(header.topic)
        if route is None:
            raise Refusal(ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark(header.topic))
        if self.config.orderMessageEnable:
            route.order_topic_conf = self.kv.get(NAMESPACE_ORDER_TOPIC_CONFIG, header.topic)
        standard = cmd.version >= STANDARD_JSON_MIN_VERSION or bool(header.accept_standard_json_only)
        return cmd.response(body=route.encode(standard_json=standard))

    @handles(RequestCode.GET_BROKER_CLUSTER_INFO)
    def get_broker_cluster_info(self, cmd: RemotingCommand, channel: Channel, _header: None) -> RemotingCommand:
        return cmd.response(body=self.registry.get_all_cluster_info().encode())

    @handles(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER)
    def get_all_topic_list(self, cmd: RemotingCommand, channel: Channel, _header: None) -> RemotingCommand:
        if not self.config.enableAllTopicList:
            raise Refusal(ResponseCode.SYSTEM_ERROR, "disable")
        return cmd.response(body=self.registry.get_all_topic_list().encode())

    @handles(RequestCode.GET_TOPICS_BY_CLUSTER, header=False)
    def get_topics_by_cluster(self, cmd: RemotingCommand, channel: Channel, _header: None) -> RemotingCommand:
        if not self.config.enableTopicList:
            raise Refusal(ResponseCode.SYSTEM_ERROR, "disable")
        # Apache checks the switch before it reads the header: a disabled list answers "disable" either way.
        header = GetTopicsByClusterRequestHeader.from_ext(cmd.ext_fields)
        return cmd.response(body=self.registry.get_topics_by_cluster(header.cluster).encode())

    @handles(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
    def get_system_topic_list(self, cmd: RemotingCommand, channel: Channel, _header: None) -> RemotingCommand:
        return cmd.response(body=self.registry.get_system_topic_list().encode())

    @handles(RequestCode.GET_UNIT_TOPIC_LIST)
    def get_unit_topic_list(self, cmd: RemotingCommand, channel: Channel, _header: None) -> RemotingCommand:
        return self._topic_list(cmd, self.registry.get_unit_topics)

    @handles(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST)
    def get_has_unit_sub_topic_list(self, cmd: RemotingCommand, channel: Channel, _header: None) -> RemotingCommand:
        return self._topic_list(cmd, self.registry.get_has_unit_sub_topic_list)

    @handles(RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST)
    def get_has_unit_sub_ununit_topic_list(self, cmd: RemotingCommand, 
                                           channel: Channel, _header: None) -> RemotingCommand:
        return self._topic_list(cmd, self.registry.get_has_unit_sub_ununit_topic_list)

    def _topic_list(self, cmd: RemotingCommand, op: Callable[[], Any]) -> RemotingCommand:
        if not self.config.enableTopicList:
            raise Refusal(ResponseCode.SYSTEM_ERROR, "disable")
        return cmd.response(body=op().encode())

    @handles(RequestCode.DELETE_TOPIC_IN_NAMESRV)
    def delete_topic(self, cmd: RemotingCommand, 
                     channel: Channel, header: DeleteTopicFromNamesrvRequestHeader) -> RemotingCommand:
        self.registry.delete_topic(header.topic, header.cluster_name)
        log.info("topic %s deleted from the name server by %s", header.topic, channel.remote_address)
        return cmd.response()

    @handles(RequestCode.REGISTER_TOPIC_IN_NAMESRV)
    def register_topic(self, cmd: RemotingCommand, 
                       channel: Channel, header: RegisterTopicRequestHeader) -> RemotingCommand:
        if cmd.body:
            route = TopicRouteData.decode(cmd.body)
            if route.queue_datas:
                self.registry.register_topic(header.topic, route.queue_datas)
        return cmd.response()

    # ------------------------------------------------------------------ brokers

    @handles(RequestCode.REGISTER_BROKER)
    def register_broker(self, cmd: RemotingCommand, 
                        channel: Channel, header: RegisterBrokerRequestHeader) -> RemotingCommand:
        body = cmd.body or b""
        if header.body_crc32 != 0 and body_crc32(body) != header.body_crc32:
            log.warning("REGISTER_BROKER from %s: body crc32 does not match its header", channel.remote_address)
            raise Refusal(ResponseCode.SYSTEM_ERROR, "crc32 not match")
        filter_servers: list[str] | None = None
        if not body:
            wrapper = TopicConfigSerializeWrapper(data_version=DataVersion(counter=0, state_version=0, timestamp=0))
        elif cmd.version >= REGISTER_BODY_MIN_VERSION:
            try:
                reg = RegisterBrokerBody.decode(body, compressed=header.compressed)
            except BodyError as exc:
                raise BodyError(f"Failed to decode RegisterBrokerBody: {exc}") from None
            wrapper = reg.topic_config_serialize_wrapper
            filter_servers = reg.filter_server_list
        else:
            wrapper = TopicConfigSerializeWrapper.decode(body)
        result = self.registry.register_broker(
            header.cluster_name,
            header.broker_addr,
            header.broker_name,
            header.broker_id,
            header.ha_server_addr,
            zone_name=cmd.ext(ZONE_NAME_KEY),
            timeout_ms=header.heartbeat_timeout_millis,
            enable_acting_master=header.enable_acting_master,
            topic_config_wrapper=wrapper,
            filter_server_list=filter_servers,
            channel=channel,
        )
        if result is None:
            raise Refusal(ResponseCode.SYSTEM_ERROR, "register broker failed")
        ext: dict[str, str] = {}
        if result.ha_server_addr is not None:
            ext["haServerAddr"] = result.ha_server_addr
        if result.master_addr is not None:
            ext["masterAddr"] = result.master_addr
        reply_body = b""
        if self.config.returnOrderTopicConfigToBroker:
            table = self.kv.list_namespace(NAMESPACE_ORDER_TOPIC_CONFIG)
            reply_body = table.encode() if table is not None else b""
        return cmd.response(ext_fields=ext, body=reply_body)

    @handles(RequestCode.UNREGISTER_BROKER)
    def unregister_broker(self, cmd: RemotingCommand, 
                          channel: Channel, h: UnRegisterBrokerRequestHeader) -> RemotingCommand:
        self.registry.unregister_broker(h.cluster_name, h.broker_addr, h.broker_name, h.broker_id)
        return cmd.response()

    @handles(RequestCode.BROKER_HEARTBEAT)
    def broker_heartbeat(self, cmd: RemotingCommand, 
                         channel: Channel, h: BrokerHeartbeatRequestHeader) -> RemotingCommand:
        self.registry.update_broker_info_update_timestamp(h.cluster_name, h.broker_addr)
        return cmd.response()

    @handles(RequestCode.QUERY_DATA_VERSION)
    def query_data_version(self, cmd: RemotingCommand, 
                           channel: Channel, h: QueryDataVersionRequestHeader) -> RemotingCommand:
        version = DataVersion.decode(cmd.body)
        changed = self.registry.is_broker_topic_config_changed(h.cluster_name, h.broker_addr, version)
        self.registry.update_broker_info_update_timestamp(h.cluster_name, h.broker_addr)
        current = self.registry.query_broker_topic_config(h.cluster_name, h.broker_addr)
        return cmd.response(
            ext_fields={"changed": "true" if changed else "false"},
            body=current.encode() if current is not None else b"",
        )

    @handles(RequestCode.GET_BROKER_MEMBER_GROUP)
    def get_broker_member_group(self, cmd: RemotingCommand, 
                                channel: Channel, h: GetBrokerMemberGroupRequestHeader) -> RemotingCommand:
        group = self.registry.get_broker_member_group(h.cluster_name, h.broker_name)
        return cmd.response(body=fastjson.dumps({"brokerMemberGroup": group}))

    @handles(RequestCode.WIPE_WRITE_PERM_OF_BROKER)
    def wipe_write_perm(self, cmd: RemotingCommand, 
                        channel: Channel, h: WipeWritePermOfBrokerRequestHeader) -> RemotingCommand:
        count = self.registry.wipe_write_perm_of_broker(h.broker_name)
        log.info("write permission of broker %s wiped by %s (%d topics)", h.broker_name, channel.remote_address, count)
        return cmd.response(ext_fields={"wipeTopicCount": str(count)})

    @handles(RequestCode.ADD_WRITE_PERM_OF_BROKER)
    def add_write_perm(self, cmd: RemotingCommand, 
                       channel: Channel, h: AddWritePermOfBrokerRequestHeader) -> RemotingCommand:
        count = self.registry.add_write_perm_of_broker(h.broker_name)
        log.info("write permission of broker %s added by %s (%d topics)", h.broker_name, channel.remote_address, count)
        return cmd.response(ext_fields={"addTopicCount": str(count)})

    # ------------------------------------------------------------------ KV config

    @handles(RequestCode.PUT_KV_CONFIG)
    def put_kv_config(self, cmd: RemotingCommand, channel: Channel, h: PutKVConfigRequestHeader) -> RemotingCommand:
        self.kv.put(h.namespace, h.key, h.value)
        return cmd.response()

    @handles(RequestCode.GET_KV_CONFIG)
    def get_kv_config(self, cmd: RemotingCommand, channel: Channel, h: GetKVConfigRequestHeader) -> RemotingCommand:
        value = self.kv.get(h.namespace, h.key)
        if value is None:
            raise Refusal(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace} Key: {h.key}")
        return cmd.response(ext_fields={"value": value})

    @handles(RequestCode.DELETE_KV_CONFIG)
    def delete_kv_config(self, cmd: RemotingCommand, 
                         channel: Channel, h: DeleteKVConfigRequestHeader) -> RemotingCommand:
        self.kv.delete(h.namespace, h.key)
        return cmd.response()

    @handles(RequestCode.GET_KVLIST_BY_NAMESPACE)
    def get_kv_list_by_namespace(self, cmd: RemotingCommand, 
                                 channel: Channel, h: GetKVListByNamespaceRequestHeader) -> RemotingCommand:
        table = self.kv.list_namespace(h.namespace)
        if table is None:
            raise Refusal(ResponseCode.QUERY_NOT_FOUND, f"No config item, Namespace: {h.namespace}")
        return cmd.response(body=table.encode())

    # ------------------------------------------------------------------ name server config

    def all_config_text(self) -> str:
        return to_properties(self.config) + "\n" + to_properties(self.netty) + "\n"

    @handles(RequestCode.GET_NAMESRV_CONFIG)
    def get_config(self, cmd: RemotingCommand, channel: Channel, _header: None) -> RemotingCommand:
        return cmd.response(body=self.all_config_text().encode())

    @handles(RequestCode.UPDATE_NAMESRV_CONFIG)
    def update_config(self, cmd: RemotingCommand, channel: Channel, _header: None) -> RemotingCommand:
        log.info("UPDATE_NAMESRV_CONFIG from %s", channel.remote_address)
        if not cmd.body:
            return cmd.response()
        try:
            props = parse_properties(cmd.body.decode("utf-8"), "UPDATE_NAMESRV_CONFIG body")
        except (UnicodeDecodeError, PropertiesError) as exc:
            raise Refusal(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}") from None
        blacklist = {k for k in self.config.configBlackList.split(";") if k}
        if blacklist & set(props):
            raise Refusal(ResponseCode.NO_PERMISSION, "Can not update config in black list.")
        try:
            updated = from_properties(type(self.config), props, **_fields_of(self.config))
        except ConfigError as exc:
            raise Refusal(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        for name in props:
            if hasattr(updated, name):
                setattr(self.config, name, getattr(updated, name))
        if self.persist_config is not None:
            self.persist_config(self.config.configStorePath, self.all_config_text().encode())
        return cmd.response()


def _fields_of(obj: Any) -> dict[str, Any]:
    return {f.name: getattr(obj, f.name) for f in dataclasses.fields(obj)}
