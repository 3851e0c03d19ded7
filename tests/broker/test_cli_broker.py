"""``ferrymq standalone`` and ``ferrymq broker`` as subprocesses: start from a config file, serve a send and
a pull, stop cleanly on SIGTERM."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ferrymq.sdk import reactor_thread
from ferrymq.sdk.blocking import BlockingAdmin
from ferrymq.testing.server import BROKER_UP, NAMESRV_UP
from ferrymq.remoting import RemotingClient
from tests.broker.test_broker_e2e import _free_pair
from ferrymq.wire.codes import RequestCode
from ferrymq.wire.command import request
from ferrymq.wire.headers import SendMessageRequestHeader
from ferrymq.wire.message import decode_records

ROOT = Path(__file__).resolve().parents[2]
FERRYMQ = [sys.executable, "-m", "ferrymq.server.cli"]


def start(args: list[str], *patterns: re.Pattern) -> tuple[subprocess.Popen, list[int], list[str]]:
    """Run ferrymq and wait (at most 20 s) until its log shows every pattern; the log is read by a thread
    so that a silent process cannot block the test."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    proc = subprocess.Popen([*FERRYMQ, *args], cwd=ROOT, stderr=subprocess.PIPE, stdout=subprocess.PIPE,
                            text=True, env=env)
    lines: queue.Queue = queue.Queue()
    proc.log = []  # type: ignore[attr-defined]

    def pump() -> None:
        for line in proc.stderr:
            proc.log.append(line)  # type: ignore[attr-defined]
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    found: dict[int, int] = {}
    deadline = time.monotonic() + 20
    while len(found) < len(patterns) and time.monotonic() < deadline:
        try:
            line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        except queue.Empty:
            break
        if line is None:
            break
        for i, pattern in enumerate(patterns):
            match = pattern.search(line)
            if match:
                found[i] = int(match.group(1))
    if len(found) < len(patterns):
        proc.kill()
        proc.wait()
        raise AssertionError("ferrymq did not report its ports:\n" + "".join(proc.log))  # type: ignore[attr-defined]
    return proc, [found[i] for i in range(len(patterns))], proc.log  # type: ignore[attr-defined]


def stop(proc: subprocess.Popen) -> str:
    """SIGTERM, expect a clean exit within 20 s; returns the whole log."""
    proc.send_signal(signal.SIGTERM)
    try:
        assert proc.wait(timeout=20) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    time.sleep(0.1)  # let the reader thread take the last lines
    return "".join(proc.log)  # type: ignore[attr-defined]


def send_and_pull(addr: str, topic: str) -> list[bytes]:
    reactor_thread.ensure_running()
    client = reactor_thread.call(RemotingClient)
    try:
        h = SendMessageRequestHeader("pg", topic, "TBW102", 4, 0, 0, 1, 0, properties="")
        sent = reactor_thread.call(client.invoke, addr, request(RequestCode.SEND_MESSAGE_V2, h.to_ext_v2(), b"cli"), 5)
        assert sent.code == 0, sent.remark
        pull = {"consumerGroup": "g", "topic": topic, "queueId": "0", "queueOffset": "0", "maxMsgNums": "8",
                "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "1000", "subVersion": "0",
                "subscription": "*"}
        got = reactor_thread.call(client.invoke, addr, request(RequestCode.PULL_MESSAGE, pull), 5)
        return [m.body for m in decode_records(got.body)]
    finally:
        reactor_thread.call(client.close)


def test_standalone_serves_and_stops_on_sigterm(tmp_path):
    port = _free_pair()
    conf = tmp_path / "standalone.conf"
    conf.write_text(f"namesrvListenPort=0\nlistenPort={port}\nbindAddress=127.0.0.1\nbrokerIP1=127.0.0.1\n"
                    f"storePathRootDir={tmp_path / 'store'}\nkvConfigPath={tmp_path / 'kv.json'}\n"
                    "mappedFileSizeCommitLog=1048576\nbrokerName=cli-broker\n")
    proc, (ns_port, broker_port), _ = start(["standalone", "-c", str(conf)], NAMESRV_UP, BROKER_UP)
    try:
        assert broker_port == port
        with BlockingAdmin(f"127.0.0.1:{ns_port}") as admin:
            deadline = time.monotonic() + 10
            while not admin.get_cluster_info().broker_addr_table and time.monotonic() < deadline:
                time.sleep(0.1)
            assert "cli-broker" in admin.get_cluster_info().broker_addr_table
        assert send_and_pull(f"127.0.0.1:{port}", "CliTopic") == [b"cli"]
        assert send_and_pull(f"127.0.0.1:{port - 2}", "CliVip") == [b"cli"]  # VIP channel
    finally:
        rest = stop(proc)
    assert "broker cli-broker stopped" in rest and "name server stopped" in rest
    assert (tmp_path / "store" / "config" / "topics.json").exists()
    ready = f"is registered with name server 127.0.0.1:{ns_port}: ready, clients use namesrvAddr=127.0.0.1:{ns_port}"
    assert ready in "".join(proc.log), "the log never says where clients connect"


@pytest.fixture
def namesrv_proc(tmp_path):
    conf = tmp_path / "ns.conf"
    conf.write_text(f"listenPort=0\nbindAddress=127.0.0.1\nkvConfigPath={tmp_path / 'kv.json'}\n")
    proc, (port,), _ = start(["namesrv", "-c", str(conf)], NAMESRV_UP)
    yield port
    stop(proc)


def test_broker_joins_a_separate_name_server(tmp_path, namesrv_proc):
    port = _free_pair()
    conf = tmp_path / "broker.conf"
    conf.write_text(f"listenPort={port}\nbrokerIP1=127.0.0.1\nbindAddress=127.0.0.1\nbrokerName=joiner\n"
                    f"storePathRootDir={tmp_path / 'bstore'}\nmappedFileSizeCommitLog=1048576\n")
    proc, _, _ = start(["broker", "-c", str(conf), "-n", f"127.0.0.1:{namesrv_proc}"], BROKER_UP)
    try:
        with BlockingAdmin(f"127.0.0.1:{namesrv_proc}") as admin:
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                if "joiner" in admin.get_cluster_info().broker_addr_table:
                    break
                time.sleep(0.1)
            route = admin.get_route_info("TBW102")
            assert route.broker_datas[0].broker_addrs == {0: f"127.0.0.1:{port}"}
    finally:
        rest = stop(proc)
    assert "broker joiner stopped" in rest
