"""The Twisted adapter over the connection core, on a StringTransport and a task.Clock: what it writes
and when, its one deadline timer, and how it maps back-pressure to the producer API."""

from __future__ import annotations

import pytest
from twisted.internet import task
from twisted.internet.testing import StringTransport

from ferrymq.remoting import RemotingClosedError, RemotingTimeoutError, TransportOptions
from ferrymq.remoting.latency import BOUNDS_MS, SAMPLE_EVERY_READS, RequestLatency
from ferrymq.remoting.limits import BAD_FRAME, FRAME_TOO_LARGE, IDLE, TOO_MANY_IN_FLIGHT
from ferrymq.remoting.pending import Pending
from ferrymq.remoting.protocol import RemotingProtocol
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.frame import FrameDecoder, encode

ECHO = 1
LATER = 2


class RecordingTransport(StringTransport):
    """Keeps every write apart, to count them."""

    def __init__(self):
        super().__init__()
        self.writes: list[bytes] = []

    def write(self, data):
        self.writes.append(data)
        super().write(data)


class Harness:
    def __init__(self, latency: RequestLatency | None = None, **options):
        self.clock = task.Clock()
        self.promises: list[tuple[RemotingCommand, Pending]] = []
        self.handled: list[int] = []
        processor = {ECHO: self.echo, LATER: self.later, RequestCode.PULL_MESSAGE: self.later}
        self.proto = RemotingProtocol(processor, TransportOptions(idle_timeout=0, **options), self.clock,
                                      latency=latency)
        self.transport = RecordingTransport()
        self.proto.makeConnection(self.transport)

    def echo(self, cmd, channel):
        self.handled.append(cmd.opaque)
        return cmd.response(body=cmd.body)

    def later(self, cmd, channel):
        p = Pending()
        self.promises.append((cmd, p))
        return p

    def written(self, index: int | None = None) -> list[RemotingCommand]:
        data = b"".join(self.transport.writes) if index is None else self.transport.writes[index]
        return FrameDecoder().feed(data)


def frames(*cmds: RemotingCommand) -> bytes:
    return b"".join(encode(c) for c in cmds)


def test_the_answers_to_one_read_leave_in_one_write():
    h = Harness()
    h.proto.dataReceived(frames(*(request(ECHO, opaque=i) for i in (1, 2, 3))))
    assert len(h.transport.writes) == 1
    assert [c.opaque for c in h.written(0)] == [1, 2, 3]


def test_late_answers_of_one_reactor_turn_leave_together_at_its_end():
    h = Harness()
    h.proto.dataReceived(frames(request(LATER, opaque=1), request(LATER, opaque=2)))
    assert h.transport.writes == [] and h.proto.inflight == 2
    for cmd, p in h.promises:
        p.callback(cmd.response())
    assert h.transport.writes == []
    h.clock.advance(0)
    assert len(h.transport.writes) == 1 and [c.opaque for c in h.written(0)] == [1, 2]
    assert h.proto.inflight == 0


def test_requests_time_out_on_one_timer_at_the_earliest_deadline():
    h = Harness()
    short = h.proto.request(request(ECHO, opaque=1), 1.0)
    long = h.proto.request(request(ECHO, opaque=2), 2.0)
    answered = [h.proto.request(request(ECHO, opaque=10 + i), 5.0) for i in range(50)]
    assert len(h.clock.getDelayedCalls()) == 1
    failures = []
    short.addErrback(failures.append)
    h.clock.advance(1.0)
    assert len(failures) == 1 and isinstance(failures[0].value, RemotingTimeoutError)
    assert (failures[0].value.opaque, failures[0].value.timeout) == (1, 1.0)
    h.proto.dataReceived(frames(*(RemotingCommand(code=0, opaque=10 + i, flag=1) for i in range(50))))
    assert all(d.called for d in answered)
    results = []
    long.addBoth(results.append)
    h.clock.advance(1.0)
    assert isinstance(results[0].value, RemotingTimeoutError) and h.proto.pending_count == 0
    assert h.clock.getDelayedCalls() == []


def test_a_response_fires_the_request_deferred():
    h = Harness()
    d = h.proto.request(request(ECHO, opaque=5), 3.0)
    h.proto.dataReceived(encode(RemotingCommand(code=0, opaque=5, flag=1, remark="ok")))
    assert d.called and d.result.remark == "ok"


def test_a_paused_transport_stops_request_handling_until_it_drains():
    h = Harness(write_high_water=1024)
    h.proto.pauseProducing()  # Twisted: its buffer passed bufferSize
    assert h.proto.paused and h.transport.producerState == "paused"
    h.proto.dataReceived(frames(request(ECHO, opaque=1)))
    assert h.handled == []
    h.proto.resumeProducing()  # Twisted: its buffer is empty
    assert not h.proto.paused and h.transport.producerState == "producing"
    assert h.handled == [1] and [c.opaque for c in h.written()] == [1]


def test_answers_above_the_high_water_mark_are_written_before_more_requests_are_handled():
    h = Harness(write_high_water=1024)
    big = b"x" * 2000
    h.proto.dataReceived(frames(request(ECHO, body=big, opaque=1), request(ECHO, opaque=2)))
    # The first answer alone passes the mark: written at once, then the second handled.
    assert [len(FrameDecoder().feed(w)) for w in h.transport.writes] == [1, 1]
    assert h.handled == [1, 2]


def test_a_drain_keeps_reading_paused_and_fires_once_answers_are_written():
    h = Harness()
    h.proto.dataReceived(frames(request(LATER, opaque=1)))
    drained = h.proto.drain()
    assert h.transport.producerState == "paused" and not drained.called
    h.proto.resumeProducing()
    assert h.transport.producerState == "paused"
    cmd, p = h.promises[0]
    p.callback(cmd.response())
    assert drained.called and [c.opaque for c in h.written()] == [1]


def test_a_lost_connection_fails_pending_requests():
    h = Harness()
    d = h.proto.request(request(ECHO, opaque=1), 3.0)
    failures = []
    d.addErrback(failures.append)
    h.proto.connectionLost(None)
    assert isinstance(failures[0].value, RemotingClosedError)
    assert h.clock.getDelayedCalls() == []
    with pytest.raises(RemotingClosedError):
        h.proto.send(request(ECHO))


def test_a_bad_frame_aborts_the_connection(caplog):
    h = Harness(max_frame_size=64)
    with caplog.at_level("WARNING", logger="ferrymq.remoting"):
        h.proto.dataReceived(b"\x00\x00\x10\x00")
    assert h.transport.disconnected
    assert any("exceeds the limit of 64 bytes" in r.getMessage() for r in caplog.records)
    assert h.proto.refusals.counts[FRAME_TOO_LARGE] == 1 and h.proto.refusals.counts[BAD_FRAME] == 0


def test_garbage_is_counted_apart_from_an_oversized_frame():
    h = Harness()
    h.proto.dataReceived(b"\x00\x00\x00\x02\x00\x00")
    assert h.transport.disconnected
    assert h.proto.refusals.counts[BAD_FRAME] == 1 and h.proto.refusals.counts[FRAME_TOO_LARGE] == 0


def test_requests_past_the_in_flight_limit_are_answered_busy_as_apache():
    h = Harness(max_inflight_per_connection=2)
    h.proto.dataReceived(frames(*(request(LATER, opaque=i) for i in (1, 2, 3, 4))))
    busy = h.written()
    assert [(c.opaque, c.code, c.remark) for c in busy] == [
        (3, ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy, start flow control for a while"),
        (4, ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy, start flow control for a while")]
    assert len(h.promises) == 2 and h.proto.refusals.counts[TOO_MANY_IN_FLIGHT] == 2
    cmd, p = h.promises[0]
    p.callback(cmd.response())  # one answered: room for one more
    h.proto.dataReceived(frames(request(ECHO, opaque=5)))
    assert h.handled == [5]


def test_a_silent_connection_is_closed_after_the_idle_timeout():
    clock = task.Clock()
    proto = RemotingProtocol({}, TransportOptions(idle_timeout=4.0), clock)
    transport = StringTransport()
    proto.makeConnection(transport)
    clock.pump([1.0] * 4)
    proto.dataReceived(encode(request(ECHO, oneway=True)))
    clock.pump([1.0] * 4)
    assert not transport.disconnected
    clock.pump([1.0] * 2)
    assert transport.disconnected
    assert proto.refusals.counts[IDLE] == 1


def test_the_first_request_of_one_read_in_n_is_timed_per_request_and_response_code():
    latency = RequestLatency()
    h = Harness(latency)
    for i in range(SAMPLE_EVERY_READS * 3):
        h.proto.dataReceived(frames(request(ECHO, opaque=2 * i), request(ECHO, opaque=2 * i + 1)))
    assert len(h.handled) == SAMPLE_EVERY_READS * 6  # every request is handled, timed or not
    [(key, counts)] = latency.histograms.items()
    assert key == (ECHO, ResponseCode.SUCCESS, False)
    assert sum(counts[:-1]) == 3 and counts[0] == 3  # three samples, each well under 1 ms
    assert len(counts) == len(BOUNDS_MS) + 2


def test_a_held_pull_is_timed_until_its_answer_as_a_long_poll():
    latency = RequestLatency()
    latency.countdown = 1
    h = Harness(latency)
    h.proto.dataReceived(frames(request(RequestCode.PULL_MESSAGE, opaque=1)))
    assert latency.histograms == {}
    cmd, p = h.promises[0]
    p.callback(cmd.response(ResponseCode.PULL_NOT_FOUND))
    [(key, counts)] = latency.histograms.items()
    assert key == (RequestCode.PULL_MESSAGE, ResponseCode.PULL_NOT_FOUND, True)
    assert sum(counts[:-1]) == 1
    assert [c.opaque for c in h.written()] == [] and h.proto.inflight == 0  # answered at the turn's end
    h.clock.advance(0)
    assert [c.opaque for c in h.written()] == [1]
