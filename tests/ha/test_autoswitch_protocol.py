"""The AutoSwitch HA protocol's frames, byte for byte as Apache's AutoSwitchHAClient/Connection lay them
out, and the slave's truncation point."""

from __future__ import annotations

import struct

import pytest
from ferrymq.server.ha.autoswitch.protocol import (
    MasterFrameReader,
    MasterHandshake,
    SlaveFrameReader,
    SlaveHandshake,
    SlaveReport,
    encode_master_handshake,
    encode_slave_handshake,
    encode_slave_report,
    encode_transfer_header,
    truncate_point,
)
from ferrymq.server.ha.protocol import ProtocolError
from ferrymq.wire.bodies import EpochEntry


def test_the_slave_frames_are_apaches_layout():
    # state HANDSHAKE(1) | isSyncFromLastFile | isAsyncLearner | slave brokerId
    assert encode_slave_handshake(2, sync_from_last_file=True) == struct.pack(">ihhq", 1, 1, 0, 2)
    # state TRANSFER(2) | max offset
    assert encode_slave_report(4096) == struct.pack(">iq", 2, 4096)


def test_the_master_reads_a_handshake_then_reports_split_anywhere():
    stream = encode_slave_handshake(3) + encode_slave_report(0) + encode_slave_report(120)
    reader = SlaveFrameReader()
    frames = [f for i in range(0, len(stream), 5) for f in reader.feed(stream[i:i + 5])]
    assert frames == [SlaveHandshake(3, False, False), SlaveReport(0), SlaveReport(120)]


def test_the_master_handshake_carries_its_epochs():
    entries = [EpochEntry(1, 0), EpochEntry(3, 500)]
    data = encode_master_handshake(800, entries)
    # state | body size (12 per entry) | max offset | last epoch, then epoch | start offset per entry
    assert data == struct.pack(">iiqi", 1, 24, 800, 3) + struct.pack(">iq", 1, 0) + struct.pack(">iq", 3, 500)
    frames = MasterFrameReader().feed(data)
    assert frames == [MasterHandshake(800, 3, [EpochEntry(1, 0), EpochEntry(3, 500)])]


def test_transfer_frames_carry_the_epoch_and_the_confirm_offset():
    body = b"commit log bytes"
    data = encode_transfer_header(500, len(body), 3, 500, 480) + body + encode_transfer_header(516, 0, 3, 500, 516)
    assert data[:36] == struct.pack(">iiqiqq", 2, len(body), 500, 3, 500, 480)
    reader = MasterFrameReader()
    frames = reader.feed(data[:40]) + reader.feed(data[40:])
    assert [(f.offset, f.epoch, f.epoch_start, f.confirm_offset, bytes(f.data)) for f in frames] == [
        (500, 3, 500, 480, body), (516, 3, 500, 516, b"")]


def test_a_frame_in_an_unknown_state_is_refused():
    with pytest.raises(ProtocolError):
        SlaveFrameReader().feed(struct.pack(">iq", 4, 0))
    with pytest.raises(ProtocolError):
        MasterFrameReader().feed(struct.pack(">iiqi", 0, 0, 0, 0))


def test_a_slave_cuts_its_log_where_its_epochs_and_the_masters_part():
    # the slave was master in epoch 2 and wrote up to 300; the new master (epoch 3) took over at 250
    local = [EpochEntry(1, 0), EpochEntry(2, 100)]
    master = [EpochEntry(1, 0), EpochEntry(2, 100), EpochEntry(3, 250)]
    assert truncate_point(local, 300, master, 900) == 250
    # a slave behind the master keeps all it has
    assert truncate_point(local, 180, master, 900) == 180
    # same last epoch: the shorter log bounds it
    assert truncate_point([EpochEntry(1, 0)], 70, [EpochEntry(1, 0)], 50) == 50
    # a new replica keeps its log; logs sharing no epoch have no safe point
    assert truncate_point([], 0, master, 900) is None
    assert truncate_point([EpochEntry(1, 10)], 70, master, 900) == -1
