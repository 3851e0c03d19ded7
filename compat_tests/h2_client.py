"""A gRPC client on a bare HTTP/2 connection (``h2`` over a socket), for what grpcio's client will not send or
show: request headers above the limit the server advertises (grpcio fails such a call itself), and each
frame the server answers a call with, on one connection the test can reuse for the next call."""

from __future__ import annotations

import socket
from dataclasses import dataclass, field

import h2.config
import h2.errors
import h2.connection
import h2.events
import h2.frame_buffer
import h2.settings
from hyperframe.frame import ContinuationFrame, DataFrame, GoAwayFrame, HeadersFrame, RstStreamFrame

#: the size HTTP/2 counts for one header in a header list (RFC 9113, 6.5.2: its name, its value and 32)
HEADER_OVERHEAD = 32


def header_list_size(headers: list[tuple[bytes, bytes]]) -> int:
    return sum(len(name) + len(value) + HEADER_OVERHEAD for name, value in headers)


@dataclass
class Answer:
    """How the server ended one call: its response's ``:status`` and ``grpc-status`` (None when absent), the
    bytes of its DATA frames, each frame of the call's stream (``HEADERS END_STREAM``, ``RST_STREAM
    PROTOCOL_ERROR``: h2's events tell nothing of a RST_STREAM that follows the stream's end), and how the
    connection ended (a GOAWAY's error code name, ``"closed"`` for a socket closed without one, None: open)."""

    http_status: bytes | None = None
    grpc_status: bytes | None = None
    #: every response header and trailer, the last value of each name
    headers: dict[bytes, bytes] = field(default_factory=dict)
    data: bytearray = field(default_factory=bytearray)
    frames: list[str] = field(default_factory=list)
    connection_ended: str | None = None

    def message(self) -> bytes:
        """The first message of :attr:`data`, without its 5-byte prefix."""
        return bytes(self.data[5:5 + int.from_bytes(self.data[1:5], "big")])


_FRAME_NAMES = {HeadersFrame: "HEADERS", DataFrame: "DATA", RstStreamFrame: "RST_STREAM"}


def _describe(frame) -> str:
    """A stream's frame in words: its type, then END_STREAM or the RST_STREAM's error code."""
    words = [_FRAME_NAMES.get(type(frame), type(frame).__name__)]
    if "END_STREAM" in frame.flags:
        words.append("END_STREAM")
    if isinstance(frame, RstStreamFrame):
        words.append(_error_name(frame.error_code))
    return " ".join(words)


def _error_name(code: int) -> str:
    try:
        return h2.errors.ErrorCodes(code).name
    except ValueError:
        return str(code)


class H2Client:
    """One plain (prior knowledge) HTTP/2 connection to ``endpoint`` (``host:port``)."""

    def __init__(self, endpoint: str, timeout: float = 10.0):
        host, port = endpoint.rsplit(":", 1)
        self.sock = socket.create_connection((host, int(port)), timeout=timeout)
        self.conn = h2.connection.H2Connection(h2.config.H2Configuration(client_side=True, header_encoding=None))
        self.conn.initiate_connection()
        self.flush()
        self.ended: str | None = None
        #: the server's SETTINGS, once its first frame is read
        self.remote_settings: dict[int, int] = {}
        self._answers: dict[int, Answer] = {}
        self._frames = h2.frame_buffer.FrameBuffer(server=False)
        self._frames.max_frame_size = self.conn.max_inbound_frame_size
        self._done: set[int] = set()

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> H2Client:
        return self

    def __exit__(self, *_) -> None:
        self.close()

    def flush(self) -> None:
        """Write what ``h2`` has queued (after a call on :attr:`conn` itself)."""
        data = self.conn.data_to_send()
        if data:
            self.sock.sendall(data)

    def start(self, headers: list[tuple[bytes, bytes]]) -> int:
        """Start a call with ``headers`` (the request's whole header list, pseudo-headers first); returns its
        stream id."""
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream_id, headers)
        self._answers[stream_id] = Answer()
        self.flush()
        return stream_id

    def send(self, stream_id: int, message: bytes, end_stream: bool = True) -> None:
        """The call's one request ``message`` (gRPC-framed here), ending its requests unless ``end_stream`` is
        False."""
        self.conn.send_data(stream_id, b"\x00" + len(message).to_bytes(4, "big") + message, end_stream=end_stream)
        self.flush()

    def send_trailers(self, stream_id: int, headers: list[tuple[bytes, bytes]], end_stream: bool = True) -> None:
        """``headers`` as the call's request trailers: a header block (HEADERS, then CONTINUATION frames past
        16 KiB) written as given, past ``h2``'s checks (trailers without END_STREAM, pseudo-headers in them,
        on a stream the server closed); its HPACK encoder codes them, so its table stays in step."""
        block = self.conn.encoder.encode(headers)
        chunks = [block[i:i + 16384] for i in range(0, len(block), 16384)] or [b""]
        first = HeadersFrame(stream_id, chunks[0], flags=["END_STREAM"] if end_stream else [])
        frames = [first, *(ContinuationFrame(stream_id, chunk) for chunk in chunks[1:])]
        frames[-1].flags.add("END_HEADERS")
        self.sock.sendall(b"".join(frame.serialize() for frame in frames))

    def call(self, headers: list[tuple[bytes, bytes]], message: bytes) -> int:
        """:meth:`start` and :meth:`send` in one write."""
        stream_id = self.conn.get_next_available_stream_id()
        self.conn.send_headers(stream_id, headers)
        self._answers[stream_id] = Answer()
        self.send(stream_id, message)
        return stream_id

    def answer(self, stream_id: int) -> Answer:
        """Read until the call ends (its last headers, its reset, or the connection's end), then a little
        further for a RST_STREAM that follows a response ending the stream."""
        answer = self._answers[stream_id]
        while stream_id not in self._done and self.ended is None:
            self._read()
        if self.ended is None:
            self.sock.settimeout(0.5)
            try:
                self._read()
            except TimeoutError:
                pass
            finally:
                self.sock.settimeout(10.0)
        answer.connection_ended = self.ended
        return answer

    def settle(self, quiet: float = 1.0) -> None:
        """Read until the server has sent nothing for ``quiet`` seconds (or the connection ended): the frames
        a server sends on a stream after its end, as late as they come."""
        self.sock.settimeout(quiet)
        try:
            while self.ended is None:
                self._read()
        except TimeoutError:
            pass
        finally:
            self.sock.settimeout(10.0)

    def _read(self) -> None:
        try:
            data = self.sock.recv(65536)
        except ConnectionResetError:
            data = b""
        if not data:
            self.ended = self.ended if self.ended is not None else "closed"
            return
        self._frames.add_data(data)
        for frame in self._frames:
            if frame.stream_id in self._answers:
                self._answers[frame.stream_id].frames.append(_describe(frame))
            elif isinstance(frame, GoAwayFrame):
                self.ended = _error_name(frame.error_code)
        for event in self.conn.receive_data(data):
            answer = self._answers.get(getattr(event, "stream_id", 0))
            if isinstance(event, h2.events.RemoteSettingsChanged):
                self.remote_settings.update({code: change.new_value for code, change in event.changed_settings.items()})
            elif isinstance(event, (h2.events.ResponseReceived, h2.events.TrailersReceived)) and answer:
                headers = dict(event.headers)
                answer.headers.update(headers)
                answer.http_status = headers.get(b":status", answer.http_status)
                answer.grpc_status = headers.get(b"grpc-status", answer.grpc_status)
            elif isinstance(event, h2.events.DataReceived) and answer:
                answer.data += event.data
                self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, (h2.events.StreamEnded, h2.events.StreamReset)) and answer:
                self._done.add(event.stream_id)
        self.flush()

    @property
    def max_header_list_size(self) -> int | None:
        """The MAX_HEADER_LIST_SIZE the server advertises (None: it sets none, so no limit)."""
        while not self.remote_settings and self.ended is None:
            self._read()
        return self.remote_settings.get(h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE)
