"""RouteRegistry rules (Apache RouteInfoManager behaviour) with a fake clock, no sockets."""

from __future__ import annotations

import pytest

from ferrymq.server.namesrv.registry import RouteRegistry
from ferrymq.wire.bodies import DataVersion, QueueData, TopicConfig, TopicConfigSerializeWrapper


class Clock:
    def __init__(self, ms: int = 1_000_000):
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


def wrapper(*topics: tuple[str, int, int, int], counter: int = 1, state: int = 0) -> TopicConfigSerializeWrapper:
    table = {name: TopicConfig(name, r, w, perm) for name, r, w, perm in topics}
    return TopicConfigSerializeWrapper(table, DataVersion(counter=counter, state_version=state, timestamp=counter))


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def reg(clock):
    return RouteRegistry(now=clock)


def register(reg, name="broker-a", addr="10.0.0.1:10911", bid=0, cluster="C1", topics=None, **kw):
    topics = topics if topics is not None else wrapper(("T1", 4, 4, 6), ("T2", 8, 8, 6))
    return reg.register_broker(cluster, addr, name, bid, addr.replace("10911", "10912"), topic_config_wrapper=topics, **kw)


def test_register_master_creates_routes_and_cluster(reg):
    assert register(reg) is not None
    route = reg.pickup_topic_route_data("T1")
    assert [(q.broker_name, q.read_queue_nums, q.write_queue_nums, q.perm) for q in route.queue_datas] == [
        ("broker-a", 4, 4, 6)
    ]
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}
    assert route.broker_datas[0].cluster == "C1"
    info = reg.get_all_cluster_info()
    assert info.cluster_addr_table == {"C1": ["broker-a"]}
    assert sorted(reg.get_all_topic_list().topic_list) == ["T1", "T2"]
    assert reg.get_topics_by_cluster("C1").topic_list == ["T1", "T2"]
    assert reg.pickup_topic_route_data("nope") is None


def test_slave_gets_master_ha_address_and_does_not_define_topics(reg):
    register(reg)
    slave = register(reg, addr="10.0.0.2:10911", bid=1, topics=wrapper(("ONLY_SLAVE", 1, 1, 6), ("X", 1, 1, 6)))
    assert (slave.master_addr, slave.ha_server_addr) == ("10.0.0.1:10911", "10.0.0.1:10912")
    assert reg.pickup_topic_route_data("ONLY_SLAVE") is None  # only masters (or prime slaves) register topics
    assert reg.pickup_topic_route_data("T1").broker_datas[0].broker_addrs == {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}


def test_first_registration_with_single_topic_is_refused(reg):
    assert register(reg, topics=wrapper(("T1", 4, 4, 6))) is None
    assert reg.get_all_topic_list().topic_list == []


def test_reregistration_with_unchanged_version_keeps_queue_data(reg):
    register(reg)
    # Same data version, different content: Apache skips re-reading topics already routed to this broker.
    register(reg, topics=wrapper(("T1", 16, 16, 6), ("T2", 8, 8, 6)))
    assert reg.pickup_topic_route_data("T1").queue_datas[0].read_queue_nums == 4
    register(reg, topics=wrapper(("T1", 16, 16, 6), ("T2", 8, 8, 6), counter=2))
    assert reg.pickup_topic_route_data("T1").queue_datas[0].read_queue_nums == 16


def test_expiry_uses_last_registration_and_timeout(reg, clock):
    register(reg)
    register(reg, name="broker-b", addr="10.0.0.3:10911", timeout_ms=5_000)
    clock.ms += 6_000
    expired = reg.scan_not_active_brokers()
    assert [e.addr.broker_addr for e in expired] == ["10.0.0.3:10911"]
    assert "broker-b" not in reg.broker_addr_table
    clock.ms += 100_000
    register(reg)  # re-registration refreshes the timestamp
    clock.ms += 100_000
    assert reg.scan_not_active_brokers() == []
    clock.ms += 20_001
    assert [e.addr.broker_addr for e in reg.scan_not_active_brokers()] == ["10.0.0.1:10911"]
    assert reg.get_all_topic_list().topic_list == []
    assert reg.get_all_cluster_info().cluster_addr_table == {}


def test_broker_heartbeat_refreshes_timestamp(reg, clock):
    register(reg)
    clock.ms += 100_000
    reg.update_broker_info_update_timestamp("C1", "10.0.0.1:10911")
    clock.ms += 100_000
    assert reg.scan_not_active_brokers() == []


def test_channel_close_unregisters_only_that_broker(reg):
    chan_a, chan_b = object(), object()
    register(reg, channel=chan_a)
    register(reg, name="broker-b", addr="10.0.0.3:10911", channel=chan_b)
    assert reg.on_channel_destroy(chan_a).broker_addr == "10.0.0.1:10911"
    route = reg.pickup_topic_route_data("T1")
    assert [b.broker_name for b in route.broker_datas] == ["broker-b"]
    assert reg.on_channel_destroy(object()) is None


def test_unregister_removes_broker_and_orphan_topics(reg):
    register(reg)
    register(reg, addr="10.0.0.2:10911", bid=1)
    reg.unregister_broker("C1", "10.0.0.1:10911", "broker-a", 0)
    assert reg.pickup_topic_route_data("T1").broker_datas[0].broker_addrs == {1: "10.0.0.2:10911"}
    reg.unregister_broker("C1", "10.0.0.2:10911", "broker-a", 1)
    assert reg.pickup_topic_route_data("T1") is None
    assert reg.get_all_cluster_info().broker_addr_table == {}


def test_wipe_and_add_write_perm(reg):
    register(reg)
    register(reg, name="broker-b", addr="10.0.0.3:10911", topics=wrapper(("T1", 4, 4, 6), ("T3", 1, 1, 6)))
    assert reg.wipe_write_perm_of_broker("broker-a") == 2
    perms = {q.broker_name: q.perm for q in reg.pickup_topic_route_data("T1").queue_datas}
    assert perms == {"broker-a": 4, "broker-b": 6}
    assert reg.add_write_perm_of_broker("broker-a") == 2
    assert {q.broker_name: q.perm for q in reg.pickup_topic_route_data("T1").queue_datas}["broker-a"] == 6
    assert reg.wipe_write_perm_of_broker("nobody") == 0


def test_delete_topic_everywhere_or_in_one_cluster(reg):
    register(reg)
    register(reg, name="broker-x", addr="10.0.0.9:10911", cluster="C2")
    reg.delete_topic("T1", "C2")
    assert [q.broker_name for q in reg.pickup_topic_route_data("T1").queue_datas] == ["broker-a"]
    reg.delete_topic("T1")
    assert reg.pickup_topic_route_data("T1") is None
    assert reg.pickup_topic_route_data("T2") is not None


def test_register_topic_requires_known_brokers(reg):
    register(reg)
    assert not reg.register_topic("NEW", [QueueData("ghost", 1, 1, 6, 0)])
    assert reg.register_topic("NEW", [QueueData("broker-a", 2, 2, 6, 0)])
    assert reg.pickup_topic_route_data("NEW").queue_datas[0].read_queue_nums == 2


def test_route_json_standard_and_legacy(reg):
    register(reg)
    route = reg.pickup_topic_route_data("T1")
    assert b'"brokerAddrs":{"0":"10.0.0.1:10911"}' in route.encode(standard_json=True)
    assert b'"brokerAddrs":{0:"10.0.0.1:10911"}' in route.encode(standard_json=False)
    assert b" " not in route.encode(standard_json=False)


def test_system_topic_list_lists_cluster_and_broker_names(reg):
    register(reg)
    lst = reg.get_system_topic_list()
    assert lst.topic_list == ["C1", "broker-a"]
    assert lst.broker_addr == "10.0.0.1:10911"


def test_stale_state_version_registration_is_ignored(reg):
    register(reg, topics=wrapper(("T1", 4, 4, 6), ("T2", 8, 8, 6), state=5))
    # Another address claiming the same broker id with an older state version loses.
    register(reg, addr="10.0.0.7:10911", topics=wrapper(("T1", 4, 4, 6), ("T2", 8, 8, 6), state=1))
    assert reg.pickup_topic_route_data("T1").broker_datas[0].broker_addrs == {0: "10.0.0.1:10911"}


def test_acting_master_route_when_master_gone():
    clock = Clock()
    reg = RouteRegistry(now=clock, support_acting_master=True)
    register(reg, enable_acting_master=True)
    register(reg, addr="10.0.0.2:10911", bid=1, enable_acting_master=True)
    reg.unregister_broker("C1", "10.0.0.1:10911", "broker-a", 0)
    route = reg.pickup_topic_route_data("T1")
    assert route.queue_datas[0].perm == 4  # write wiped once no master is left
    assert route.broker_datas[0].broker_addrs == {0: "10.0.0.2:10911"}  # slave acts as master for reads
