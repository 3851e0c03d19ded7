"""FerryMQ's gRPC transport: the sans-I/O connection (:mod:`ferrymq.server.grpc.connection`) driven by ``h2``'s
own client end, the call dispatch (:mod:`ferrymq.server.grpc.dispatch`) on an asyncio loop, and the port of a
``ferrymq standalone`` as grpcio's client sees it."""

from __future__ import annotations

import asyncio
import gzip
import socket
import struct

import pytest

grpc = pytest.importorskip("grpc")
h2_connection = pytest.importorskip("h2.connection")
pytest.importorskip("rocketmq.grpc_protocol")

import h2.config  # noqa: E402
import h2.errors  # noqa: E402
import h2.events  # noqa: E402
import h2.settings  # noqa: E402
import hpack  # noqa: E402
from h2.frame_buffer import FrameBuffer  # noqa: E402
from hyperframe.frame import Frame, HeadersFrame, SettingsFrame, WindowUpdateFrame  # noqa: E402
from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as service  # noqa: E402
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc  # noqa: E402

from ferrymq.server.grpc import framing  # noqa: E402
from ferrymq.server.grpc.connection import (  # noqa: E402
    MAX_DECODED_HEADER_LIST,
    MAX_HEADER_BLOCK,
    MAX_HEADER_LIST_SIZE,
    CallEnded,
    CallStarted,
    GrpcConnection,
    MessageReceived,
    RequestsEnded,
    header_list_size,
    refusal_of_request_headers,
    state_free_block,
)
from ferrymq.server.grpc.dispatch import Call, Context, Dispatcher  # noqa: E402
from ferrymq.testing.server import FerryMQServer  # noqa: E402

from .placements import PLACEMENTS  # noqa: E402

PATH = "/apache.rocketmq.v2.MessagingService/QueryRoute"


class Pair:
    """A server connection and ``h2``'s client end, the bytes carried between them by :meth:`exchange`."""

    def __init__(self, max_message_size: int = 1024):
        self.server = GrpcConnection(max_message_size)
        self.client = h2_connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.client.initiate_connection()
        self.events: list = []  # the server's call events
        self.answers: list = []  # the client's h2 events
        self.exchange()

    def exchange(self) -> None:
        for _ in range(20):
            to_server, to_client = self.client.data_to_send(), self.server.data_to_send()
            if not to_server and not to_client:
                return
            if to_server:
                self.events += self.server.receive(to_server)
            if to_client:
                self.answers += self.client.receive_data(to_client)

    def call(self, path: str = PATH, *extra: tuple[bytes, bytes]) -> int:
        stream_id = self.client.get_next_available_stream_id()
        self.client.send_headers(stream_id, [(b":method", b"POST"), (b":scheme", b"http"), (b":path", path.encode()),
                                             (b":authority", b"test"), (b"content-type", b"application/grpc"),
                                             (b"te", b"trailers"), *extra])
        return stream_id

    def trailers(self, stream_id: int) -> dict[bytes, bytes]:
        """The headers that ended ``stream_id`` (Trailers-Only or trailers)."""
        for event in self.answers:
            if isinstance(event, (h2.events.TrailersReceived, h2.events.ResponseReceived)) \
                    and event.stream_id == stream_id and event.stream_ended is not None:
                return dict(event.headers)
        raise AssertionError(f"stream {stream_id} did not end: {self.answers}")


def test_a_request_message_is_cut_out_of_its_data_frames_and_answered_with_trailers():
    pair = Pair()
    stream_id = pair.call(PATH, (b"x-mq-client-id", b"c1"), (b"grpc-timeout", b"250m"))
    message = service.QueryRouteRequest(topic=pb.Resource(name="T")).SerializeToString()
    framed = framing.frame(message)
    pair.client.send_data(stream_id, framed[:3])
    pair.exchange()
    pair.client.send_data(stream_id, framed[3:], end_stream=True)
    pair.exchange()
    started, received, ended = pair.events
    assert started == CallStarted(stream_id, PATH, (("x-mq-client-id", "c1"),), 0.25)
    assert received == MessageReceived(stream_id, message)
    assert ended == RequestsEnded(stream_id)
    pair.server.send_message(stream_id, b"answer")
    pair.server.finish(stream_id, framing.OK)
    pair.exchange()
    data = b"".join(e.data for e in pair.answers if isinstance(e, h2.events.DataReceived))
    assert data == framing.frame(b"answer")
    assert pair.trailers(stream_id)[b"grpc-status"] == b"0"
    assert pair.server.calls == 0


def test_a_bad_preface_ends_the_connection_with_no_call():
    server = GrpcConnection(1024)
    server.data_to_send()
    assert server.receive(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n") == []
    assert server.closed
    assert server.receive(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n") == []


def test_a_message_above_the_limit_ends_its_call_resource_exhausted_before_it_is_read_whole():
    pair = Pair(max_message_size=1024)
    stream_id = pair.call()
    pair.client.send_data(stream_id, struct.pack(">BI", 0, 1025) + b"x" * 100)
    pair.exchange()
    assert pair.events[-1] == CallEnded(stream_id)
    trailers = pair.trailers(stream_id)
    assert trailers[b"grpc-status"] == b"8"
    assert trailers[b"grpc-message"] == b"Received message larger than max (1025 vs. 1024)"


def test_a_compressed_message_is_read_with_gzip_and_refused_with_another_encoding():
    pair = Pair()
    gzipped = pair.call(PATH, (b"grpc-encoding", b"gzip"))
    pair.client.send_data(gzipped, struct.pack(">BI", 1, len(gzip.compress(b"hello"))) + gzip.compress(b"hello"))
    other = pair.call(PATH, (b"grpc-encoding", b"snappy"))
    pair.client.send_data(other, struct.pack(">BI", 1, 3) + b"abc")
    pair.exchange()
    assert MessageReceived(gzipped, b"hello") in pair.events
    assert CallEnded(other) in pair.events
    assert pair.trailers(other)[b"grpc-status"] == b"12"


def test_a_reset_stream_ends_its_call_and_its_answer_is_dropped():
    pair = Pair()
    stream_id = pair.call()
    pair.exchange()
    pair.client.reset_stream(stream_id)
    pair.exchange()
    assert pair.events[-1] == CallEnded(stream_id)
    pair.server.send_message(stream_id, b"late")
    pair.server.finish(stream_id, framing.OK)
    assert pair.server.data_to_send() == b""


def test_a_large_streamed_answer_waits_for_the_clients_window_and_ends_after_it():
    pair = Pair()
    stream_id = pair.call()
    pair.exchange()
    chunk = bytes(range(256)) * 4096  # 1 MiB a message, above the client's 64 KiB windows
    for _ in range(4):
        pair.server.send_message(stream_id, chunk)
    pair.server.finish(stream_id, framing.OK)
    pair.exchange()
    data = [e for e in pair.answers if isinstance(e, h2.events.DataReceived)]
    assert sum(len(e.data) for e in data) == 65535  # the client's initial window, no more
    assert not any(isinstance(e, h2.events.StreamEnded) for e in pair.answers)
    acknowledged = 0
    while not any(isinstance(e, h2.events.StreamEnded) for e in pair.answers):
        data = [e for e in pair.answers if isinstance(e, h2.events.DataReceived)]
        assert len(data) > acknowledged, "the answer stalled"
        for event in data[acknowledged:]:
            pair.client.acknowledge_received_data(event.flow_controlled_length, stream_id)
        acknowledged = len(data)
        pair.exchange()
    body = b"".join(e.data for e in pair.answers if isinstance(e, h2.events.DataReceived))
    assert body == framing.frame(chunk) * 4
    assert pair.trailers(stream_id)[b"grpc-status"] == b"0"


def test_the_messages_answered_before_the_bytes_are_asked_for_share_a_data_frame():
    """A streamed answer's messages (a ReceiveMessage's, one per message) are framed together when the
    transport writes, not one DATA frame each; two calls answering meanwhile keep their own frames."""
    pair = Pair()
    first, second = pair.call(), pair.call()
    pair.exchange()
    for n in range(3):
        pair.server.send_message(first, b"m%d" % n)
    pair.server.send_message(second, b"other")
    pair.server.finish(first, framing.OK)
    pair.exchange()
    data = {stream_id: [e.data for e in pair.answers if isinstance(e, h2.events.DataReceived)
                        and e.stream_id == stream_id] for stream_id in (first, second)}
    assert data == {first: [b"".join(framing.frame(b"m%d" % n) for n in range(3))],
                    second: [framing.frame(b"other")]}
    assert pair.trailers(first)[b"grpc-status"] == b"0"
    assert pair.server.calls == 1


@pytest.mark.parametrize("headers", [
    ((b":status", b"200"), (b"content-type", b"application/grpc")),  # a name and value in the static table
    ((b"grpc-status", b"0"), (b"grpc-message", b"caf%C3%A9")),  # names the static table lacks
])
def test_a_state_free_block_decodes_to_its_headers_and_leaves_the_table_empty(headers):
    decoder = hpack.Decoder()
    assert decoder.decode(state_free_block(headers), raw=True) == list(headers)
    assert len(decoder.header_table.dynamic_entries) == 0


@pytest.mark.parametrize("table_size", [None, 0, 256])
def test_answers_made_from_fixed_blocks_keep_the_clients_hpack_table_in_step(table_size):
    """Calls answered OK, with a message and without (Trailers-Only), between calls answered with other
    headers, read by the client whole; after a header table size the client set, too (the block after it
    must open with the size update)."""
    pair = Pair()
    if table_size is not None:
        pair.client.update_settings({h2.settings.SettingCodes.HEADER_TABLE_SIZE: table_size})
        pair.exchange()
    answered = []
    for n in range(6):
        stream_id = pair.call()
        pair.exchange()
        if n % 3 == 0:
            pair.server.send_message(stream_id, b"answer")
        if n % 3 == 2:
            pair.server.finish(stream_id, framing.UNKNOWN, "failed", (("x-extra", "v%d" % n),))
        else:
            pair.server.finish(stream_id, framing.OK)
        pair.exchange()
        answered.append(stream_id)
    for n, stream_id in enumerate(answered):
        trailers = pair.trailers(stream_id)
        if n % 3 == 2:
            assert trailers == {b":status": b"200", b"content-type": b"application/grpc", b"grpc-status": b"2",
                                b"grpc-message": b"failed", b"x-extra": b"v%d" % n}
        else:
            assert trailers[b"grpc-status"] == b"0"
    responses = [dict(e.headers) for e in pair.answers if isinstance(e, h2.events.ResponseReceived)]
    assert responses and all(headers[b":status"] == b"200" for headers in responses)
    assert not any(isinstance(e, h2.events.ConnectionTerminated) for e in pair.answers)
    assert pair.server.calls == 0


def test_a_ping_is_answered():
    pair = Pair()
    pair.client.ping(b"8 bytes!")
    pair.exchange()
    assert any(isinstance(e, h2.events.PingAckReceived) and e.ping_data == b"8 bytes!" for e in pair.answers)


# ---------------------------------------------------------------------- dispatch


class SlowService(service_grpc.MessagingServiceServicer):
    """QueryRoute answers after ``delay`` seconds, noting whether it ran to its end."""

    def __init__(self, delay: float):
        self.delay = delay
        self.finished = False

    async def QueryRoute(self, request, context):
        await asyncio.sleep(self.delay)
        self.finished = True
        return service.QueryRouteResponse(status=pb.Status(code=pb.OK))


class Answers:
    """The dispatch's view of a connection: what its calls answered."""

    def __init__(self, loop):
        self.loop = loop
        self.messages: list[bytes] = []
        self.statuses: list[framing.Status] = []
        self.done: list[int] = []

    def send_message(self, stream_id, message):
        self.messages.append(message)

    def finish(self, stream_id, status, trailing=()):
        self.statuses.append(status)

    def call_done(self, stream_id):
        self.done.append(stream_id)


def _run_call(servicer, timeout, cancel_after=None, path=PATH):
    async def run():
        answers = Answers(asyncio.get_running_loop())
        dispatcher = Dispatcher(servicer)
        context = Context((), "ipv4:127.0.0.1:1", timeout)
        gone: list = []
        context.add_done_callback(lambda _context: gone.append(True))
        call = Call(answers, 1, dispatcher.handler(path), context, path, None, timeout)
        call.message(service.QueryRouteRequest(topic=pb.Resource(name="T")).SerializeToString())
        call.requests_ended()
        if cancel_after is not None:
            await asyncio.sleep(cancel_after)
            call.ended()
        await asyncio.sleep(0.3)
        return answers, gone

    return asyncio.run(run())


def test_a_call_past_its_deadline_ends_deadline_exceeded_and_its_method_is_cancelled():
    servicer = SlowService(0.2)
    answers, gone = _run_call(servicer, timeout=0.05)
    assert answers.statuses == [framing.Status(framing.DEADLINE_EXCEEDED, "Deadline Exceeded")]
    assert not servicer.finished and gone == [True] and answers.messages == []


def test_a_cancelled_call_runs_its_done_callbacks_and_answers_nothing():
    servicer = SlowService(0.2)
    answers, gone = _run_call(servicer, timeout=None, cancel_after=0.05)
    assert answers.statuses == [] and gone == [True] and not servicer.finished


def test_a_call_within_its_deadline_is_answered():
    servicer = SlowService(0.01)
    answers, gone = _run_call(servicer, timeout=1.0)
    assert answers.statuses == [framing.Status(framing.OK)] and len(answers.messages) == 1 and gone == [True]


def test_the_servicers_default_answers_unimplemented():
    answers, _ = _run_call(service_grpc.MessagingServiceServicer(), timeout=None,
                           path="/apache.rocketmq.v2.MessagingService/Heartbeat")
    assert answers.statuses == [framing.Status(framing.UNIMPLEMENTED, "Method not implemented!")]


# ---------------------------------------------------------------------- the port, as grpcio's client sees it


@pytest.fixture(scope="module", params=sorted(PLACEMENTS))
def server(request, tmp_path_factory):
    with FerryMQServer(tmp_path_factory.mktemp("grpc"), {"grpcEventLoop": request.param}, grpc=True) as running:
        yield running


@pytest.mark.parametrize("method, request_bytes, code", [
    ("NoSuchMethod", b"", grpc.StatusCode.UNIMPLEMENTED),
    ("QueryRoute", b"\xff\xff\xff", grpc.StatusCode.INTERNAL),  # not a QueryRouteRequest
], ids=["unknown method", "undecodable request"])
def test_a_call_the_service_cannot_take_gets_grpcios_status(server, method, request_bytes, code):
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        call = channel.unary_unary(f"/apache.rocketmq.v2.MessagingService/{method}")
        with pytest.raises(grpc.RpcError) as failed:
            call(request_bytes, timeout=10)
    assert failed.value.code() == code


def test_garbage_closes_the_connection_and_the_port_serves_on(server):
    host, port = server.grpc_endpoint.rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        while sock.recv(65536):  # the server's SETTINGS, perhaps a GOAWAY, then the end
            pass
    with grpc.insecure_channel(server.grpc_endpoint) as channel:
        answer = service_grpc.MessagingServiceStub(channel).QueryRoute(
            service.QueryRouteRequest(topic=pb.Resource(name="NoSuchTopicHere")),
            metadata=(("x-mq-client-id", "t@1"),), timeout=10)
    assert answer.status.code == pb.TOPIC_NOT_FOUND


def test_a_clients_goaway_leaves_its_open_calls_to_be_answered():
    """grpc-js closes a channel with GOAWAY NO_ERROR and then ends the calls it has open, waiting for
    their answers."""
    pair = Pair()
    stream_id = pair.call()
    pair.exchange()
    pair.client.close_connection()
    pair.exchange()
    pair.events += pair.server.receive(b"")
    assert not pair.server.closed and pair.server.calls == 1
    pair.server.finish(stream_id, framing.OK)
    frame, _length = Frame.parse_frame_header(memoryview(pair.server.data_to_send())[:9])
    assert (type(frame), frame.stream_id, frame.flags) == (HeadersFrame, stream_id, {"END_HEADERS", "END_STREAM"})


def test_going_away_names_the_last_call_taken_and_still_answers_it():
    pair = Pair()
    open_call = pair.call()
    pair.exchange()
    pair.server.go_away()
    pair.exchange()
    [goaway] = [e for e in pair.answers if isinstance(e, h2.events.ConnectionTerminated)]
    assert (goaway.error_code, goaway.last_stream_id) == (0, open_call)
    assert pair.server.calls == 1
    pair.server.finish(open_call, framing.OK)
    frame, _length = Frame.parse_frame_header(memoryview(pair.server.data_to_send())[:9])
    assert (type(frame), frame.stream_id) == (HeadersFrame, open_call) and "END_STREAM" in frame.flags


# ---------------------------------------------------------------------- request headers above the limit


def _padded(size: int, alphabet: bytes = b"0123456789abcdefghijklmnopqrstuvwxyz") -> list[tuple[bytes, bytes]]:
    """A QueryRoute call's headers, padded by ``x-pad`` to a header list of ``size`` bytes as HTTP/2 counts it."""
    base = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", PATH.encode()), (b":authority", b"test"),
            (b"content-type", b"application/grpc"), (b"te", b"trailers")]
    room = size - header_list_size(base) - len(b"x-pad") - 32
    return [*base, (b"x-pad", (alphabet * (room // len(alphabet) + 1))[:room])]


def _send(pair: Pair, headers: list[tuple[bytes, bytes]], end_stream: bool = False, message: bytes = b"") -> int:
    stream_id = pair.client.get_next_available_stream_id()
    pair.client.send_headers(stream_id, headers, end_stream=end_stream)
    if not end_stream:
        pair.client.send_data(stream_id, framing.frame(message), end_stream=True)
    return stream_id


def _round_trip(pair: Pair, sent: bytes | None = None) -> list[tuple[str, int, str]]:
    """Carry the client's bytes (``sent``, else what it has to send) to the server and its answer back: the
    server's frames but SETTINGS and WINDOW_UPDATE, as (type, stream, END_STREAM or the error code)."""
    pair.events += pair.server.receive(pair.client.data_to_send() if sent is None else sent)
    answer = pair.server.data_to_send()
    frames = FrameBuffer(server=False)
    frames.max_frame_size = 1 << 24
    frames.add_data(answer)
    pair.answers += pair.client.receive_data(answer)
    return [(type(f).__name__, f.stream_id,
             h2.errors.ErrorCodes(f.error_code).name if hasattr(f, "error_code") else
             "END_STREAM" if "END_STREAM" in f.flags else "")
            for f in frames if not isinstance(f, (SettingsFrame, WindowUpdateFrame))]


def test_the_header_list_limit_is_advertised_and_a_call_at_it_is_served():
    pair = Pair()
    assert pair.client.remote_settings.max_header_list_size == MAX_HEADER_LIST_SIZE == 8192
    stream_id = _send(pair, _padded(MAX_HEADER_LIST_SIZE))
    assert _round_trip(pair) == []
    assert [type(e) for e in pair.events] == [CallStarted, MessageReceived, RequestsEnded]
    assert pair.events[0].stream_id == stream_id


def test_a_call_over_the_header_list_limit_is_answered_431_and_reset_and_the_next_call_is_served():
    """Netty's answer, which Apache's proxy gives: HTTP 431 ending the stream, RST_STREAM PROTOCOL_ERROR, and
    RST_STREAM STREAM_CLOSED for the DATA the client sent meanwhile. The service never sees the call."""
    pair = Pair()
    refused = _send(pair, _padded(MAX_HEADER_LIST_SIZE + 1), message=b"ignored")
    assert _round_trip(pair) == [("HeadersFrame", refused, "END_STREAM"), ("RstStreamFrame", refused, "PROTOCOL_ERROR"),
                                 ("RstStreamFrame", refused, "STREAM_CLOSED")]
    assert pair.events == [] and not pair.server.closed
    assert dict(next(e for e in pair.answers if isinstance(e, h2.events.ResponseReceived)).headers) == {b":status": b"431"}
    served = _send(pair, _padded(1024), message=b"route")
    _round_trip(pair)
    assert [(type(e), e.stream_id) for e in pair.events] == [(CallStarted, served), (MessageReceived, served),
                                                             (RequestsEnded, served)]
    pair.server.finish(served, framing.OK)
    pair.exchange()
    assert pair.trailers(served)[b"grpc-status"] == b"0"


def test_a_refused_calls_headers_keep_the_hpack_table_in_step():
    """The refused call's headers enter the client's HPACK table; the next call refers to them by index and
    reads back as sent."""
    pair = Pair()
    many = [(b"x-entry-%02d" % i, b"v" * 200) for i in range(40)]  # each indexed, together above the limit
    base = _padded(256)[:-1]
    _send(pair, [*base, *many])
    assert [frame for frame, *_ in _round_trip(pair)] == ["HeadersFrame", "RstStreamFrame", "RstStreamFrame"]
    served = _send(pair, [*base, *many[-3:]])
    _round_trip(pair)
    started = pair.events[0]
    assert (type(started), started.stream_id) == (CallStarted, served)
    assert started.metadata == tuple((name.decode(), value.decode()) for name, value in many[-3:])


def test_an_oversized_call_that_ended_its_stream_gets_the_431_alone():
    pair = Pair()
    refused = _send(pair, _padded(MAX_HEADER_LIST_SIZE + 100), end_stream=True)
    assert _round_trip(pair) == [("HeadersFrame", refused, "END_STREAM")]
    assert pair.events == [] and not pair.server.closed


def test_a_header_block_too_long_to_decode_ends_the_connection():
    """Above 1.25 times the limit, encoded, Netty stops reading the block and ends the connection
    (GOAWAY PROTOCOL_ERROR); the calls open on it end."""
    pair = Pair()
    open_call = pair.call()
    pair.exchange()
    # digits: Huffman-coded in 5 or 6 bits each, so 16 KiB of them encode to more than MAX_HEADER_BLOCK
    _send(pair, _padded(16 * 1024, b"0123456789"))
    assert _round_trip(pair) == [("GoAwayFrame", 0, "PROTOCOL_ERROR")]
    assert pair.server.closed and CallEnded(open_call) in pair.events
    assert f"Header size exceeded max allowed size ({MAX_HEADER_BLOCK})" in pair.server.error


def test_a_short_header_block_inflating_past_the_decoding_cap_ends_the_connection():
    """References into the HPACK table make a few hundred bytes decode to megabytes: past
    MAX_DECODED_HEADER_LIST the connection ends rather than the server holding them."""
    pair = Pair()
    big = (b"x-big", b"b" * 4000)  # enters the HPACK table with the first call, which is served
    base = _padded(256)[:-1]
    served = _send(pair, [*base, big])
    assert _round_trip(pair) == [] and pair.events[0].stream_id == served
    _send(pair, [*base, *[big] * (MAX_DECODED_HEADER_LIST // 4000 + 1)])
    sent = pair.client.data_to_send()
    assert len(sent) < MAX_HEADER_BLOCK
    assert _round_trip(pair, sent) == [("GoAwayFrame", 0, "ENHANCE_YOUR_CALM")]
    assert pair.server.closed and "Oversized header block" in pair.server.error


def _trailers(size: int) -> list[tuple[bytes, bytes]]:
    """Request trailers of ``size`` bytes of header list, as HTTP/2 counts it."""
    return [(b"x-pad", b"t" * (size - len(b"x-pad") - 32))]




def _open_call(pair: Pair) -> int:
    """A call whose headers and message are read, its stream left open for trailers."""
    stream_id = pair.client.get_next_available_stream_id()
    pair.client.send_headers(stream_id, _padded(256))
    pair.client.send_data(stream_id, framing.frame(b"route"))
    _round_trip(pair)
    return stream_id


def test_trailers_at_the_limit_are_answered_as_a_new_calls_headers_and_the_calls_answer_is_a_reset():
    """grpc-java reads request trailers as the headers of a new call on the stream: without ``:path`` they
    get 404 UNIMPLEMENTED (HEADERS, the reason as text in a DATA ending the stream) and RST_STREAM CANCEL.
    The half-close they carry is the call's, whose method runs; its answer goes out as another CANCEL."""
    pair = Pair()
    stream_id = _open_call(pair)
    pair.client.send_headers(stream_id, _trailers(MAX_HEADER_LIST_SIZE), end_stream=True)
    assert _round_trip(pair) == [("HeadersFrame", stream_id, ""), ("DataFrame", stream_id, "END_STREAM"),
                                 ("RstStreamFrame", stream_id, "CANCEL")]
    assert [type(e) for e in pair.events] == [CallStarted, MessageReceived, RequestsEnded]
    response = next(e for e in pair.answers if isinstance(e, h2.events.ResponseReceived))
    assert dict(response.headers) == {b":status": b"404", b"content-type": b"text/plain; charset=utf-8",
                                      b"grpc-status": b"12", b"grpc-message": b"Expected path but is missing"}
    assert b"".join(e.data for e in pair.answers if isinstance(e, h2.events.DataReceived)) \
        == b"Expected path but is missing"
    pair.server.finish(stream_id, framing.OK)
    assert _round_trip(pair) == [("RstStreamFrame", stream_id, "CANCEL")]
    assert pair.server.calls == 0 and not pair.server.closed
    served = _open_call(pair)
    pair.client.end_stream(served)
    _round_trip(pair)
    pair.server.finish(served, framing.OK)
    pair.exchange()
    assert pair.trailers(served)[b"grpc-status"] == b"0"


def _trailers_frame(pair: Pair, stream_id: int, headers: list[tuple[bytes, bytes]]) -> bytes:
    """Trailers ending ``stream_id`` as they are sent, pseudo-headers and all (``h2`` sends none in trailers)."""
    block = pair.client.encoder.encode(headers)
    return HeadersFrame(stream_id, block, flags=["END_HEADERS", "END_STREAM"]).serialize()


def test_a_streamed_answer_to_trailers_read_as_a_new_call_is_one_reset():
    pair = Pair()
    stream_id = _open_call(pair)
    sent = _trailers_frame(pair, stream_id, [(b":path", PATH.encode())])
    assert [frame for frame, *_ in _round_trip(pair, sent)] == ["HeadersFrame", "DataFrame", "RstStreamFrame"]
    pair.server.send_message(stream_id, b"first")
    pair.server.finish(stream_id, framing.OK)
    assert _round_trip(pair) == [("RstStreamFrame", stream_id, "CANCEL")]
    assert pair.server.calls == 0


def test_trailers_a_call_could_start_with_replace_the_call_by_a_new_one_they_end():
    """grpc-java starts a new call on the stream with them, which takes the half-close: the call they follow
    ends unanswered, the new one has no request message."""
    pair = Pair()
    stream_id = _open_call(pair)
    assert _round_trip(pair, _trailers_frame(pair, stream_id, _padded(256))) == []
    assert [type(e) for e in pair.events] == [CallStarted, MessageReceived, CallEnded, CallStarted, RequestsEnded]
    assert {e.stream_id for e in pair.events} == {stream_id}
    pair.server.finish(stream_id, framing.INTERNAL, "Half-closed without a request")
    pair.exchange()
    assert pair.trailers(stream_id)[b"grpc-status"] == b"13"


def test_trailers_with_a_connection_header_reset_the_call_and_its_answer_is_a_cancel():
    pair = Pair()
    stream_id = _open_call(pair)
    sent = _trailers_frame(pair, stream_id, [(b"connection", b"close"), (b":path", PATH.encode())])
    assert _round_trip(pair, sent) == [("RstStreamFrame", stream_id, "PROTOCOL_ERROR"),
                                       ("RstStreamFrame", stream_id, "CANCEL")]
    assert [type(e) for e in pair.events] == [CallStarted, MessageReceived, RequestsEnded]
    pair.server.finish(stream_id, framing.OK)
    assert _round_trip(pair) == [("RstStreamFrame", stream_id, "CANCEL")]
    assert pair.server.calls == 0 and not pair.server.closed


def test_trailers_with_an_empty_path_reset_the_call_and_it_ends_unrun():
    pair = Pair()
    stream_id = _open_call(pair)
    assert _round_trip(pair, _trailers_frame(pair, stream_id, [(b":path", b"")])) == [
        ("RstStreamFrame", stream_id, "INTERNAL_ERROR")]
    assert [type(e) for e in pair.events] == [CallStarted, MessageReceived, CallEnded]
    assert pair.server.calls == 0 and not pair.server.closed


def test_small_trailers_after_the_answer_began_end_the_requests_unanswered():
    """Once the call's response headers are out, grpc-java cannot answer a new call on the stream: the
    trailers end the call's requests and its answer goes on."""
    pair = Pair()
    stream_id = _open_call(pair)
    pair.server.send_message(stream_id, b"first")
    pair.exchange()
    pair.client.send_headers(stream_id, _trailers(64), end_stream=True)
    assert _round_trip(pair) == []
    assert pair.events[-1] == RequestsEnded(stream_id)


def test_small_trailers_after_the_answer_ended_the_stream_end_the_connection():
    """As grpc-java behind Apache's proxy ends it: GOAWAY INTERNAL_ERROR, the calls open beside ending."""
    pair = Pair()
    beside = _open_call(pair)
    stream_id = _open_call(pair)
    pair.server.finish(stream_id, framing.UNIMPLEMENTED, "no such method")
    pair.exchange()
    pair.client.send_headers(stream_id, _trailers(64), end_stream=True)
    assert _round_trip(pair) == [("GoAwayFrame", 0, "INTERNAL_ERROR")]
    assert pair.server.closed and CallEnded(beside) in pair.events
    assert "after its answer ended" in pair.server.error


_BASE = [(b":method", b"POST"), (b":scheme", b"http"), (b":path", b"/a.B/C"), (b":authority", b"test"),
         (b"content-type", b"application/grpc")]


def _without(*names: bytes, extra: tuple = ()) -> list[tuple[bytes, bytes]]:
    return [(name, value) for name, value in _BASE if name not in names] + list(extra)


@pytest.mark.parametrize("headers, refusal", [
    (_without(b":path", extra=((b"connection", b"close"),)), (0, 1, "Connection-specific header field")),
    ([(b":path", b"")], (0, 2, "Empty path")),
    (_without(b":authority", extra=((b"host", b"a"), (b"host", b"b"))), (400, 13, "Multiple host headers")),
    (_without(extra=((b"host", b"a"), (b"host", b"b"))), None),
    ([(b"x-trailer", b"1")], (404, 12, "Expected path but is missing")),
    ([(b"content-type", b"text/plain"), (b":path", b"a.B/C")], (404, 12, "Expected path to start with /: a.B/C")),
    ([(b":path", b"/a.B/C")], (415, 13, "Content-Type is missing from the request")),
    (_without(b"content-type", extra=((b"content-type", b"application/grpcx"),)),
     (415, 13, "Content-Type 'application/grpcx' is not supported")),
    (_without(b"content-type", extra=((b"content-type", b"Application/GRPC+proto"),)), None),
    (_without(b"content-type", extra=((b"content-type", b"application/grpc; charset=utf-8"),)), None),
    (_without(b":method", extra=((b":method", b"GET"),)), (405, 13, "Method 'GET' is not supported")),
    (_without(b":method"), (405, 13, "Method 'null' is not supported")),
    (_BASE, None),
], ids=["a connection header", "an empty path", "two hosts", "two hosts beside :authority", "no path",
        "a relative path", "no content-type",
        "another content-type", "a gRPC content-type in capitals", "a gRPC content-type with a parameter",
        "GET", "no method", "a call's headers"])
def test_request_headers_are_refused_in_grpc_javas_order(headers, refusal):
    assert refusal_of_request_headers(headers) == refusal


def test_trailers_over_the_limit_are_answered_431_and_reset_and_the_next_call_is_served():
    """As Netty refuses request headers over the limit: HTTP 431 ending the stream, then RST_STREAM
    PROTOCOL_ERROR (the trailers ended the stream, yet the reset follows); the call ends unanswered."""
    pair = Pair()
    refused = _open_call(pair)
    pair.client.send_headers(refused, _trailers(MAX_HEADER_LIST_SIZE + 1), end_stream=True)
    assert _round_trip(pair) == [("HeadersFrame", refused, "END_STREAM"), ("RstStreamFrame", refused, "PROTOCOL_ERROR")]
    assert [type(e) for e in pair.events] == [CallStarted, MessageReceived, CallEnded]
    assert not pair.server.closed and pair.server.calls == 0
    served = _open_call(pair)
    pair.client.end_stream(served)
    _round_trip(pair)
    assert [(type(e), e.stream_id) for e in pair.events[3:]] == [(CallStarted, served), (MessageReceived, served),
                                                                 (RequestsEnded, served)]


@pytest.mark.parametrize("answer", ["ended", "begun"])
def test_trailers_over_the_limit_after_the_answer_began_reset_the_call_alone(answer):
    """Once the call's response headers are out, the 431 cannot be sent: the trailers get the reset alone,
    whether the answer ended the stream on this side or is still going."""
    pair = Pair()
    stream_id = _open_call(pair)
    if answer == "ended":
        pair.server.finish(stream_id, framing.UNIMPLEMENTED, "no such method")
    else:
        pair.server.send_message(stream_id, b"first")
    pair.exchange()
    pair.client.send_headers(stream_id, _trailers(MAX_HEADER_LIST_SIZE + 1), end_stream=True)
    assert _round_trip(pair) == [("RstStreamFrame", stream_id, "PROTOCOL_ERROR")]
    assert (CallEnded(stream_id) in pair.events) == (answer == "begun")
    assert not pair.server.closed and pair.server.calls == 0


def test_trailers_without_end_stream_reset_the_call_and_the_connection_goes_on():
    """A second header block that does not end the stream is the call's error (RST_STREAM PROTOCOL_ERROR),
    as Netty has it, not the connection's; its block is still decoded, so the HPACK table stays in step."""
    pair = Pair()
    stream_id = _open_call(pair)
    block = pair.client.encoder.encode([(b"x-indexed", b"in the table")])
    frame = HeadersFrame(stream_id, block, flags=["END_HEADERS"])
    assert _round_trip(pair, frame.serialize()) == [("RstStreamFrame", stream_id, "PROTOCOL_ERROR")]
    assert pair.events[-1] == CallEnded(stream_id) and not pair.server.closed
    served = pair.call(PATH, (b"x-indexed", b"in the table"))
    _round_trip(pair)
    assert pair.events[-1] == CallStarted(served, PATH, (("x-indexed", "in the table"),), None)


def test_trailers_above_the_limit_without_end_stream_are_answered_431_and_reset():
    pair = Pair()
    stream_id = _open_call(pair)
    block = pair.client.encoder.encode(_trailers(MAX_HEADER_LIST_SIZE + 1))
    frame = HeadersFrame(stream_id, block, flags=["END_HEADERS"])
    assert _round_trip(pair, frame.serialize()) == [("HeadersFrame", stream_id, "END_STREAM"),
                                                    ("RstStreamFrame", stream_id, "PROTOCOL_ERROR")]
    assert pair.events[-1] == CallEnded(stream_id) and not pair.server.closed
