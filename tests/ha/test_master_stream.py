"""A FerryMQ master's HA port as Apache's DefaultHAClient sees it, driven over a raw socket."""

from __future__ import annotations

import socket
import time

import pytest
from ferrymq.server.ha.protocol import TransferReader, encode_report
from ferrymq.testing import FerryMQServer
from ferrymq.testing.ports import LOOPBACK, free_port

from .helpers import commitlog_bytes, commitlog_range, send

SEGMENT = 64 * 1024
BATCH = 4096


@pytest.fixture(scope="module")
def master(tmp_path_factory):
    port = free_port(also_free=(-2, 1))
    server = FerryMQServer(tmp_path_factory.mktemp("ha-stream"), {
        "listenPort": port, "mappedFileSizeCommitLog": SEGMENT, "haTransferBatchSize": BATCH,
        "haSendHeartbeatInterval": 200, "haHousekeepingInterval": 1000}).start()
    for i in range(120):  # past the first segment
        assert send(server.broker_addr, "HaStream", b"s%03d" % i + b"z" * 800).code == 0
    yield server
    server.kill()


def ha_connection(master: FerryMQServer) -> socket.socket:
    return socket.create_connection((LOOPBACK, master.broker_port + 1), timeout=5)


def read_frames(sock: socket.socket, until) -> list:
    reader, frames = TransferReader(), []
    deadline = time.monotonic() + 5
    while not until(frames) and time.monotonic() < deadline:
        frames += reader.feed(sock.recv(65536))
    return frames


def test_an_empty_slave_is_streamed_the_last_segment_in_batches_of_haTransferBatchSize(master):
    _low, high = commitlog_range(master.broker_addr)
    start = high - high % SEGMENT
    with ha_connection(master) as sock:
        sock.sendall(encode_report(0))
        frames = read_frames(sock, lambda got: sum(len(f.data) for f in got) >= high - start)
    data = [f for f in frames if f.data]
    assert data[0].offset == start and all(len(f.data) <= BATCH for f in data)
    assert [f.offset for f in data] == [start + sum(len(g.data) for g in data[:i]) for i in range(len(data))]
    assert b"".join(bytes(f.data) for f in data) == commitlog_bytes(master.home / "store" / "commitlog", start, high)


def test_a_slave_is_streamed_from_the_offset_it_reports_then_heartbeats(master):
    _low, high = commitlog_range(master.broker_addr)
    with ha_connection(master) as sock:
        sock.sendall(encode_report(high - 100))
        frames = read_frames(sock, lambda got: any(f.is_heartbeat for f in got))
    assert frames[0].offset == high - 100 and bytes(frames[0].data) == \
        commitlog_bytes(master.home / "store" / "commitlog", high - 100, high)
    assert frames[-1].is_heartbeat and frames[-1].offset == high


def test_the_master_closes_a_connection_its_slave_stopped_reporting_on(master):
    with ha_connection(master) as sock:
        sock.sendall(encode_report(0))
        started = time.monotonic()
        while sock.recv(65536):
            assert time.monotonic() - started < 5, "still open long after haHousekeepingInterval"
    assert time.monotonic() - started >= 0.9
