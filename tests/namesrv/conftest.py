"""A live name server on a random loopback port, run in the background reactor thread."""

from __future__ import annotations

import pytest

from ferrymq.sdk import reactor_thread
from ferrymq.sdk.blocking import BlockingAdmin
from ferrymq.server.config import NamesrvConfig, NettyServerConfig
from ferrymq.server.namesrv.service import NameServer
from ferrymq.server.broker.namesrv_peer import NamesrvPeer
from tests.remoting.helpers import RawClient


class PlayingBroker(BlockingAdmin):
    """The SDK's admin calls plus the broker's own (REGISTER_BROKER, ...), blocking: a test plays a broker."""

    def __init__(self, namesrv_addr: str, timeout: float = 3.0):
        super().__init__(namesrv_addr, timeout)
        self._peer = NamesrvPeer(namesrv_addr, self.wrapped.client, timeout)

    def __getattr__(self, name: str):
        if name.startswith("_") or not hasattr(NamesrvPeer, name):
            return super().__getattr__(name)
        target = getattr(self._peer, name)
        return lambda *args, **kwargs: reactor_thread.call(target, *args, timeout=self.timeout + 10, **kwargs)


@pytest.fixture(scope="session")
def rt():
    reactor_thread.ensure_running()
    return reactor_thread


@pytest.fixture
def start_namesrv(rt, tmp_path):
    started = []

    def start(**settings) -> NameServer:
        config = NamesrvConfig(kvConfigPath=str(tmp_path / "namesrv" / "kvConfig.json"),
                               configStorePath=str(tmp_path / "namesrv.properties"))
        netty = NettyServerConfig(bindAddress="127.0.0.1", listenPort=0)
        for key, value in settings.items():
            setattr(config if hasattr(config, key) else netty, key, value)
        server = rt.call(NameServer, config, netty)
        rt.call(server.start)
        started.append(server)
        return server

    yield start
    for server in started:
        rt.call(server.stop, 1.0)


@pytest.fixture
def namesrv(start_namesrv):
    return start_namesrv()


@pytest.fixture
def admin(namesrv):
    with PlayingBroker(f"127.0.0.1:{namesrv.port}") as client:
        yield client


@pytest.fixture
def raw_client():
    made: list[RawClient] = []

    def connect(addr: tuple[str, int]) -> RawClient:
        client = RawClient(addr)
        made.append(client)
        return client

    yield connect
    for client in made:
        client.close()
