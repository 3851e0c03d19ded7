"""The HTTP gateway as the server commands start it: ``ferrymq gateway http`` in front of a cluster, and the
refusals of a port or setting that cannot work."""

from __future__ import annotations

import re
import socket
import sys

from ferrymq.testing.ports import free_port
from ferrymq.testing.server import FerryMQServer, HTTP_UP
from tests.broker.test_cli_broker import start, stop

from .http_client import Gateway


def test_the_gateway_command_serves_any_cluster_through_its_name_server(tmp_path):
    with FerryMQServer(tmp_path / "server") as server:  # its own gateway is off
        server.create_topic("ViaCommand", 2)
        port = free_port()
        proc, (bound,), _ = start(["gateway", "http", "-n", server.namesrv_addr, "--log-level", "INFO", "-c",
                                   str(_conf(tmp_path, f"bindAddress=127.0.0.1\nhttpListenPort={port}\n"))], HTTP_UP)
        try:
            assert bound == port, "".join(proc.log)
            client = Gateway(f"http://127.0.0.1:{port}")
            sent = client.publish("ViaCommand", "through the command")
            [got] = client.receive_all("ViaCommand", "ViaCommandG", 1)
            assert (got["msgId"], got["body"]) == (sent["msgId"], "through the command")
            client.ack("ViaCommand", "ViaCommandG", [got])
            client.close()
        finally:
            rest = stop(proc)
        assert "stopped" in rest


def _conf(tmp_path, text: str):
    path = tmp_path / "gateway.conf"
    path.write_text(text)
    return path


def test_the_gateway_command_needs_the_name_servers(tmp_path):
    import subprocess

    result = subprocess.run([sys.executable, "-m", "ferrymq.server.cli", "gateway", "http"], capture_output=True,
                            text=True, timeout=30)
    assert result.returncode == 2 and "-n host:port" in result.stderr, result.stderr


def test_a_taken_http_port_stops_the_server_naming_the_key(tmp_path):
    import subprocess

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        conf = _conf(tmp_path, f"listenPort=0\nnamesrvListenPort=0\nbindAddress=127.0.0.1\nhttpListenPort={port}\n"
                               f"storePathRootDir={tmp_path / 'store'}\nkvConfigPath={tmp_path / 'kv.json'}\n")
        result = subprocess.run([sys.executable, "-m", "ferrymq.server.cli", "standalone", "-c", str(conf)],
                                capture_output=True, text=True, timeout=60)
    assert result.returncode == 1, result.stderr
    assert re.search(rf"httpListenPort {port} on 127.0.0.1 cannot be listened on .*set httpListenPort", result.stderr)
