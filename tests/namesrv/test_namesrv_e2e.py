"""The name server over TCP, driven by the SDK admin client the way brokers and mqadmin drive it."""

from __future__ import annotations

import json
import time

import pytest

from ferrymq.sdk.errors import MQResponseError
from ferrymq.server.namesrv.kvconfig import NAMESPACE_ORDER_TOPIC_CONFIG
from ferrymq.wire.bodies import QueueData, TopicConfig
from ferrymq.wire.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from ferrymq.wire.command import request

from .conftest import PlayingBroker

TOPICS = [TopicConfig("TopicTest", 4, 4, 6), TopicConfig("TBW102", 8, 8, 7)]


def register_a(admin, **kw):
    return admin.register_broker("DefaultCluster", "127.0.0.1:10911", "broker-a", 0, "127.0.0.1:10912", TOPICS, **kw)


@pytest.mark.parametrize("compressed", [False, True])
def test_register_then_route_cluster_and_topic_list(admin, compressed):
    reply = register_a(admin, compressed=compressed)
    assert reply.master_addr is None and reply.order_topic_config == {}
    route = admin.get_route_info("TopicTest")
    assert route.broker_datas[0].broker_addrs == {0: "127.0.0.1:10911"}
    assert route.queue_datas[0].write_queue_nums == 4
    info = admin.get_cluster_info()
    assert info.cluster_addr_table == {"DefaultCluster": ["broker-a"]}
    assert sorted(admin.get_all_topics()) == ["TBW102", "TopicTest"]
    assert sorted(admin.get_topics_by_cluster("DefaultCluster")) == ["TBW102", "TopicTest"]


def test_unknown_topic_is_17_with_apache_remark(admin):
    with pytest.raises(MQResponseError) as info:
        admin.get_route_info("Nope")
    assert info.value.code == ResponseCode.TOPIC_NOT_EXIST
    assert info.value.remark.startswith("No topic route info in name server for the topic: Nope")


def test_route_body_form_follows_requester_version(rt, namesrv, admin):
    register_a(admin)
    from ferrymq.remoting import RemotingClient

    def fetch(version: int, stype: SerializeType, extra=None):
        client = RemotingClient()
        cmd = request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest", **(extra or {})}, serialize_type=stype)
        cmd.version, cmd.language = version, LanguageCode.GO
        d = client.invoke(f"127.0.0.1:{namesrv.port}", cmd, 3)
        return d.addBoth(lambda r: client.close().addCallback(lambda _: r))

    legacy = rt.call(fetch, 317, SerializeType.JSON)  # what the Go client sends
    assert b'"brokerAddrs":{0:"127.0.0.1:10911"}' in legacy.body
    standard = rt.call(fetch, 479, SerializeType.ROCKETMQ)
    assert standard.serialize_type == SerializeType.ROCKETMQ
    assert b'"brokerAddrs":{"0":"127.0.0.1:10911"}' in standard.body
    asked = rt.call(fetch, 317, SerializeType.JSON, {"acceptStandardJsonOnly": "true"})
    assert json.loads(asked.body)["brokerDatas"][0]["brokerAddrs"] == {"0": "127.0.0.1:10911"}


def test_crc_mismatch_is_refused(rt, namesrv, admin):
    from ferrymq.server.broker.namesrv_peer import NamesrvPeer
    from ferrymq.remoting import RemotingClient

    def tampered():
        a = NamesrvPeer(admin.addr, RemotingClient(), 3.0)
        send = a._call

        def tampered(cmd):
            cmd.ext_fields["bodyCrc32"] = "12345"
            return send(cmd)

        a._call = tampered
        d = a.register_broker("C", "127.0.0.1:1", "b", 0, "", TOPICS)
        return d.addBoth(lambda r: a.client.close().addCallback(lambda _: r))

    with pytest.raises(MQResponseError) as info:
        rt.call(tampered)
    assert (info.value.code, info.value.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")


def test_slave_registration_returns_master_addresses(admin):
    register_a(admin)
    reply = admin.register_broker("DefaultCluster", "127.0.0.1:20911", "broker-a", 1, "127.0.0.1:20912", TOPICS)
    assert (reply.master_addr, reply.ha_server_addr) == ("127.0.0.1:10911", "127.0.0.1:10912")


def test_unregister_and_wipe_add_perm(admin):
    register_a(admin)
    assert admin.wipe_write_perm("broker-a") == 2
    assert admin.get_route_info("TopicTest").queue_datas[0].perm == 4
    assert admin.add_write_perm("broker-a") == 2
    assert admin.get_route_info("TopicTest").queue_datas[0].perm == 6
    admin.unregister_broker("DefaultCluster", "127.0.0.1:10911", "broker-a", 0)
    with pytest.raises(MQResponseError):
        admin.get_route_info("TopicTest")


def test_delete_and_register_topic(admin):
    register_a(admin)
    admin.delete_topic("TopicTest", "DefaultCluster")
    assert admin.get_all_topics() == ["TBW102"]
    admin.register_topic("Fresh", [QueueData("broker-a", 2, 2, 6, 0)])
    assert admin.get_route_info("Fresh").queue_datas[0].read_queue_nums == 2


def test_kv_config_round_trip_and_persistence(admin, namesrv):
    assert admin.get_kv("ns", "k") is None
    assert admin.get_kv_list("ns") is None
    admin.put_kv("ns", "k", "v1")
    admin.put_kv("ns", "k2", "v2")
    assert admin.get_kv("ns", "k") == "v1"
    assert admin.get_kv_list("ns") == {"k": "v1", "k2": "v2"}
    admin.delete_kv("ns", "k")
    assert admin.get_kv_list("ns") == {"k2": "v2"}
    path = namesrv.config.kvConfigPath
    # The file goes through {k}, {k, k2}, {k2}: only the last write gives this content, so seeing it means
    # every write landed, in order.
    final = {"configTable": {"ns": {"k2": "v2"}}}
    deadline = time.monotonic() + 10  # three chained writes, each fsyncing a file and its directory: slow on a busy CI disk
    while time.monotonic() < deadline:
        try:
            if json.load(open(path)) == final:
                break
        except (OSError, ValueError):
            pass
        time.sleep(0.02)
    assert json.load(open(path)) == final


def test_kv_reloaded_by_a_new_name_server(start_namesrv, tmp_path):
    first = start_namesrv()
    with PlayingBroker(f"127.0.0.1:{first.port}") as a:
        a.put_kv(NAMESPACE_ORDER_TOPIC_CONFIG, "TopicTest", "broker-a:4")
    from ferrymq.sdk import reactor_thread

    reactor_thread.call(first.stop, 1.0)
    second = start_namesrv()
    with PlayingBroker(f"127.0.0.1:{second.port}") as a:
        assert a.get_kv(NAMESPACE_ORDER_TOPIC_CONFIG, "TopicTest") == "broker-a:4"
        # A registering broker receives the ORDER_TOPIC_CONFIG namespace.
        assert register_a(a).order_topic_config == {"TopicTest": "broker-a:4"}


def test_broker_expires_after_timeout(start_namesrv):
    server = start_namesrv(scanNotActiveBrokerInterval=100)
    with PlayingBroker(f"127.0.0.1:{server.port}") as a:
        # long enough for the route to be read back on a loaded machine, short enough to wait out
        register_a(a, heartbeat_timeout_ms=1500)
        assert a.get_route_info("TopicTest")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                a.get_route_info("TopicTest")
            except MQResponseError as exc:
                assert exc.code == ResponseCode.TOPIC_NOT_EXIST
                break
            time.sleep(0.05)
        else:
            pytest.fail("broker was not expired")


def test_broker_unregistered_when_its_connection_closes(namesrv):
    broker = PlayingBroker(f"127.0.0.1:{namesrv.port}")
    register_a(broker)
    with PlayingBroker(f"127.0.0.1:{namesrv.port}") as observer:
        assert observer.get_route_info("TopicTest")
        broker.close()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:
            try:
                observer.get_route_info("TopicTest")
            except MQResponseError:
                break
            time.sleep(0.02)
        else:
            pytest.fail("broker still routed after its connection closed")


def test_query_data_version_and_heartbeat(admin):
    from ferrymq.wire.bodies import DataVersion

    v = DataVersion(counter=3, state_version=0, timestamp=99)
    admin.register_broker("C", "127.0.0.1:10911", "b", 0, "", TOPICS, data_version=v)
    changed, current = admin.query_data_version("C", "127.0.0.1:10911", "b", 0, v)
    assert (changed, current) == (False, v)
    changed, _ = admin.query_data_version("C", "127.0.0.1:10911", "b", 0, DataVersion(counter=4, timestamp=99))
    assert changed


def test_namesrv_config_get_and_update(admin):
    cfg = admin.get_namesrv_config()
    assert cfg["listenPort"] == "0" or cfg["listenPort"].isdigit()
    assert cfg["scanNotActiveBrokerInterval"] == "5000"
    admin.update_namesrv_config({"enableAllTopicList": False})
    with pytest.raises(MQResponseError) as info:
        admin.get_all_topics()
    assert info.value.remark == "disable"
    with pytest.raises(MQResponseError) as info:
        admin.update_namesrv_config({"kvConfigPath": "/tmp/x"})
    assert info.value.code == ResponseCode.NO_PERMISSION


def test_missing_header_field_answers_system_error(rt, namesrv):
    from ferrymq.remoting import RemotingClient

    def go():
        c = RemotingClient()
        d = c.invoke(f"127.0.0.1:{namesrv.port}", request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {}), 3)
        return d.addBoth(lambda r: c.close().addCallback(lambda _: r))

    resp = rt.call(go)
    assert resp.code == ResponseCode.SYSTEM_ERROR
    assert "'topic'" in resp.remark


def test_unit_topic_lists_and_system_topics(admin):
    register_a(admin)
    sys_topics = admin.get_system_topics()
    assert sys_topics.topic_list == ["DefaultCluster", "broker-a"]


def test_broker_heartbeat_and_member_group(admin):
    register_a(admin)
    ext = {"clusterName": "DefaultCluster", "brokerAddr": "127.0.0.1:10911", "brokerName": "broker-a", "brokerId": "0"}
    assert admin.call(request(RequestCode.BROKER_HEARTBEAT, ext)).code == ResponseCode.SUCCESS
    resp = admin.call(request(RequestCode.GET_BROKER_MEMBER_GROUP, {"clusterName": "DefaultCluster", "brokerName": "broker-a"}))
    assert json.loads(resp.body) == {
        "brokerMemberGroup": {"brokerAddrs": {"0": "127.0.0.1:10911"}, "brokerName": "broker-a", "cluster": "DefaultCluster"}
    }
    for code in (RequestCode.GET_UNIT_TOPIC_LIST, RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST,
                 RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST):
        assert json.loads(admin.call(request(code)).body) == {"topicList": []}
