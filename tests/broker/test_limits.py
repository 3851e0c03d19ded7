"""The connection limits of a running broker against hostile clients, while a well-behaved one (sdk_py's
producer and pull consumer) keeps sending and pulling: garbage and oversized frames, a flood of
connections past ``maxConnections``, a slow-loris holding a partial frame, and a client pipelining held
pulls past ``maxInFlightRequestsPerConnection``. /metrics counts each refusal by its reason."""

from __future__ import annotations

import struct
import time

import pytest

from ferrymq.remoting import limits
from ferrymq.sdk import BlockingProducer, BlockingPullConsumer, Message, reactor_thread
from ferrymq.sdk.mq_admin import MQAdmin
from ferrymq.server.broker.metrics import BrokerMetrics
from ferrymq.server.broker.service import Broker
from ferrymq.server.config import BrokerConfig, NamesrvConfig, NettyServerConfig
from ferrymq.server.namesrv.service import NameServer
from ferrymq.wire.codes import PullSysFlag, RequestCode, ResponseCode
from ferrymq.wire.command import request
from ferrymq.wire.frame import encode

from tests.remoting.helpers import RawClient

MAX_CONNECTIONS = 12
MAX_IN_FLIGHT = 4
IDLE_S = 2
TOPIC = "LimitsT"


class Good:
    """sdk_py's producer and pull consumer, connected before the hostile clients arrive."""

    def __init__(self, namesrv_addr: str):
        self.producer = BlockingProducer("limits-pg", namesrv_addr).__enter__()
        self.consumer = BlockingPullConsumer("limits-cg", namesrv_addr).__enter__()
        self.offset = 0

    def send_and_pull(self, body: bytes) -> None:
        self.producer.send(Message(TOPIC, body))
        (mq,) = self.consumer.fetch_subscribe_queues(TOPIC)
        result = self.consumer.pull(mq, "*", self.offset, 32)
        assert [m.body for m in result.messages][-1:] == [body]
        self.offset = result.next_begin_offset

    def close(self) -> None:
        self.consumer.__exit__(None, None, None)
        self.producer.__exit__(None, None, None)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    reactor_thread.ensure_running()
    rt = reactor_thread
    root = tmp_path_factory.mktemp("limits")
    namesrv = rt.call(NameServer, NamesrvConfig(kvConfigPath=str(root / "kv.json"),
                                                configStorePath=str(root / "ns.properties")),
                      NettyServerConfig(bindAddress="127.0.0.1", listenPort=0))
    rt.call(namesrv.start)
    config = BrokerConfig(brokerName="broker-limits", brokerIP1="127.0.0.1", listenPort=0,
                          namesrvAddr=f"127.0.0.1:{namesrv.port}", storePathRootDir=str(root / "store"),
                          mappedFileSizeCommitLog=1 << 22)
    netty = NettyServerConfig(bindAddress="127.0.0.1", maxConnections=MAX_CONNECTIONS,
                              maxInFlightRequestsPerConnection=MAX_IN_FLIGHT, serverChannelMaxIdleTimeSeconds=IDLE_S,
                              frameMaxLength=1 << 20)
    broker = Broker(config, netty, store_props={"mappedFileSizeConsumeQueue": "6000", "maxIndexNum": "1000",
                                                "maxHashSlotNum": "100"})
    rt.call(broker.start)
    admin = rt.call(MQAdmin, f"127.0.0.1:{namesrv.port}")
    rt.call(admin.create_topic, TOPIC, 1, broker_addr=broker.addr)
    rt.call(admin.wait_for_route, TOPIC, 10.0, 0.05, timeout=20)
    yield broker, f"127.0.0.1:{namesrv.port}"
    rt.call(admin.close)
    rt.call(broker.stop, 1.0)
    rt.call(namesrv.stop, 1.0)


@pytest.fixture
def good(cluster):
    client = Good(cluster[1])
    client.send_and_pull(b"connected")
    yield client
    client.close()


def refusals(broker) -> dict[str, float]:
    families = reactor_thread.call(BrokerMetrics(broker.ctx, broker.server).collect)
    [family] = [f for f in families if f.name == "ferrymq_refusals"]
    return {s.labels["reason"]: s.value for s in family.samples}


def broker_port(broker) -> tuple[str, int]:
    return "127.0.0.1", broker.server.port


def test_garbage_and_oversized_frames_close_their_connection_only(cluster, good):
    broker = cluster[0]
    before = refusals(broker)
    for garbage in (struct.pack(">i", 2 << 20) + b"\x00" * 64,  # above frameMaxLength (1 MiB here)
                    struct.pack(">ii", 12, 8) + b"not json",  # an unreadable header
                    b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"):  # another protocol: its first bytes read as 1.2 GB
        bad = RawClient(broker_port(broker))
        bad.send_raw(garbage)
        assert bad.closed_by_peer(timeout=3)
        bad.close()
        good.send_and_pull(b"after " + garbage[:8])
    after = refusals(broker)
    assert after[limits.FRAME_TOO_LARGE] - before[limits.FRAME_TOO_LARGE] == 2
    assert after[limits.BAD_FRAME] - before[limits.BAD_FRAME] == 1


def test_a_flood_of_connections_is_refused_past_the_maximum(cluster, good):
    broker = cluster[0]
    before = refusals(broker)[limits.TOO_MANY_CONNECTIONS]
    open_now = reactor_thread.call(lambda: len(broker.server.connections))
    flood = [RawClient(broker_port(broker)) for _ in range(MAX_CONNECTIONS + 5)]
    try:
        expected = len(flood) - (MAX_CONNECTIONS - open_now)
        deadline = time.monotonic() + 3
        while refusals(broker)[limits.TOO_MANY_CONNECTIONS] - before < expected and time.monotonic() < deadline:
            time.sleep(0.01)
        assert refusals(broker)[limits.TOO_MANY_CONNECTIONS] - before == expected
        assert reactor_thread.call(lambda: len(broker.server.connections)) == MAX_CONNECTIONS
        # the refused are closed at once; the accepted stay open (for well under the idle timeout)
        assert sum(conn.closed_by_peer(timeout=0.01) for conn in flood) == expected
        good.send_and_pull(b"during the flood")  # over the connections it already had
    finally:
        for conn in flood:
            conn.close()


def test_a_slow_loris_is_closed_by_the_idle_timeout(cluster, good):
    broker = cluster[0]
    before = refusals(broker)[limits.IDLE]
    loris = RawClient(broker_port(broker))
    loris.send_raw(encode(request(RequestCode.HEART_BEAT, body=b"{}"))[:10])
    started = time.monotonic()
    good.send_and_pull(b"while the loris waits")
    assert loris.closed_by_peer(timeout=IDLE_S * 3)
    assert IDLE_S * 0.9 < time.monotonic() - started < IDLE_S * 3
    assert refusals(broker)[limits.IDLE] > before
    loris.close()


def test_held_pulls_pipelined_past_the_in_flight_limit_are_answered_busy(cluster, good):
    broker = cluster[0]
    piper = RawClient(broker_port(broker))
    flags = int(PullSysFlag.SUSPEND | PullSysFlag.SUBSCRIPTION)
    # at the queue's end, so each pull is held for up to suspendTimeoutMillis
    pulls = [request(RequestCode.PULL_MESSAGE, {
        "consumerGroup": "limits-piper", "topic": TOPIC, "queueId": "0", "queueOffset": str(good.offset),
        "maxMsgNums": "1", "sysFlag": str(flags), "commitOffset": "0", "suspendTimeoutMillis": "800",
        "subscription": "*", "subVersion": "0"}, opaque=i) for i in range(MAX_IN_FLIGHT + 3)]
    piper.send_raw(b"".join(encode(p) for p in pulls))
    busy = [piper.recv(timeout=3) for _ in range(3)]
    assert [(r.opaque, r.code, r.remark) for r in busy] == [
        (i, ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy, start flow control for a while")
        for i in range(MAX_IN_FLIGHT, MAX_IN_FLIGHT + 3)]
    good.send_and_pull(b"while the pulls are held")
    held = [piper.recv(timeout=5) for _ in range(MAX_IN_FLIGHT)]
    assert sorted(r.opaque for r in held) == list(range(MAX_IN_FLIGHT))
    assert ResponseCode.SYSTEM_BUSY not in {r.code for r in held}
    piper.close()
