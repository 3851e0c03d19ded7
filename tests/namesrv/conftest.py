"""A live name server on a random loopback port, run in the background reactor thread."""

from __future__ import annotations

import pytest

from sdk_py import reactor_thread
from sdk_py.blocking import BlockingAdmin
from server.config import NamesrvConfig, NettyServerConfig
from server.namesrv.service import NameServer
from tests.remoting.helpers import RawClient


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
    with BlockingAdmin(f"127.0.0.1:{namesrv.port}") as client:
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
