"""A name server and a broker in the SDK's reactor thread, shared by the tests of a module, and a fresh
single-queue topic per test (one queue keeps the order messages were sent in).

The broker's delay levels are all 1 s and it checks half messages back after 0.5 s, so redeliveries and
transaction check-backs happen within a test's patience."""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from ferrymq.sdk import reactor_thread
from ferrymq.sdk.mq_admin import MQAdmin
from ferrymq.server.broker.service import Broker
from ferrymq.server.config import BrokerConfig, NamesrvConfig, NettyServerConfig
from ferrymq.server.namesrv.service import NameServer


@pytest.fixture(scope="module")
def rt():
    reactor_thread.ensure_running()
    return reactor_thread


@dataclass
class Cluster:
    namesrv: NameServer
    broker: Broker
    admin: MQAdmin

    @property
    def namesrv_addr(self) -> str:
        return f"127.0.0.1:{self.namesrv.port}"

    def create_topic(self, topic: str, queue_nums: int = 1) -> str:
        reactor_thread.call(self.admin.create_topic, topic, queue_nums, broker_addr=self.broker.addr)
        reactor_thread.call(self.admin.wait_for_route, topic, 10.0, 0.05, timeout=20)
        return topic


@pytest.fixture(scope="module")
def cluster(rt, tmp_path_factory):
    root = tmp_path_factory.mktemp("sdk-cluster")
    namesrv = rt.call(NameServer, NamesrvConfig(kvConfigPath=str(root / "kv.json"),
                                                configStorePath=str(root / "ns.properties")),
                      NettyServerConfig(bindAddress="127.0.0.1", listenPort=0))
    rt.call(namesrv.start)
    config = BrokerConfig(brokerName="broker-sdk", brokerIP1="127.0.0.1", listenPort=0,
                          namesrvAddr=f"127.0.0.1:{namesrv.port}", storePathRootDir=str(root / "store"),
                          mappedFileSizeCommitLog=1 << 22, messageDelayLevel=" ".join(["1s"] * 18),
                          transactionTimeOut=500, transactionCheckInterval=200, transactionCheckMax=5)
    broker = Broker(config, NettyServerConfig(bindAddress="127.0.0.1"),
                    store_props={"mappedFileSizeConsumeQueue": "6000", "maxIndexNum": "1000",
                                 "maxHashSlotNum": "100"})
    rt.call(broker.start)
    admin = rt.call(MQAdmin, f"127.0.0.1:{namesrv.port}")
    yield Cluster(namesrv, broker, admin)
    rt.call(admin.close)
    rt.call(broker.stop, 1.0)
    rt.call(namesrv.stop, 1.0)


@pytest.fixture
def topic(cluster, request) -> str:
    """A new topic named after the test (parameters included), with one queue."""
    return cluster.create_topic(re.sub(r"[^A-Za-z0-9_-]", "_", request.node.name)[-100:])
