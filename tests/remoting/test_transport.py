"""The transport over real loopback sockets: correlation, timeouts, oneway, errors, bad frames,
back-pressure, idle close, graceful shutdown, client pool and server-initiated requests."""

from __future__ import annotations

import socket
import struct
import time

import pytest
from twisted.internet import defer, task

from ferrymq.remoting import (
    RemotingClient,
    RemotingClosedError,
    RemotingConnectError,
    RemotingServer,
    RemotingTimeoutError,
    TransportOptions,
    limits,
)
from ferrymq.wire.codes import Flag, RequestCode, ResponseCode, SerializeType
from ferrymq.wire.command import request
from ferrymq.wire.errors import MissingField
from ferrymq.wire.frame import encode

ECHO = 1000
SLOW = 1001
NEVER = 1002
BOOM = 1003
FIELD = 1004
BIG = 1005
COUNT = 1006


def _reactor():
    from twisted.internet import reactor

    return reactor


class Handlers:
    def __init__(self):
        self.oneway_seen: list[int] = []
        self.slow_started: list[str] = []
        self.count = 0
        self.big_body = b"x" * (256 * 1024)

    def table(self):
        return {
            ECHO: self.echo,
            SLOW: self.slow,
            NEVER: lambda cmd, ch: defer.Deferred(),
            BOOM: self.boom,
            FIELD: self.field,
            BIG: lambda cmd, ch: cmd.response(body=self.big_body),
            COUNT: self.counted,
        }

    def echo(self, cmd, channel):
        return cmd.response(ext_fields={"v": cmd.ext("v", ""), "peer": channel.remote_address}, body=cmd.body)

    def slow(self, cmd, channel):
        delay = float(cmd.ext("delay", "0.1"))
        self.slow_started.append(cmd.ext("v", ""))
        return task.deferLater(_reactor(), delay, lambda: cmd.response(ext_fields={"v": cmd.ext("v", "")}))

    def boom(self, cmd, channel):
        raise RuntimeError("kaboom")

    def field(self, cmd, channel):
        raise MissingField("GetRouteInfoRequestHeader", "topic")

    def counted(self, cmd, channel):
        self.count += 1
        self.oneway_seen.append(cmd.opaque)
        return cmd.response()


@pytest.fixture
def server(rt):
    handlers = Handlers()
    made = []

    def start(options: TransportOptions | None = None, processor=None):
        srv = RemotingServer(processor if processor is not None else handlers.table(), options, name="test")
        rt.call(srv.listen, 0, "127.0.0.1")
        srv.handlers = handlers
        made.append(srv)
        return srv

    yield start
    for srv in made:
        rt.call(srv.stop, 1.0)


@pytest.fixture
def client(rt):
    made = []

    def make(processor=None):
        c = RemotingClient(processor)
        made.append(c)
        return c

    yield make
    for c in made:
        rt.call(c.close)


def addr_of(srv) -> str:
    return srv.address


def test_concurrent_requests_are_matched_by_opaque(rt, server, client):
    srv = server()
    c = client()

    def many():
        # Later requests finish first: responses arrive out of order and must still match.
        ds = [
            c.invoke(srv.address, request(SLOW, {"v": str(i), "delay": str(0.02 * (5 - i))}), 3)
            for i in range(5)
        ]
        return defer.gatherResults(ds)

    responses = rt.call(many)
    assert [r.ext("v") for r in responses] == ["0", "1", "2", "3", "4"]
    assert all(r.code == ResponseCode.SUCCESS and r.is_response for r in responses)


def test_request_timeout_fails_with_typed_error(rt, server, client):
    srv = server()
    c = client()
    started = time.monotonic()
    with pytest.raises(RemotingTimeoutError) as info:
        rt.call(c.invoke, srv.address, request(NEVER), 0.2)
    assert 0.15 < time.monotonic() - started < 2
    assert info.value.code == NEVER
    # The connection survives a timeout and keeps serving.
    assert rt.call(c.invoke, srv.address, request(ECHO, {"v": "after"}), 2).ext("v") == "after"


def test_oneway_is_never_answered(rt, server, raw_client):
    srv = server()
    raw = raw_client(("127.0.0.1", srv.port))
    raw.send(request(COUNT, oneway=True, opaque=11))
    raw.send(request(BOOM, oneway=True, opaque=12))
    raw.send(request(9999, oneway=True, opaque=13))
    raw.send(request(ECHO, {"v": "x"}, opaque=14))
    first = raw.recv()
    assert first.opaque == 14 and first.ext("v") == "x"
    assert srv.handlers.oneway_seen == [11]
    with pytest.raises(socket.timeout):
        raw.recv(timeout=0.2)


def test_a_new_processor_answers_the_connections_already_open(rt, server, client):
    """A broker swaps its processor when the controller changes its role: a client connected before the
    swap (a producer that reached the broker while it was a slave) is answered by the new one."""

    def answering(v):
        return {ECHO: lambda cmd, ch: cmd.response(ext_fields={"v": v})}

    srv = server(processor=answering("slave"))
    c = client()
    assert rt.call(c.invoke, srv.address, request(ECHO), 2).ext("v") == "slave"
    rt.call(setattr, srv, "processor", answering("master"))
    assert rt.call(c.invoke, srv.address, request(ECHO), 2).ext("v") == "master"
    assert len(srv.connections) == 1  # the same connection answered both


def test_unknown_code_answered_as_apache(rt, server, client):
    srv = server()
    c = client()
    resp = rt.call(c.invoke, srv.address, request(4321), 2)
    assert resp.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert resp.remark == " request type 4321 not supported"


def test_handler_errors_become_system_error(rt, server, client):
    srv = server()
    c = client()
    boom = rt.call(c.invoke, srv.address, request(BOOM), 2)
    assert boom.code == ResponseCode.SYSTEM_ERROR and "kaboom" in boom.remark
    field = rt.call(c.invoke, srv.address, request(FIELD), 2)
    assert field.code == ResponseCode.SYSTEM_ERROR
    assert "missing required field 'topic'" in field.remark


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_response_uses_request_serialization(rt, server, raw_client, stype):
    srv = server()
    raw = raw_client(("127.0.0.1", srv.port))
    raw.send(request(ECHO, {"v": "s"}, b"body", serialize_type=stype, opaque=5))
    resp = raw.recv()
    assert resp.serialize_type == stype
    assert (resp.opaque, resp.flag & Flag.RESPONSE, resp.body, resp.ext("v")) == (5, 1, b"body", "s")


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack(">i", 2) + b"\x00\x00",  # length smaller than the header-length word
        struct.pack(">ii", 12, 8) + b"not json",  # unreadable JSON header
        struct.pack(">ii", 8, 0x05000000) + b"\x00" * 4,  # unknown serialization type
        struct.pack(">i", 64 * 1024 * 1024),  # oversized
    ],
    ids=["short", "badjson", "badtype", "oversized"],
)
def test_bad_frame_closes_only_that_connection(rt, server, raw_client, garbage, caplog):
    srv = server(TransportOptions(max_frame_size=1024 * 1024))
    good = raw_client(("127.0.0.1", srv.port))
    bad = raw_client(("127.0.0.1", srv.port))
    good.send(request(ECHO, {"v": "1"}, opaque=1))
    assert good.recv().ext("v") == "1"
    with caplog.at_level("WARNING", logger="ferrymq.remoting"):
        bad.send_raw(garbage)
        assert bad.closed_by_peer()
    assert any("closing connection 127.0.0.1:" in r.getMessage() for r in caplog.records)
    good.send(request(ECHO, {"v": "2"}, opaque=2))
    assert good.recv().ext("v") == "2"
    counts = rt.call(lambda: dict(srv.refusals.counts))
    reason = limits.FRAME_TOO_LARGE if garbage.startswith(struct.pack(">i", 64 * 1024 * 1024)) else limits.BAD_FRAME
    assert {k: v for k, v in counts.items() if v} == {reason: 1}


def test_back_pressure_pauses_reading_until_drained(rt, server, raw_client):
    srv = server(TransportOptions(write_high_water=16 * 1024))
    raw = raw_client(("127.0.0.1", srv.port), rcvbuf=16 * 1024)
    n = 40  # 40 x 256 KiB = 10 MiB of responses, far beyond the socket buffers
    for i in range(n):
        raw.send(request(BIG, opaque=100 + i))

    def paused_state():
        protos = list(srv.connections)
        return len(protos) == 1 and protos[0].paused

    deadline = time.monotonic() + 15  # generous for a loaded machine; normally paused within ms
    while not rt.call(paused_state) and time.monotonic() < deadline:
        time.sleep(0.02)
    def describe():
        return [(p.paused, p.core.queued_requests, p.transport.bufferSize, len(p.transport._tempDataBuffer),
                 p.transport.producerPaused) for p in srv.connections]

    assert rt.call(paused_state), f"server kept reading although its writes piled up: {rt.call(describe)}"
    answered_while_paused = rt.call(lambda: next(iter(srv.connections)).inflight)
    assert answered_while_paused == 0
    got = [raw.recv(timeout=10) for _ in range(n)]
    assert [r.opaque for r in got] == [100 + i for i in range(n)]
    assert all(len(r.body) == 256 * 1024 for r in got)
    assert not rt.call(paused_state)


def test_idle_connection_is_closed(rt, server, raw_client):
    srv = server(TransportOptions(idle_timeout=0.3))
    raw = raw_client(("127.0.0.1", srv.port))
    raw.send(request(ECHO, opaque=1))
    raw.recv()
    started = time.monotonic()
    assert raw.closed_by_peer(timeout=3)
    assert 0.2 < time.monotonic() - started < 2.5


def test_graceful_shutdown_answers_in_flight_then_closes(rt, server, raw_client):
    srv = server()
    port = srv.port
    raw = raw_client(("127.0.0.1", port))
    raw.send(request(SLOW, {"v": "inflight", "delay": "0.3"}, opaque=7))
    deadline = time.monotonic() + 3
    while "inflight" not in srv.handlers.slow_started and time.monotonic() < deadline:
        time.sleep(0.01)  # the stop must come while the call is in flight, however busy the machine
    assert srv.handlers.slow_started == ["inflight"]
    stopped = []
    rt.call(lambda: srv.stop(5.0).addCallback(stopped.append) and None)  # do not wait here
    resp = raw.recv(timeout=3)
    assert resp.opaque == 7 and resp.ext("v") == "inflight"
    assert raw.closed_by_peer(timeout=3)
    deadline = time.monotonic() + 3
    while not stopped and time.monotonic() < deadline:
        time.sleep(0.02)
    assert stopped, "stop() did not complete after the last connection closed"
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


def test_client_reconnects_and_fails_pending_on_close(rt, server, client):
    srv = server()
    c = client()
    assert rt.call(c.invoke, srv.address, request(ECHO, {"v": "a"}), 2).ext("v") == "a"

    def drop_server_side():
        for proto in list(srv.connections):
            proto.transport.abortConnection()

    # A call pending when the connection drops fails with RemotingClosedError...
    def pending_then_drop():
        d = c.invoke(srv.address, request(NEVER), 5)
        _reactor().callLater(0.1, drop_server_side)
        return d

    with pytest.raises(RemotingClosedError):
        rt.call(pending_then_drop)
    # ...and the next call reconnects.
    assert rt.call(c.invoke, srv.address, request(ECHO, {"v": "b"}), 2).ext("v") == "b"


def test_connect_error_is_typed(rt, client):
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    with pytest.raises(RemotingConnectError):
        rt.call(client().invoke, f"127.0.0.1:{port}", request(ECHO), 2)


def test_server_initiated_request_reaches_client_processor(rt, server, client):
    seen = []

    def on_notify(cmd, channel):
        seen.append(cmd.ext("consumerGroup"))
        return cmd.response(ext_fields={"ok": "yes"})

    def ask_back(cmd, channel):
        push = request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {"consumerGroup": "g1"})
        return channel.invoke(push, 2).addCallback(lambda r: cmd.response(ext_fields={"client": r.ext("ok")}))

    srv = server(processor={ECHO: ask_back})
    c = client({RequestCode.NOTIFY_CONSUMER_IDS_CHANGED: on_notify})
    resp = rt.call(c.invoke, srv.address, request(ECHO), 3)
    assert resp.ext("client") == "yes"
    assert seen == ["g1"]


def test_close_listener_sees_channel(rt, server, client):
    closed = []
    srv = server()
    rt.call(srv.add_close_listener, lambda ch: closed.append(ch.remote_address))
    c = client()
    resp = rt.call(c.invoke, srv.address, request(ECHO), 2)
    rt.call(c.close)
    deadline = time.monotonic() + 3
    while not closed and time.monotonic() < deadline:
        time.sleep(0.02)
    assert closed == [resp.ext("peer")]


def test_client_oneway_is_delivered_without_answer(rt, server, client):
    srv = server()
    c = client()
    rt.call(c.invoke_oneway, srv.address, request(COUNT, opaque=4242))
    # The next normal call on the same connection is answered; the oneway was handled first, unanswered.
    assert rt.call(c.invoke, srv.address, request(ECHO, {"v": "z"}), 2).ext("v") == "z"
    assert srv.handlers.oneway_seen == [4242]


def test_one_server_on_two_ports(rt, server, client):
    srv = server()
    second = rt.call(srv.listen, 0, "127.0.0.1").getHost().port
    c = client()
    assert rt.call(c.invoke, f"127.0.0.1:{second}", request(ECHO, {"v": "2nd"}), 2).ext("v") == "2nd"
    rt.call(srv.stop, 1.0)
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", second), timeout=1).close()


def test_connections_past_the_maximum_are_closed_at_accept(rt, server, raw_client, caplog):
    srv = server(TransportOptions(max_connections=3))
    kept = [raw_client(("127.0.0.1", srv.port)) for _ in range(3)]
    for i, conn in enumerate(kept):
        conn.send(request(ECHO, {"v": str(i)}, opaque=i))
        assert conn.recv().ext("v") == str(i)
    with caplog.at_level("WARNING", logger="ferrymq.remoting"):
        flood = [raw_client(("127.0.0.1", srv.port)) for _ in range(20)]
        assert all(conn.closed_by_peer(timeout=3) for conn in flood)
    assert rt.call(lambda: srv.refusals.counts[limits.TOO_MANY_CONNECTIONS]) == 20
    refused = [r.getMessage() for r in caplog.records if "refused the connection" in r.getMessage()]
    assert len(refused) == 1 and "127.0.0.1:" in refused[0] and "maxConnections" in refused[0]
    kept[0].send(request(ECHO, {"v": "still"}, opaque=9))
    assert kept[0].recv().ext("v") == "still"
    kept[1].close()
    deadline = time.monotonic() + 3
    while rt.call(lambda: len(srv.connections)) > 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    again = raw_client(("127.0.0.1", srv.port))
    again.send(request(ECHO, {"v": "room"}, opaque=10))
    assert again.recv().ext("v") == "room"


def test_a_slow_loris_is_closed_when_idle_while_others_are_served(rt, server, raw_client, caplog):
    srv = server(TransportOptions(idle_timeout=0.6))
    loris = raw_client(("127.0.0.1", srv.port))
    good = raw_client(("127.0.0.1", srv.port))
    frame = encode(request(ECHO, {"v": "never"}, opaque=1))
    with caplog.at_level("INFO", logger="ferrymq.remoting"):
        loris.send_raw(frame[:20])  # a frame begun and never finished
        started = time.monotonic()
        for i in range(4):  # the other connection is answered meanwhile, and kept busy so it is not idle
            good.send(request(ECHO, {"v": str(i)}, opaque=10 + i))
            assert good.recv().ext("v") == str(i)
            time.sleep(0.1)
        assert loris.closed_by_peer(timeout=3)
    assert 0.5 < time.monotonic() - started < 2.5
    assert any("idle for 0.6 s holding 20 bytes of an incomplete frame" in r.getMessage() for r in caplog.records)
    assert rt.call(lambda: srv.refusals.counts[limits.IDLE]) >= 1


def test_requests_pipelined_past_the_in_flight_limit_are_answered_busy(rt, server, raw_client):
    srv = server(TransportOptions(max_inflight_per_connection=4))
    piper = raw_client(("127.0.0.1", srv.port))
    other = raw_client(("127.0.0.1", srv.port))
    piper.send_raw(b"".join(encode(request(SLOW, {"v": str(i), "delay": "0.3"}, opaque=i)) for i in range(10)))
    busy = [piper.recv() for _ in range(6)]  # answered at once, before the slow ones
    assert [(r.opaque, r.code, r.remark) for r in busy] == [
        (i, ResponseCode.SYSTEM_BUSY, "[OVERLOAD]system busy, start flow control for a while") for i in range(4, 10)]
    other.send(request(ECHO, {"v": "meanwhile"}, opaque=99))
    assert other.recv().ext("v") == "meanwhile"
    done = sorted((r.opaque, r.code) for r in (piper.recv() for _ in range(4)))
    assert done == [(i, ResponseCode.SUCCESS) for i in range(4)]
    assert rt.call(lambda: srv.refusals.counts[limits.TOO_MANY_IN_FLIGHT]) == 6
