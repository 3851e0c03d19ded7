"""The SDK's error surface and the blocking facade, against servers that misbehave on purpose."""

from __future__ import annotations

import socket

import pytest
from twisted.internet import defer

from ferrymq.sdk import reactor_thread
from ferrymq.sdk.blocking import BlockingAdmin
from ferrymq.sdk.errors import MQResponseError
from ferrymq.remoting import RemotingConnectError, RemotingTimeoutError
from ferrymq.remoting import RemotingServer
from ferrymq.wire.codes import RequestCode, ResponseCode


@pytest.fixture(scope="module")
def rt():
    reactor_thread.ensure_running()
    return reactor_thread


@pytest.fixture
def silent_server(rt):
    """Accepts route requests and never answers them; answers cluster info with an error code."""
    handlers = {
        RequestCode.GET_ROUTEINFO_BY_TOPIC: lambda cmd, ch: defer.Deferred(),
        RequestCode.GET_BROKER_CLUSTER_INFO: lambda cmd, ch: cmd.response(ResponseCode.SYSTEM_BUSY, "[OVERLOAD] busy"),
    }
    server = RemotingServer(handlers, name="silent")
    rt.call(server.listen, 0, "127.0.0.1")
    yield server
    rt.call(server.stop, 0.5)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_connect_refused_is_typed(rt):
    with BlockingAdmin(f"127.0.0.1:{free_port()}", timeout=2) as admin:
        with pytest.raises(RemotingConnectError):
            admin.get_all_topics()


def test_timeout_is_typed(silent_server):
    with BlockingAdmin(f"127.0.0.1:{silent_server.port}", timeout=0.3) as admin:
        with pytest.raises(RemotingTimeoutError):
            admin.get_route_info("T")


def test_error_code_is_raised_with_code_and_remark(silent_server):
    with BlockingAdmin(f"127.0.0.1:{silent_server.port}") as admin:
        with pytest.raises(MQResponseError) as info:
            admin.get_cluster_info()
    assert (info.value.code, info.value.remark) == (ResponseCode.SYSTEM_BUSY, "[OVERLOAD] busy")
    assert "GET_BROKER_CLUSTER_INFO" in str(info.value) and "SYSTEM_BUSY" in str(info.value)


def test_unknown_code_not_supported(silent_server):
    with BlockingAdmin(f"127.0.0.1:{silent_server.port}") as admin:
        with pytest.raises(MQResponseError) as info:
            admin.get_all_topics()
    assert info.value.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED


def test_reactor_thread_call_timeout(rt):
    with pytest.raises(TimeoutError):
        rt.call(lambda: defer.Deferred(), timeout=0.2)


def test_bad_address_is_a_connect_error(rt):
    with BlockingAdmin("no-port-here") as admin:
        with pytest.raises(RemotingConnectError, match="host:port"):
            admin.get_all_topics()
