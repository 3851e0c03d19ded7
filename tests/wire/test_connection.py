"""The sans-I/O connection core: plain bytes in and out, time passed in; no socket, no reactor."""

from __future__ import annotations

import struct

import pytest

from ferrymq.wire.codes import Flag, SerializeType
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.connection import (
    CLOSED,
    CLOSING,
    OPEN,
    Connection,
    ConnectionStateError,
    ProtocolError,
    ResponseReceived,
    UnmatchedResponse,
)
from ferrymq.wire.frame import FrameDecoder, encode


def answer(req: RemotingCommand, **ext: str) -> RemotingCommand:
    return req.response(ext_fields=ext or None)


def sent(conn: Connection) -> list[RemotingCommand]:
    """What the peer would decode from everything the connection has queued."""
    return FrameDecoder().feed(conn.data_to_send())


# ------------------------------------------------------------------ correlation


def test_responses_are_matched_to_requests_by_opaque_in_any_order():
    conn = Connection()
    first = request(10, opaque=1)
    second = request(11, opaque=2)
    conn.send_request(first, deadline=5.0, context="first")
    conn.send_request(second, deadline=5.0, context="second")
    assert [c.opaque for c in sent(conn)] == [1, 2]

    events = conn.receive_data(encode(answer(second, v="b")) + encode(answer(first, v="a")))

    assert [(type(e), e.context, e.command.ext("v")) for e in events] == [
        (ResponseReceived, "second", "b"),
        (ResponseReceived, "first", "a"),
    ]
    assert events[0].request.code == 11
    assert conn.pending_count == 0


def test_a_response_matching_no_request_is_reported_unmatched():
    conn = Connection()
    stray = RemotingCommand(code=0, opaque=99, flag=int(Flag.RESPONSE))
    [event] = conn.receive_data(encode(stray))
    assert isinstance(event, UnmatchedResponse) and event.command.opaque == 99


def test_an_opaque_still_pending_is_replaced_before_sending():
    conn = Connection()
    conn.send_request(request(10, opaque=7), deadline=5.0, context="a")
    again = request(10, opaque=7)
    conn.send_request(again, deadline=5.0, context="b")
    assert again.opaque != 7
    assert [c.opaque for c in sent(conn)] == [7, again.opaque]
    [event] = conn.receive_data(encode(answer(again)))
    assert event.context == "b" and conn.pending_count == 1


def test_frames_split_across_reads_are_reassembled():
    conn = Connection()
    req = request(10, {"k": "v"}, b"body", opaque=3)
    conn.send_request(req, deadline=5.0, context="ctx")
    data = encode(request(20, opaque=50)) + encode(answer(req, v="x"))
    events = []
    for i in range(len(data)):
        events += conn.receive_data(data[i : i + 1])
    assert [e.context for e in events] == ["ctx"]
    assert conn.next_request().opaque == 50


def test_inbound_requests_queue_in_order_for_the_processor():
    conn = Connection()
    conn.receive_data(encode(request(1, opaque=1)) + encode(request(2, opaque=2)))
    assert conn.queued_requests == 2 and conn.requests_ready
    assert [conn.next_request().opaque, conn.next_request().opaque, conn.next_request()] == [1, 2, None]
    assert conn.inflight == 2 and not conn.is_idle


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_a_response_is_written_as_the_request_arrived(stype):
    conn = Connection()
    conn.receive_data(encode(request(1, {"a": "b"}, opaque=4, serialize_type=stype)))
    req = conn.next_request()
    conn.send_response(req, answer(req, v="ok"))
    [resp] = sent(conn)
    assert (resp.opaque, resp.is_response, resp.serialize_type, resp.ext("v")) == (4, True, stype, "ok")
    assert conn.inflight == 0 and conn.is_idle


# ------------------------------------------------------------------ oneway


def test_a_oneway_request_leaves_no_pending_entry():
    conn = Connection()
    cmd = request(30, opaque=8)
    conn.send_oneway(cmd)
    [out] = sent(conn)
    assert out.is_oneway and out.opaque == 8
    assert conn.pending_count == 0 and conn.next_deadline() is None


def test_the_answer_to_an_inbound_oneway_request_is_dropped():
    conn = Connection()
    conn.receive_data(encode(request(30, oneway=True, opaque=9)) + encode(request(31, opaque=10)))
    oneway = conn.next_request()
    conn.send_response(oneway, answer(oneway))
    normal = conn.next_request()
    conn.send_response(normal, answer(normal))
    assert [c.opaque for c in sent(conn)] == [10]
    assert conn.is_idle


def test_no_answer_finishes_a_request_without_output():
    conn = Connection()
    conn.receive_data(encode(request(1, opaque=1)))
    conn.send_response(conn.next_request(), None)
    assert conn.data_to_send() == b"" and conn.is_idle


# ------------------------------------------------------------------ deadlines


def test_requests_expire_at_their_deadline_earliest_first():
    conn = Connection()
    late = request(1, opaque=1)
    early = request(2, opaque=2)
    conn.send_request(late, deadline=10.0, context="late")
    conn.send_request(early, deadline=3.0, context="early")
    assert conn.next_deadline() == 3.0
    assert conn.expire(2.9) == []
    [expired] = conn.expire(3.0)
    assert (expired.context, expired.opaque, expired.code) == ("early", 2, 2)
    assert conn.pending_count == 1 and conn.next_deadline() == 10.0
    # The answer to an expired request no longer matches anything.
    assert isinstance(conn.receive_data(encode(answer(early)))[0], UnmatchedResponse)
    assert [e.context for e in conn.expire(100.0)] == ["late"]
    assert conn.next_deadline() is None


def test_an_answered_request_never_expires():
    conn = Connection()
    req = request(1, opaque=1)
    conn.send_request(req, deadline=1.0, context="a")
    conn.send_request(request(2, opaque=2), deadline=2.0, context="b")
    conn.receive_data(encode(answer(req)))
    assert conn.next_deadline() == 2.0
    assert [e.context for e in conn.expire(5.0)] == ["b"]


def test_deadline_bookkeeping_stays_bounded_when_every_request_is_answered():
    conn = Connection()
    for i in range(1, 5001):
        req = request(1, opaque=i)
        conn.send_request(req, deadline=float(i), context=i)
        conn.receive_data(encode(answer(req)))
        conn.data_to_send()
    conn.send_request(request(1, opaque=9999), deadline=9999.0, context="live")
    assert len(conn._deadlines) <= 2 * conn.pending_count + 65
    assert conn.next_deadline() == 9999.0


# ------------------------------------------------------------------ write batching


def test_everything_queued_since_the_last_call_leaves_in_one_buffer():
    conn = Connection()
    a = request(1, opaque=1)
    b = request(2, opaque=2)
    conn.send_request(a, deadline=5.0)
    conn.send_oneway(b)
    assert conn.data_to_send() == encode(a) + encode(b)
    assert conn.data_to_send() == b""


def test_answers_of_one_read_are_batched():
    conn = Connection()
    conn.receive_data(b"".join(encode(request(1, opaque=i)) for i in (1, 2, 3)))
    while (req := conn.next_request()) is not None:
        conn.send_response(req, answer(req))
    assert [c.opaque for c in sent(conn)] == [1, 2, 3]


# ------------------------------------------------------------------ back-pressure


def test_queued_bytes_above_the_high_water_mark_stop_request_handling_until_written():
    conn = Connection(high_water=100, low_water=40)
    conn.receive_data(b"".join(encode(request(1, opaque=i)) for i in (1, 2)))
    first = conn.next_request()
    conn.send_response(first, first.response(body=b"x" * 200))
    assert conn.backed_up and conn.reading_paused
    assert conn.next_request() is None and not conn.requests_ready
    conn.data_to_send()  # handed to a transport that sent it all
    assert not conn.backed_up
    assert conn.next_request().opaque == 2


def test_transport_backlog_pauses_at_high_water_and_resumes_at_low_water():
    conn = Connection(high_water=100, low_water=40)
    conn.transport_buffered(101)
    assert conn.backed_up and conn.reading_paused
    conn.transport_buffered(60)  # between the marks: still paused
    assert conn.backed_up
    conn.data_to_send()  # nothing of ours queued: the transport's backlog still counts
    assert conn.backed_up
    conn.transport_buffered(40)
    assert not conn.backed_up and not conn.reading_paused
    conn.transport_buffered(80)  # rising again below high water: not paused
    assert not conn.backed_up


def test_the_low_water_mark_defaults_to_half_the_high_as_netty():
    assert Connection(high_water=64 * 1024).low_water == 32 * 1024


def test_draining_pauses_reading_but_still_hands_out_requests_already_read():
    conn = Connection()
    conn.receive_data(encode(request(1, opaque=1)))
    conn.start_draining()
    assert conn.reading_paused and not conn.backed_up and not conn.is_idle
    req = conn.next_request()
    assert req is not None and not conn.is_idle
    conn.send_response(req, answer(req))
    assert conn.is_idle


# ------------------------------------------------------------------ idle close


def test_a_silent_connection_is_reported_idle_after_the_timeout():
    conn = Connection(idle_timeout=10.0)
    assert not conn.should_close_idle(0.0)  # activity since the start: the silence begins now
    assert conn.idle_since == 0.0
    assert not conn.should_close_idle(9.9)
    assert conn.should_close_idle(10.0)


def test_any_frame_restarts_the_idle_period():
    conn = Connection(idle_timeout=10.0)
    conn.should_close_idle(0.0)
    conn.receive_data(encode(request(1, opaque=1)))
    assert conn.idle_since is None
    assert not conn.should_close_idle(12.0)  # seen active: silence restarts at 12
    conn.send_oneway(request(2))
    assert not conn.should_close_idle(20.0)
    assert not conn.should_close_idle(29.0)
    assert conn.should_close_idle(30.0)


def test_idle_close_is_off_with_a_zero_timeout():
    conn = Connection(idle_timeout=0)
    assert not conn.should_close_idle(0.0) and not conn.should_close_idle(1e9)


# ------------------------------------------------------------------ bad input


def test_an_oversized_frame_is_a_protocol_error():
    conn = Connection(max_frame_size=1024)
    [event] = conn.receive_data(struct.pack(">i", 1025))
    assert isinstance(event, ProtocolError) and "exceeds the limit of 1024 bytes" in event.reason
    assert conn.state is CLOSING


@pytest.mark.parametrize(
    "garbage, words",
    [
        (struct.pack(">i", 2) + b"\x00\x00", "smaller than the 4-byte header-length word"),
        (struct.pack(">ii", 12, 8) + b"not json", ""),
        (struct.pack(">ii", 8, 0x05000000) + b"\x00" * 4, "unknown header serialization type 5"),
    ],
    ids=["short", "badjson", "badtype"],
)
def test_garbage_bytes_are_a_protocol_error_that_drops_queued_requests(garbage, words):
    conn = Connection()
    events = conn.receive_data(encode(request(1, opaque=1)))
    assert events == [] and conn.queued_requests == 1
    [event] = conn.receive_data(garbage)
    assert isinstance(event, ProtocolError) and words in event.reason
    assert conn.state is CLOSING and conn.next_request() is None and conn.queued_requests == 0
    # Nothing after a bad frame is read.
    assert conn.receive_data(encode(request(1, opaque=2))) == []


# ------------------------------------------------------------------ state table


def test_a_closing_connection_refuses_new_requests_but_still_answers():
    conn = Connection()
    conn.receive_data(encode(request(1, opaque=1)))
    req = conn.next_request()
    conn.close()
    assert conn.state is CLOSING
    with pytest.raises(ConnectionStateError, match=r"send_request\(\) is not allowed in state CLOSING"):
        conn.send_request(request(2), deadline=1.0)
    conn.send_response(req, answer(req))
    conn.send_oneway(request(3, opaque=3))
    assert [c.opaque for c in sent(conn)] == [1, 3]
    assert conn.receive_data(encode(request(4))) == []
    with pytest.raises(ConnectionStateError, match="close"):
        conn.close()


def test_a_closed_connection_fails_its_pending_requests_and_sends_nothing():
    conn = Connection()
    conn.send_request(request(1, opaque=1), deadline=5.0, context="a")
    conn.send_request(request(2, opaque=2), deadline=5.0, context="b")
    conn.receive_data(encode(request(3, opaque=3)) + encode(request(4, opaque=4)))
    handed = conn.next_request()
    lost = conn.connection_lost()
    assert conn.state is CLOSED
    assert sorted(p.context for p in lost) == ["a", "b"]
    assert conn.pending_count == 0 and conn.next_deadline() is None and conn.queued_requests == 0
    assert conn.data_to_send() == b""
    conn.send_response(handed, answer(handed))  # a late answer: dropped, the request finished
    assert conn.data_to_send() == b"" and conn.is_idle
    for call in (lambda: conn.send(request(5)), lambda: conn.send_request(request(6), 1.0),
                 lambda: conn.receive_data(b"x"), conn.close, conn.connection_lost):
        with pytest.raises(ConnectionStateError, match="in state CLOSED"):
            call()


def test_an_open_connection_accepts_every_call():
    conn = Connection()
    assert conn.state is OPEN
    conn.send(request(1))
    conn.send_request(request(2), 1.0)
    conn.receive_data(b"")
    conn.close()
    conn.connection_lost()


def test_an_unencodable_request_leaves_no_pending_entry():
    conn = Connection()
    bad = request(1, opaque=1)
    bad.serialize_type = 7  # no encoder
    with pytest.raises(KeyError):
        conn.send_request(bad, deadline=1.0)
    assert conn.pending_count == 0 and conn.data_to_send() == b""
