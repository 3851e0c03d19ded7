"""A name server and a broker over TCP in the background reactor, driven by a minimal client
(the SDK's remoting client plus wire headers), the way the official clients drive them."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from ferrymq.sdk import reactor_thread
from ferrymq.sdk.blocking import BlockingAdmin
from ferrymq.sdk.errors import MQResponseError
from ferrymq.server.broker.service import Broker
from ferrymq.server.config import BrokerConfig, NamesrvConfig, NettyServerConfig
from ferrymq.server.namesrv.service import NameServer
from ferrymq.remoting import RemotingClient
from tests.remoting.helpers import RawClient
from ferrymq.wire.bodies import ConsumerData, GetConsumerListByGroupResponseBody, HeartbeatData, SubscriptionData
from ferrymq.wire.codes import PullSysFlag, RequestCode, ResponseCode, SerializeType
from ferrymq.wire.command import request
from ferrymq.wire.headers import SendMessageRequestHeader
from ferrymq.wire.message import decode_records, encode_properties

C = RequestCode


@pytest.fixture(scope="module")
def rt():
    reactor_thread.ensure_running()
    return reactor_thread


@pytest.fixture
def cluster(rt, tmp_path):
    namesrv = rt.call(NameServer, NamesrvConfig(kvConfigPath=str(tmp_path / "kv.json"),
                                                configStorePath=str(tmp_path / "ns.properties")),
                      NettyServerConfig(bindAddress="127.0.0.1", listenPort=0))
    rt.call(namesrv.start)
    brokers = []

    def start_broker(**kw):
        settings = dict(brokerName="broker-a", brokerIP1="127.0.0.1", listenPort=0,
                        namesrvAddr=f"127.0.0.1:{namesrv.port}", storePathRootDir=str(tmp_path / "store"),
                        mappedFileSizeCommitLog=1 << 20)
        config = BrokerConfig(**{**settings, **kw})
        broker = Broker(config, NettyServerConfig(bindAddress="127.0.0.1"),
                        store_props={"mappedFileSizeConsumeQueue": "6000", "maxIndexNum": "1000",
                                     "maxHashSlotNum": "100"})
        rt.call(broker.start)
        brokers.append(broker)
        return broker

    client = rt.call(Client)
    yield namesrv, start_broker, client
    rt.call(client.close)
    for broker in brokers:
        rt.call(broker.stop, 1.0)
    rt.call(namesrv.stop, 1.0)


class Client:
    """A RemotingClient that records the requests the broker pushes to it."""

    def __init__(self):
        self.pushed = []
        self.remoting = RemotingClient(processor=self._on_request)

    def _on_request(self, cmd, channel):
        self.pushed.append(cmd)
        if cmd.code == C.GET_CONSUMER_RUNNING_INFO:
            return cmd.response(0, None, None, b'{"properties":{"from":"client"}}')
        return None

    def close(self):
        return self.remoting.close()


def call(rt, client, addr, code, ext=None, body=b"", timeout=5.0, stype=SerializeType.JSON, oneway=False):
    cmd = request(code, {k: str(v) for k, v in (ext or {}).items()}, body, serialize_type=stype, oneway=oneway)
    if oneway:
        return rt.call(client.remoting.invoke_oneway, addr, cmd)
    return rt.call(client.remoting.invoke, addr, cmd, timeout, timeout=timeout + 5)


def send(rt, client, addr, topic, body, tags=None, stype=SerializeType.JSON):
    props = {"TAGS": tags} if tags else {}
    h = SendMessageRequestHeader("pg", topic, "TBW102", 4, 0, 0, int(time.time() * 1000), 0,
                                 properties=encode_properties(props))
    return call(rt, client, addr, C.SEND_MESSAGE_V2, h.to_ext_v2(), body, stype=stype)


def heartbeat(rt, client, addr, group, topic, client_id):
    data = HeartbeatData(client_id=client_id, consumer_data_set=[ConsumerData(
        group_name=group, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
        consume_from_where="CONSUME_FROM_LAST_OFFSET",
        subscription_data_set=[SubscriptionData(topic=topic, sub_string="*", sub_version=1)])])
    return call(rt, client, addr, C.HEART_BEAT, None, data.encode())


def pull_ext(group, topic, offset, suspend_ms=15000):
    return {"consumerGroup": group, "topic": topic, "queueId": 0, "queueOffset": offset, "maxMsgNums": 32,
            "sysFlag": int(PullSysFlag.SUSPEND | PullSysFlag.COMMIT_OFFSET), "commitOffset": offset,
            "suspendTimeoutMillis": suspend_ms, "subVersion": 1}


def wait_for(predicate, timeout=5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return False


def test_register_send_route_long_poll_and_offsets(rt, cluster):
    namesrv, start_broker, client = cluster
    broker = start_broker()
    addr = broker.addr
    with BlockingAdmin(f"127.0.0.1:{namesrv.port}") as admin:
        assert wait_for(lambda: broker.registration.registrations > 0)
        route = admin.get_route_info("TBW102")
        assert route.broker_datas[0].broker_addrs == {0: addr}

        first = send(rt, client, addr, "E2E", b"one", stype=SerializeType.ROCKETMQ)
        assert first.code == 0 and first.serialize_type == SerializeType.ROCKETMQ
        # the auto-created topic reaches the name server before the send is answered (as Apache)
        assert _has_route(admin, "E2E")  # answered only once the name server knows the new topic

        assert heartbeat(rt, client, addr, "eg", "E2E", "client-1").code == 0
        got = call(rt, client, addr, C.PULL_MESSAGE, pull_ext("eg", "E2E", 0))
        assert got.code == 0 and [m.body for m in decode_records(got.body)] == [b"one"]

        # long poll at the end of the queue: held, then woken by a send on another connection
        other = rt.call(Client)
        started = time.monotonic()
        with ThreadPoolExecutor(1) as pool:
            held = pool.submit(call, rt, client, addr, C.PULL_MESSAGE, pull_ext("eg", "E2E", 1), b"", 20)
            time.sleep(0.3)
            assert not held.done(), "a pull at the queue end must be held"
            send(rt, other, addr, "E2E", b"two")
            woken = held.result(3.0)
        assert woken.code == 0 and [m.body for m in decode_records(woken.body)] == [b"two"]
        assert time.monotonic() - started < 3.0
        rt.call(other.close)

        # the piggy-backed commit offset of the first arrival was stored
        q = {"consumerGroup": "eg", "topic": "E2E", "queueId": 0}
        assert call(rt, client, addr, C.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "1"
        call(rt, client, addr, C.UPDATE_CONSUMER_OFFSET, {**q, "commitOffset": 2}, oneway=True)
        assert wait_for(lambda: call(rt, client, addr, C.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "2")
        assert call(rt, client, addr, C.GET_MAX_OFFSET, {"topic": "E2E", "queueId": 0}).ext_fields["offset"] == "2"

        unknown = call(rt, client, addr, 7777)
        assert unknown.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED and "7777" in unknown.remark


def _has_route(admin, topic):
    try:
        return bool(admin.get_route_info(topic).queue_datas)
    except MQResponseError:
        return False


def test_group_membership_notices_and_vanishing_puller(rt, cluster):
    namesrv, start_broker, client = cluster
    broker = start_broker()
    addr = broker.addr
    send(rt, client, addr, "G", b"x")
    assert heartbeat(rt, client, addr, "gg", "G", "client-1").code == 0
    second = rt.call(Client)
    assert heartbeat(rt, second, addr, "gg", "G", "client-2").code == 0
    assert wait_for(lambda: any(c.code == C.NOTIFY_CONSUMER_IDS_CHANGED for c in client.pushed))
    ids = GetConsumerListByGroupResponseBody.decode(
        call(rt, client, addr, C.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": "gg"}).body).consumer_id_list
    assert sorted(ids) == ["client-1", "client-2"]
    # mqadmin consumerStatus: the broker relays GET_CONSUMER_RUNNING_INFO to the consumer itself
    info = call(rt, client, addr, C.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "gg", "clientId": "client-2"})
    assert info.code == 0 and info.body == b'{"properties":{"from":"client"}}'
    gone = call(rt, client, addr, C.GET_CONSUMER_RUNNING_INFO, {"consumerGroup": "gg", "clientId": "nobody"})
    assert gone.code == ResponseCode.SYSTEM_ERROR and "not online" in gone.remark

    # a client holding a long poll vanishes: nothing breaks for the others
    host, port = addr.split(":")
    raw = RawClient((host, int(port)))
    raw.send(request(C.PULL_MESSAGE, {k: str(v) for k, v in pull_ext("gg", "G", 1).items()}))
    assert wait_for(lambda: len(broker.ctx.holder) == 1)
    raw.close()
    assert wait_for(lambda: len(broker.ctx.holder) == 0)
    rt.call(second.close)
    assert wait_for(lambda: broker.ctx.consumers.client_ids("gg") == ["client-1"])
    assert send(rt, client, addr, "G", b"y").code == 0


def test_restart_keeps_topics_groups_and_offsets_and_unregisters(rt, cluster):
    namesrv, start_broker, client = cluster
    broker = start_broker()
    addr = broker.addr
    send(rt, client, addr, "Keep", b"k")
    heartbeat(rt, client, addr, "kg", "Keep", "client-1")
    call(rt, client, addr, C.UPDATE_CONSUMER_OFFSET,
         {"consumerGroup": "kg", "topic": "Keep", "queueId": 0, "commitOffset": 1})
    rt.call(broker.stop, 1.0)
    with BlockingAdmin(f"127.0.0.1:{namesrv.port}") as admin:
        assert not _has_route(admin, "Keep")  # unregistered at shutdown
    again = start_broker()
    assert again.ctx.topics.get("Keep") is not None and again.ctx.groups.get("kg") is not None
    q = {"consumerGroup": "kg", "topic": "Keep", "queueId": 0}
    assert call(rt, client, again.addr, C.QUERY_CONSUMER_OFFSET, q).ext_fields["offset"] == "1"
    assert call(rt, client, again.addr, C.GET_MAX_OFFSET, {"topic": "Keep", "queueId": 0}).ext_fields["offset"] == "1"


def _free_pair() -> int:
    """A port P with P-2 also free (the VIP channel)."""
    import socket

    for _ in range(50):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        if port < 1026:
            continue
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port - 2))
            return port
        except OSError:
            continue
    pytest.skip("no free port pair for the VIP channel")


def test_vip_channel_serves_the_same_broker(rt, cluster):
    namesrv, start_broker, client = cluster
    port = _free_pair()
    broker = start_broker(listenPort=port)
    assert broker.vip and broker.port == port
    assert send(rt, client, f"127.0.0.1:{port - 2}", "Vip", b"v").code == 0
    assert call(rt, client, f"127.0.0.1:{port}", C.GET_MAX_OFFSET, {"topic": "Vip", "queueId": 0}).code == 0


def test_a_dead_name_server_does_not_stop_registration_with_the_others(rt, cluster):
    namesrv, start_broker, client = cluster
    broker = start_broker(namesrvAddr=f"127.0.0.1:1;127.0.0.1:{namesrv.port}")
    assert wait_for(lambda: broker.registration.registrations > 0)
    with BlockingAdmin(f"127.0.0.1:{namesrv.port}") as admin:
        assert admin.get_route_info("TBW102").broker_datas[0].broker_addrs == {0: broker.addr}
    assert send(rt, client, broker.addr, "TwoNs", b"x").code == 0  # waits for the live one only


def test_restart_brings_back_popped_unacked_messages_and_the_consume_mode(rt, cluster):
    """popState.json and messageRequestMode.json: what was in flight comes back after a restart, once its
    invisible time passed; acked messages do not."""
    import json

    from ferrymq.wire.bodies import QueryAssignmentRequestBody, SetMessageRequestModeRequestBody

    _namesrv, start_broker, client = cluster
    broker = start_broker(reviveInterval=100)
    addr = broker.addr
    for body in (b"p0", b"p1"):
        send(rt, client, addr, "PopKeep", body)
    mode = SetMessageRequestModeRequestBody(topic="PopKeep", consumer_group="pg", mode="POP")
    assert call(rt, client, addr, C.SET_MESSAGE_REQUEST_MODE, body=mode.encode()).code == 0
    pop = {"consumerGroup": "pg", "topic": "PopKeep", "queueId": 0, "maxMsgNums": 32, "invisibleTime": 1500,
           "pollTime": 0, "bornTime": 0, "initMode": 0}
    first = call(rt, client, addr, C.POP_MESSAGE, pop)
    (m0, m1) = decode_records(first.body)
    h = first.ext_fields
    extra = " ".join([h["startOffsetInfo"].split(" ")[2], h["popTime"], h["invisibleTime"], h["reviveQid"], "0",
                      "broker-a", "0", str(m0.queue_offset)])
    ack = {"consumerGroup": "pg", "topic": "PopKeep", "queueId": 0, "extraInfo": extra, "offset": m0.queue_offset}
    assert call(rt, client, addr, C.ACK_MESSAGE, ack).code == 0
    rt.call(broker.stop, 1.0)

    again = start_broker(reviveInterval=100)
    heartbeat(rt, client, again.addr, "pg", "PopKeep", "client-1")
    query = QueryAssignmentRequestBody(topic="PopKeep", consumer_group="pg", client_id="client-1",
                                       strategy_name="AVG", message_model="CLUSTERING")
    answer = json.loads(call(rt, client, again.addr, C.QUERY_ASSIGNMENT, body=query.encode()).body)
    assert {a["mode"] for a in answer["messageQueueAssignments"]} == {"POP"}
    deadline = time.monotonic() + 10
    while True:
        back = call(rt, client, again.addr, C.POP_MESSAGE, {**pop, "queueId": -1})
        if back.code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert [(m.body, m.reconsume_times) for m in decode_records(back.body)] == [(b"p1", 1)]
