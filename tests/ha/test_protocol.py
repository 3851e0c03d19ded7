"""The classic HA codec: byte layouts as Apache's DefaultHAClient/DefaultHAConnection write them, and
reassembly of reports and frames split anywhere by TCP."""

from __future__ import annotations

import struct

import pytest
from ferrymq.server.ha.protocol import (
    ProtocolError,
    ReportReader,
    TransferReader,
    encode_report,
    encode_transfer_header,
    first_transfer_offset,
)


def test_report_and_header_layouts_are_big_endian_int64_and_int32():
    assert encode_report(0x0102030405060708) == bytes.fromhex("0102030405060708")
    assert encode_transfer_header(1 << 32, 5) == struct.pack(">q", 1 << 32) + bytes.fromhex("00000005")


def test_master_keeps_the_last_complete_report_of_a_read():
    reader = ReportReader()
    assert reader.feed(encode_report(10) + encode_report(20) + encode_report(30)[:3]) == 20
    assert reader.feed(b"") is None
    assert reader.feed(encode_report(30)[3:]) == 30


def test_a_report_split_byte_by_byte_is_read_once_complete():
    reader = ReportReader()
    data = encode_report(123456789)
    assert [reader.feed(data[i:i + 1]) for i in range(8)] == [None] * 7 + [123456789]


def test_a_negative_report_is_a_protocol_error():
    with pytest.raises(ProtocolError):
        ReportReader().feed(encode_report(-1))


def test_frames_and_heartbeats_come_out_in_order_whatever_the_split():
    stream = (encode_transfer_header(100, 3) + b"abc" + encode_transfer_header(103, 0)
              + encode_transfer_header(103, 4) + b"wxyz")
    for cut in range(len(stream) + 1):
        reader = TransferReader()
        frames = reader.feed(stream[:cut]) + reader.feed(stream[cut:])
        assert [(f.offset, bytes(f.data), f.is_heartbeat) for f in frames] == [
            (100, b"abc", False), (103, b"", True), (103, b"wxyz", False)]
        assert reader.buffered == 0


def test_frame_bodies_are_views_of_the_received_bytes_not_copies():
    data = encode_transfer_header(0, 4) + b"body"
    (frame,) = TransferReader().feed(data)
    assert frame.data.obj is data


def test_an_impossible_frame_size_is_a_protocol_error_not_a_buffer():
    with pytest.raises(ProtocolError):
        TransferReader(max_body=1024).feed(encode_transfer_header(0, 1025))
    with pytest.raises(ProtocolError):
        TransferReader().feed(encode_transfer_header(0, -1))


def test_an_empty_slave_starts_at_the_masters_last_segment():
    assert first_transfer_offset(0, 0, 1024) == 0
    assert first_transfer_offset(0, 2500, 1024) == 2048
    assert first_transfer_offset(700, 2500, 1024) == 700
