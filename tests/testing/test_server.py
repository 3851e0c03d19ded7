"""FerryMQServer, the server behind the pytest fixture: its lifecycle, its ports, and what it leaves out of
the test process."""

from __future__ import annotations

import socket
import subprocess
import sys
import time

import pytest

from ferrymq.testing import admin, server as server_module
from ferrymq.wire.bodies import SubscriptionGroupWrapper
from ferrymq.wire.codes import RequestCode
from ferrymq.wire.command import request
from ferrymq.testing.server import LOOPBACK, FerryMQServer, ServerStartError


def routed(server: FerryMQServer, topic: str) -> bool:
    return admin.route(server.namesrv_addr, topic) is not None


def test_restart_keeps_the_addresses_and_the_store(tmp_path):
    with FerryMQServer(tmp_path) as server:
        addrs = (server.namesrv_addr, server.broker_addr)
        server.create_topic("Kept", queues=2)
        server.restart()
        assert (server.namesrv_addr, server.broker_addr) == addrs
        assert routed(server, "Kept")
        server.kill()
        assert not server.running
        server.start()
        assert routed(server, "Kept")
    assert not server.running
    assert server.log.count("name server listening on") == 3


def test_helpers_create_the_topic_and_the_group_on_the_broker(tmp_path):
    with FerryMQServer(tmp_path, {"brokerName": "helper-broker"}) as server:
        server.create_topic("Made", queues=3, order=True)
        server.create_group("made_cg", retry_max_times=3, consume_broadcast_enable=False)
        (queues,) = admin.route(server.namesrv_addr, "Made").queue_datas
        assert (queues.broker_name, queues.read_queue_nums, queues.write_queue_nums) == ("helper-broker", 3, 3)
        answer = admin.call(server.broker_addr, request(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG))
        group = SubscriptionGroupWrapper.decode(answer.body).subscription_group_table["made_cg"]
        assert (group.retry_max_times, group.consume_broadcast_enable) == (3, False)


def test_a_taken_broker_port_is_replaced_by_another(tmp_path, monkeypatch):
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        busy = taken.getsockname()[1]
        choices = iter([busy, server_module._free_pair()])
        monkeypatch.setattr(server_module, "_free_pair", lambda: next(choices))
        with FerryMQServer(tmp_path) as server:
            assert server.broker_port != busy
            assert f"listenPort {busy} is in use" in server.log
            assert routed(server, "TBW102")


def test_a_fixed_port_in_use_fails_with_the_log(tmp_path):
    with socket.socket() as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        server = FerryMQServer(tmp_path, {"listenPort": taken.getsockname()[1]})
        with pytest.raises(ServerStartError, match="listenPort \\d+ is in use"):
            server.start()
    assert not server.running


def test_the_test_process_gets_no_twisted(tmp_path):
    """The plugin and the server's helpers run on ``ferrymq.wire`` alone (a user's process may run its own
    event loop); checked in a fresh interpreter, since this one has Twisted from other tests."""
    probe = (
        "import sys\n"
        "import ferrymq.testing.pytest_plugin\n"
        "assert not [m for m in sys.modules if m.startswith(('twisted', 'ferrymq.wire'))], 'plugin import'\n"
        "from ferrymq.testing import FerryMQServer\n"
        f"with FerryMQServer({str(tmp_path)!r}) as s:\n"
        "    s.create_topic('T'); s.create_group('g')\n"
        "assert not [m for m in sys.modules if m.startswith(('twisted', 'ferrymq.server', 'ferrymq.sdk'))]\n"
    )
    subprocess.run([sys.executable, "-c", probe], check=True, timeout=60)


def _gone(pid: int) -> bool:
    """No such process, or only its exit status left (a zombie its new parent has not reaped yet)."""
    try:
        status = open(f"/proc/{pid}/status").read()
    except FileNotFoundError:
        return True
    return "\nState:\tZ" in status


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the kernel's parent-death signal is Linux's")
def test_a_killed_test_process_leaves_no_server_behind(tmp_path):
    script = ("import sys, time\n"
              "from ferrymq.testing import FerryMQServer\n"
              f"server = FerryMQServer({str(tmp_path)!r}).start()\n"
              "print(server._proc.pid, flush=True)\n"
              "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        assert not _gone(child)
    finally:
        parent.kill()
        parent.wait()
    deadline = time.monotonic() + 10
    while not _gone(child):
        assert time.monotonic() < deadline, f"server {child} outlived its test process"
        time.sleep(0.05)
