"""The route registry: which brokers are alive and which topics they serve (Apache's RouteInfoManager).

Pure state and rules, no I/O: time comes from an injected clock and channels are opaque tokens, so the
expiry and re-registration rules can be tested with a fake clock. The request processor maps codes to
these calls; the service closes the channels of brokers this module reports expired.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ferrymq.wire.bodies import (
    BrokerData,
    ClusterInfo,
    DataVersion,
    QueueData,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicRouteData,
)
from ferrymq.wire.codes import Perm

_WRITE = int(Perm.WRITE)
_READ_WRITE = int(Perm.READ | Perm.WRITE)

log = logging.getLogger("ferrymq.namesrv")

MASTER_ID = 0
#: Apache's DEFAULT_BROKER_CHANNEL_EXPIRED_TIME: a broker silent this long (ms) is dropped.
DEFAULT_BROKER_EXPIRED_MS = 120_000
#: Topics whose route is read by brokers in acting-master mode (TopicValidator.SYNC_BROKER_MEMBER_GROUP_PREFIX).
SYNC_BROKER_MEMBER_GROUP_PREFIX = "rmq_sys_SYNC_BROKER_MEMBER_"
# TopicSysFlag bits
FLAG_UNIT = 0x1
FLAG_UNIT_SUB = 0x2


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(frozen=True, slots=True)
class BrokerAddrInfo:
    """A broker instance is identified by cluster and address (the same address may serve two clusters)."""

    cluster_name: str
    broker_addr: str


@dataclass(slots=True)
class BrokerLiveInfo:
    last_update_ms: int
    heartbeat_timeout_ms: int
    data_version: DataVersion
    channel: Any
    ha_server_addr: str | None


@dataclass(slots=True)
class RegisterBrokerResult:
    """What REGISTER_BROKER answers a slave: where its master replicates from."""

    ha_server_addr: str | None = None
    master_addr: str | None = None


@dataclass(slots=True)
class ExpiredBroker:
    addr: BrokerAddrInfo
    channel: Any
    timeout_ms: int


@dataclass(slots=True)
class RouteRegistry:
    """Brokers, clusters, topic queues. Methods mirror Apache's so its behaviour can be checked 1:1."""

    support_acting_master: bool = False
    delete_topic_with_broker_registration: bool = False
    default_expired_ms: int = DEFAULT_BROKER_EXPIRED_MS
    now: Callable[[], int] = _now_ms
    topic_queue_table: dict[str, dict[str, QueueData]] = field(default_factory=dict)
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    # cluster -> broker names; a dict used as an insertion-ordered set
    cluster_addr_table: dict[str, dict[str, None]] = field(default_factory=dict)
    broker_live_table: dict[BrokerAddrInfo, BrokerLiveInfo] = field(default_factory=dict)
    filter_server_table: dict[BrokerAddrInfo, list[str]] = field(default_factory=dict)
    topic_queue_mapping_info_table: dict[str, dict[str, Any]] = field(default_factory=dict)

    # ------------------------------------------------------------------ registration

    def register_broker(
        self,
        cluster_name: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_server_addr: str | None,
        *,
        zone_name: str | None = None,
        timeout_ms: int | None = None,
        enable_acting_master: bool | None = None,
        topic_config_wrapper: TopicConfigSerializeWrapper | None = None,
        filter_server_list: list[str] | None = None,
        channel: Any = None,
    ) -> RegisterBrokerResult | None:
        """Record (or refresh) a broker and, for a master, its topics.

        Returns None when Apache refuses: a broker id registering for the first time with exactly one
        topic (a single-topic registration must follow a full one).
        """
        result = RegisterBrokerResult()
        wrapper = topic_config_wrapper if topic_config_wrapper is not None else TopicConfigSerializeWrapper()
        self.cluster_addr_table.setdefault(cluster_name, {})[broker_name] = None

        register_first = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            register_first = True
            broker_data = BrokerData(cluster=cluster_name, broker_name=broker_name, broker_addrs={})
            self.broker_addr_table[broker_name] = broker_data
        old_version_broker = enable_acting_master is None
        broker_data.enable_acting_master = bool(not old_version_broker and enable_acting_master)
        broker_data.zone_name = zone_name
        addrs = broker_data.broker_addrs

        # A slave promoted to master re-registers the same address under id 0: one id per address.
        for bid in [bid for bid, addr in addrs.items() if addr == broker_addr and bid != broker_id]:
            del addrs[bid]

        old_addr = addrs.get(broker_id)
        if old_addr is not None and old_addr != broker_addr:
            old_live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, old_addr))
            if old_live is not None and old_live.data_version.state_version > wrapper.data_version.state_version:
                log.warning(
                    "broker %s id %s at %s conflicts with %s registered with a newer state version; ignored",
                    broker_name, broker_id, broker_addr, old_addr,
                )
                self.broker_live_table.pop(BrokerAddrInfo(cluster_name, broker_addr), None)
                return result

        if broker_id not in addrs and len(wrapper.topic_config_table) == 1:
            log.warning(
                "broker %s id %s at %s sent a single-topic registration before registering fully; refused",
                broker_name, broker_id, broker_addr,
            )
            return None

        addrs[broker_id] = broker_addr
        register_first = register_first or not old_addr
        is_master = broker_id == MASTER_ID
        is_prime_slave = not old_version_broker and not is_master and broker_id == min(addrs)

        if is_master or is_prime_slave:
            table = wrapper.topic_config_table
            mappings = wrapper.topic_queue_mapping_info_map or {}
            if self.delete_topic_with_broker_registration and not mappings:
                for topic in self._topics_of_broker(broker_name) - set(table):
                    self._remove_queue_data(topic, broker_name)
            changed = self.is_broker_topic_config_changed(cluster_name, broker_addr, wrapper.data_version)
            for config in table.values():
                if register_first or changed or self._topic_missing_broker(config.topic_name, broker_name):
                    perm = int(config.perm)
                    if is_prime_slave and broker_data.enable_acting_master:
                        perm &= ~_WRITE
                    self._create_or_update_queue_data(broker_name, config, int(perm))
            if changed or register_first:
                for topic, info in mappings.items():
                    bname = info.get("bname", broker_name) if isinstance(info, dict) else broker_name
                    self.topic_queue_mapping_info_table.setdefault(topic, {})[bname] = info

        key = BrokerAddrInfo(cluster_name, broker_addr)
        previous = self.broker_live_table.get(key)
        self.broker_live_table[key] = BrokerLiveInfo(
            last_update_ms=self.now(),
            heartbeat_timeout_ms=self.default_expired_ms if timeout_ms is None else timeout_ms,
            data_version=wrapper.data_version,
            channel=channel,
            ha_server_addr=ha_server_addr,
        )
        if previous is None:
            log.info(
                "broker registered: %s id %s at %s in cluster %s (%d topics)",
                broker_name, broker_id, broker_addr, cluster_name, len(wrapper.topic_config_table),
            )
        if filter_server_list is not None:
            if filter_server_list:
                self.filter_server_table[key] = list(filter_server_list)
            else:
                self.filter_server_table.pop(key, None)

        if broker_id != MASTER_ID:
            master_addr = addrs.get(MASTER_ID)
            if master_addr is not None:
                master_live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, master_addr))
                if master_live is not None:
                    result.ha_server_addr = master_live.ha_server_addr
                    result.master_addr = master_addr
        return result

    def _topics_of_broker(self, broker_name: str) -> set[str]:
        return {topic for topic, qds in self.topic_queue_table.items() if broker_name in qds}

    def _topic_missing_broker(self, topic: str | None, broker_name: str) -> bool:
        qds = self.topic_queue_table.get(topic or "")
        return not qds or broker_name not in qds

    def _remove_queue_data(self, topic: str, broker_name: str) -> None:
        qds = self.topic_queue_table.get(topic)
        if qds is None:
            return
        qds.pop(broker_name, None)
        if not qds:
            del self.topic_queue_table[topic]
            log.info("topic %s removed: no broker serves it any more", topic)

    def _create_or_update_queue_data(self, broker_name: str, config: TopicConfig, perm: int) -> None:
        qd = QueueData(
            broker_name=broker_name,
            read_queue_nums=config.read_queue_nums,
            write_queue_nums=config.write_queue_nums,
            perm=perm,
            topic_sys_flag=config.topic_sys_flag,
        )
        topic = config.topic_name or ""
        qds = self.topic_queue_table.get(topic)
        if qds is None:
            self.topic_queue_table[topic] = {broker_name: qd}
            log.info("new topic registered: %s on %s", topic, broker_name)
        elif qds.get(broker_name) != qd:
            qds[broker_name] = qd

    def is_broker_topic_config_changed(self, cluster_name: str, broker_addr: str, version: DataVersion) -> bool:
        prev = self.query_broker_topic_config(cluster_name, broker_addr)
        return prev is None or prev != version

    def query_broker_topic_config(self, cluster_name: str, broker_addr: str) -> DataVersion | None:
        live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))
        return live.data_version if live is not None else None

    def update_broker_info_update_timestamp(self, cluster_name: str, broker_addr: str) -> None:
        live = self.broker_live_table.get(BrokerAddrInfo(cluster_name, broker_addr))
        if live is not None:
            live.last_update_ms = self.now()

    # ------------------------------------------------------------------ unregistration and expiry

    def unregister_broker(self, cluster_name: str, broker_addr: str, broker_name: str, broker_id: int) -> None:
        self.unregister_brokers([(cluster_name, broker_addr, broker_name, broker_id)])

    def unregister_brokers(self, requests: Iterable[tuple[str, str, str, int]]) -> None:
        removed: set[str] = set()
        reduced: set[str] = set()
        for cluster_name, broker_addr, broker_name, _broker_id in requests:
            key = BrokerAddrInfo(cluster_name, broker_addr)
            live = self.broker_live_table.pop(key, None)
            self.filter_server_table.pop(key, None)
            remove_name = False
            broker_data = self.broker_addr_table.get(broker_name)
            if broker_data is not None:
                for bid in [b for b, a in broker_data.broker_addrs.items() if a == broker_addr]:
                    del broker_data.broker_addrs[bid]
                if not broker_data.broker_addrs:
                    del self.broker_addr_table[broker_name]
                    remove_name = True
            if live is not None or remove_name:
                log.info("broker unregistered: %s at %s in cluster %s", broker_name, broker_addr, cluster_name)
            if remove_name:
                names = self.cluster_addr_table.get(cluster_name)
                if names is not None:
                    names.pop(broker_name, None)
                    if not names:
                        del self.cluster_addr_table[cluster_name]
                removed.add(broker_name)
            else:
                reduced.add(broker_name)
        self._clean_topics(removed, reduced)

    def _clean_topics(self, removed: set[str], reduced: set[str]) -> None:
        for topic in list(self.topic_queue_table):
            qds = self.topic_queue_table[topic]
            for name in removed:
                qds.pop(name, None)
            if not qds:
                del self.topic_queue_table[topic]
                continue
            for name in reduced:
                qd = qds.get(name)
                bd = self.broker_addr_table.get(name)
                if qd is not None and bd is not None and bd.enable_acting_master and self._no_master(name):
                    qd.perm = int(qd.perm) & ~_WRITE

    def _no_master(self, broker_name: str) -> bool:
        bd = self.broker_addr_table.get(broker_name)
        return bd is None or not bd.broker_addrs or min(bd.broker_addrs) > 0

    def scan_not_active_brokers(self) -> list[ExpiredBroker]:
        """Unregister every broker whose last registration is older than its timeout; return them so the
        caller can close their channels (Apache closes them too)."""
        now = self.now()
        expired = [
            ExpiredBroker(key, live.channel, live.heartbeat_timeout_ms)
            for key, live in self.broker_live_table.items()
            if live.last_update_ms + live.heartbeat_timeout_ms < now
        ]
        for item in expired:
            log.warning(
                "broker at %s in cluster %s expired: no registration for %d ms",
                item.addr.broker_addr, item.addr.cluster_name, item.timeout_ms,
            )
            self._unregister_by_addr(item.addr)
        return expired

    def on_channel_destroy(self, channel: Any) -> BrokerAddrInfo | None:
        """A connection closed: unregister the broker that registered through it, if any."""
        for key, live in self.broker_live_table.items():
            if live.channel is channel and channel is not None:
                log.info("connection of broker %s closed; unregistering it", key.broker_addr)
                self._unregister_by_addr(key)
                return key
        return None

    def _unregister_by_addr(self, key: BrokerAddrInfo) -> None:
        for bd in self.broker_addr_table.values():
            if bd.cluster != key.cluster_name:
                continue
            for bid, addr in bd.broker_addrs.items():
                if addr == key.broker_addr:
                    self.unregister_broker(key.cluster_name, key.broker_addr, bd.broker_name or "", bid)
                    return
        # Known as alive but in no broker table (e.g. a refused re-registration): just forget it.
        self.broker_live_table.pop(key, None)
        self.filter_server_table.pop(key, None)

    # ------------------------------------------------------------------ routes and listings

    def pickup_topic_route_data(self, topic: str) -> TopicRouteData | None:
        """The route of ``topic``, or None when no live broker serves it."""
        qds = self.topic_queue_table.get(topic)
        if not qds:
            return None
        route = TopicRouteData(queue_datas=[dataclasses.replace(qd) for qd in qds.values()])
        for name in qds:
            bd = self.broker_addr_table.get(name)
            if bd is None:
                continue
            clone = dataclasses.replace(bd, broker_addrs=dict(bd.broker_addrs))
            route.broker_datas.append(clone)
            if self.filter_server_table:
                for addr in clone.broker_addrs.values():
                    servers = self.filter_server_table.get(BrokerAddrInfo(clone.cluster or "", addr))
                    if servers is not None:
                        route.filter_server_table[addr] = list(servers)
        if not route.broker_datas:
            return None
        route.topic_queue_mapping_by_broker = self.topic_queue_mapping_info_table.get(topic)
        if self.support_acting_master and not topic.startswith(SYNC_BROKER_MEMBER_GROUP_PREFIX):
            self._apply_acting_master(route)
        return route

    def _apply_acting_master(self, route: TopicRouteData) -> None:
        if not any(bd.broker_addrs and MASTER_ID not in bd.broker_addrs for bd in route.broker_datas):
            return
        for bd in route.broker_datas:
            addrs = bd.broker_addrs
            if not addrs or MASTER_ID in addrs or not bd.enable_acting_master:
                continue
            for qd in route.queue_datas:
                if qd.broker_name == bd.broker_name:
                    if not int(qd.perm) & _WRITE:
                        addrs[MASTER_ID] = addrs.pop(min(addrs))
                    break

    def get_all_cluster_info(self) -> ClusterInfo:
        return ClusterInfo(
            broker_addr_table=dict(self.broker_addr_table),
            cluster_addr_table={c: list(names) for c, names in self.cluster_addr_table.items()},
        )

    def get_all_topic_list(self) -> TopicList:
        return TopicList(topic_list=list(self.topic_queue_table))

    def get_topics_by_cluster(self, cluster: str) -> TopicList:
        topics: list[str] = []
        for name in self.cluster_addr_table.get(cluster, {}):
            topics.extend(t for t, qds in self.topic_queue_table.items() if name in qds and t not in topics)
        return TopicList(topic_list=topics)

    def get_system_topic_list(self) -> TopicList:
        """Apache lists cluster and broker names here (they double as system topics), plus one address."""
        topics: list[str] = []
        for cluster, names in self.cluster_addr_table.items():
            topics.append(cluster)
            topics.extend(names)
        broker_addr = None
        for bd in self.broker_addr_table.values():
            if bd.broker_addrs:
                broker_addr = next(iter(bd.broker_addrs.values()))
                break
        return TopicList(topic_list=list(dict.fromkeys(topics)), broker_addr=broker_addr)

    def _topics_with_flag(self, want: Callable[[int], bool]) -> TopicList:
        return TopicList(
            topic_list=[
                t for t, qds in self.topic_queue_table.items() if qds and want(next(iter(qds.values())).topic_sys_flag)
            ]
        )

    def get_unit_topics(self) -> TopicList:
        return self._topics_with_flag(lambda f: bool(f & FLAG_UNIT))

    def get_has_unit_sub_topic_list(self) -> TopicList:
        return self._topics_with_flag(lambda f: bool(f & FLAG_UNIT_SUB))

    def get_has_unit_sub_ununit_topic_list(self) -> TopicList:
        return self._topics_with_flag(lambda f: not f & FLAG_UNIT and bool(f & FLAG_UNIT_SUB))

    def get_broker_member_group(self, cluster_name: str, broker_name: str) -> dict[str, Any]:
        bd = self.broker_addr_table.get(broker_name)
        return {
            "brokerAddrs": dict(bd.broker_addrs) if bd is not None else {},
            "brokerName": broker_name,
            "cluster": cluster_name,
        }

    # ------------------------------------------------------------------ admin changes

    def delete_topic(self, topic: str, cluster_name: str | None = None) -> None:
        if not cluster_name:
            if self.topic_queue_table.pop(topic, None) is not None:
                log.info("topic %s deleted", topic)
            return
        for name in self.cluster_addr_table.get(cluster_name, {}):
            self._remove_queue_data(topic, name)

    def register_topic(self, topic: str, queue_datas: list[QueueData]) -> bool:
        """Add queue data for ``topic`` (REGISTER_TOPIC_IN_NAMESRV); refused if a broker is unknown."""
        if not queue_datas:
            return False
        if any(qd.broker_name not in self.broker_addr_table for qd in queue_datas):
            log.warning("register topic %s names a broker that is not registered; ignored", topic)
            return False
        qds = self.topic_queue_table.setdefault(topic, {})
        for qd in queue_datas:
            qds[qd.broker_name or ""] = qd
        return True

    def wipe_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, wipe=True)

    def add_write_perm_of_broker(self, broker_name: str) -> int:
        return self._operate_write_perm(broker_name, wipe=False)

    def _operate_write_perm(self, broker_name: str, *, wipe: bool) -> int:
        count = 0
        for qds in self.topic_queue_table.values():
            qd = qds.get(broker_name)
            if qd is None:
                continue
            qd.perm = int(qd.perm) & ~_WRITE if wipe else _READ_WRITE
            count += 1
        log.info("%s write permission of broker %s on %d topics", "wiped" if wipe else "added", broker_name, count)
        return count
