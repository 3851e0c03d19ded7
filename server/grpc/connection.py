# cython: annotation_typing=False
# (an IntEnum is passed where an int is annotated: Cython would refuse it as not an int)
"""One client's HTTP/2 connection as gRPC calls, sans-I/O: bytes in (:meth:`GrpcConnection.receive`), call
events out; answers in (:meth:`~GrpcConnection.send_message`, :meth:`~GrpcConnection.finish`), bytes to
write out (:meth:`~GrpcConnection.data_to_send`).

HTTP/2 itself is the ``h2`` library's (framing, HPACK, stream states, PING answers). This module adds what
gRPC puts on top: a call per stream, its messages cut out of the DATA frames by their 5-byte prefix, its
deadline, its answer as response headers, DATA and trailers (``grpc-status``, ``grpc-message``). What a
call receives is acknowledged as soon as it is read (the windows bound what is in flight, not what the
service holds); what it answers is framed when the bytes are asked for (:meth:`~GrpcConnection.data_to_send`),
so the messages a call answers meanwhile share DATA frames, and waits, per stream, for the client's
flow-control window, going out as the client's WINDOW_UPDATEs open it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import h2.config
import h2.connection
import h2.errors
import h2.events
import h2.exceptions
import h2.settings
from h2.stream import H2Stream, StreamClosedBy, StreamState
import hpack
from hpack.hpack import encode_integer
from hpack.table import HeaderTable
from hyperframe.frame import GoAwayFrame, HeadersFrame, RstStreamFrame

from . import framing
from .framing import PREFIX, PREFIX_LENGTH, BadMessage

#: the window a client may fill per stream and per connection before it waits for a WINDOW_UPDATE: above a
#: 4 MiB body, so that one is sent without a round trip for window
WINDOW = 16 * 1024 * 1024
#: the concurrent calls a client may open per connection (grpcio's server sets no limit)
MAX_CONCURRENT_STREAMS = 2 ** 31 - 1
#: the request headers a call may send, as HTTP/2 counts them (each name and value and 32): grpc-java's
#: default, which Apache's proxy keeps. A call sending more, in its headers or its trailers, is answered HTTP 431
#: and reset; the connection goes on
MAX_HEADER_LIST_SIZE = 8 * 1024
#: the longest header block read, HPACK-encoded: a longer one ends the connection, as Netty's decoder ends it
#: (a quarter above the limit)
MAX_HEADER_BLOCK = MAX_HEADER_LIST_SIZE + MAX_HEADER_LIST_SIZE // 4
#: the most a header block may decode to before the connection ends. A block is decoded whole, whatever the
#: limit, so that HPACK's table stays in step with the client's; the cap bounds what references into that
#: table inflate a short block to
MAX_DECODED_HEADER_LIST = 1024 * 1024

_CONFIG = h2.config.H2Configuration(client_side=False, header_encoding=None, validate_inbound_headers=False,
                                    normalize_inbound_headers=False, validate_outbound_headers=False,
                                    normalize_outbound_headers=False)
_RESPONSE_HEADERS = ((b":status", b"200"), (b"content-type", b"application/grpc"))
_OK_TRAILERS = ((b"grpc-status", b"0"),)
_HEADERS_TOO_LARGE = ((b":status", b"431"),)
#: the content-type of an HTTP error answer: its reason as text
_TEXT = b"text/plain; charset=utf-8"
#: the states of a stream that may still receive the client's frames
_RECEIVING = (StreamState.OPEN, StreamState.HALF_CLOSED_LOCAL)


def _string(text: bytes) -> bytes:
    """An HPACK string literal, not Huffman-coded (RFC 7541, 5.2)."""
    return bytes(encode_integer(len(text), 7)) + text


def state_free_block(headers) -> bytes:
    """``headers`` as an HPACK block that leaves the decoder's dynamic table as it is: a header the static
    table holds whole as its index, any other as a literal *without indexing* (RFC 7541, 6.1 and 6.2.2),
    its name the static table's where it has the name. Such a block means the same whatever blocks came
    before it, so it can be made once and sent on every call."""
    block = b""
    for name, value in headers:
        whole = next((i for i, entry in enumerate(HeaderTable.STATIC_TABLE, 1) if entry == (name, value)), 0)
        if whole:
            prefix = encode_integer(whole, 7)
            prefix[0] |= 0x80
            block += bytes(prefix)
            continue
        named = next((i for i, entry in enumerate(HeaderTable.STATIC_TABLE, 1) if entry[0] == name), 0)
        block += bytes(encode_integer(named, 4)) + (b"" if named else _string(name)) + _string(value)
    return block


#: the header blocks of every successful unary call, made once (:class:`_Encoder`)
_FIXED_BLOCKS = {headers: state_free_block(headers)
                 for headers in (_RESPONSE_HEADERS, _OK_TRAILERS, _RESPONSE_HEADERS + _OK_TRAILERS)}


class _Encoder(hpack.Encoder):
    """HPACK's encoder, but the blocks every successful call sends (:data:`_FIXED_BLOCKS`: its response
    headers and OK trailers) are the bytes made once rather than encoded again per call. They do not touch
    the dynamic table, so the client's table stays in step with this encoder's."""

    def encode(self, headers, huffman: bool = True) -> bytes:
        if not self.header_table.resized:  # else the block must open with a table size update
            block = _FIXED_BLOCKS.get(tuple(headers))
            if block is not None:
                return block
        return super().encode(headers, huffman)


def header_list_size(headers) -> int:
    """The size HTTP/2 counts for a header list (RFC 9113, 6.5.2): each name and value, and 32 for each."""
    return sum(len(name) + len(value) + 32 for name, value in headers)


class TrailersAfterTheAnswer(h2.exceptions.ProtocolError):
    """Request trailers on a stream whose answer has ended it on the server's side: grpc-java, reading them
    as a new call it can no longer answer, ends the connection (GOAWAY INTERNAL_ERROR)."""

    error_code = h2.errors.ErrorCodes.INTERNAL_ERROR


class _ServerConnection(h2.connection.H2Connection):
    """``h2``'s connection, but

    - for a GOAWAY NO_ERROR from the client: ``h2`` closes the whole connection on any GOAWAY, while the
      client that sends it (grpc-js closing a channel) goes on with the calls it has open (RFC 9113, 6.8)
      and waits for their answers. Such a GOAWAY is reported and the connection stays open.
    - for request headers above :data:`MAX_HEADER_LIST_SIZE`: ``h2`` ends the connection once its HPACK
      decoder passes the advertised limit, every call of the client with it. Here the block is decoded
      whole and the one call answered as Netty answers it (HTTP 431 ending the stream, then RST_STREAM
      PROTOCOL_ERROR); only a block above :data:`MAX_HEADER_BLOCK` ends the connection, before decoding.
      Request trailers above the limit are refused the same way, the 431 left out once the call's response
      headers are out; the reset goes out even when the stream has ended.
    - for trailers without END_STREAM: ``h2`` ends the connection; Netty resets the call alone (RST_STREAM
      PROTOCOL_ERROR, after a 431 for trailers above the limit), and so does this.
    - for trailers within the limit before the call's response headers: grpc-java reads them as the headers
      of a new call on the stream, and answers them as it answers malformed request headers
      (:func:`refusal_of_request_headers`: an HTTP error, then RST_STREAM CANCEL); the half-close they carry
      is the call's, whose method runs, its answer replaced by another RST_STREAM CANCEL
      (:class:`AnsweredAsANewCall`). Trailers a new call could start with replace the call by that new call,
      whose requests they end. Trailers after the call's answer has ended the stream end the connection
      (:class:`TrailersAfterTheAnswer`).
    """

    def __init__(self, config: h2.config.H2Configuration):
        super().__init__(config)
        self.encoder = _Encoder()
        self.decoder.max_header_list_size = MAX_DECODED_HEADER_LIST

    def _local_settings_acked(self):
        changes = super()._local_settings_acked()  # sets the decoder's limit to the advertised one
        self.decoder.max_header_list_size = MAX_DECODED_HEADER_LIST
        return changes

    def _receive_headers_frame(self, frame: HeadersFrame) -> tuple[list, list]:
        if len(frame.data) > MAX_HEADER_BLOCK:
            raise h2.exceptions.ProtocolError(f"Header size exceeded max allowed size ({MAX_HEADER_BLOCK})")
        if frame.stream_id in self.streams:  # a known stream: trailers (a new call's stream is not known yet)
            stream = self.streams[frame.stream_id]
            if "END_STREAM" not in frame.flags and stream.state_machine.state in _RECEIVING:
                return self._refuse_unended_trailers(stream, frame)
        frames, events = super()._receive_headers_frame(frame)
        for event in events:
            kind = type(event)
            if kind is h2.events.RequestReceived:
                if header_list_size(event.headers) > MAX_HEADER_LIST_SIZE:
                    events = self._refuse_headers(frame.stream_id, events)
                break
            if kind is h2.events.TrailersReceived:
                if header_list_size(event.headers) > MAX_HEADER_LIST_SIZE:
                    events = self._refuse_trailers(frame.stream_id, events)
                else:
                    self._answer_trailers(frame.stream_id, event.headers, events)
                break
        return frames, events

    def _refuse_headers(self, stream_id: int, events: list) -> list:
        """Answer the call on ``stream_id`` 431 and reset it; ``events`` less the call's."""
        self.send_headers(stream_id, _HEADERS_TOO_LARGE, end_stream=True)
        stream = self.streams.get(stream_id)
        if stream is not None and not stream.closed:  # the client's HEADERS did not end the stream
            self.reset_stream(stream_id, h2.errors.ErrorCodes.PROTOCOL_ERROR)
        return [event for event in events if getattr(event, "stream_id", None) != stream_id]

    def _refuse_unended_trailers(self, stream: H2Stream, frame: HeadersFrame) -> tuple[list, list]:
        """Reset the call of trailers that do not end its stream (RST_STREAM PROTOCOL_ERROR), after a 431 when
        they are above the limit and its response headers are not out, as Netty answers. The block is decoded
        all the same, so that the HPACK table stays in step with the client's."""
        headers = h2.connection._decode_headers(self.decoder, frame.data)
        if header_list_size(headers) > MAX_HEADER_LIST_SIZE and not stream.state_machine.headers_sent:
            self.send_headers(frame.stream_id, _HEADERS_TOO_LARGE, end_stream=True)
        self.reset_stream(frame.stream_id, h2.errors.ErrorCodes.PROTOCOL_ERROR)
        return [], [_reset(frame.stream_id)]

    def _refuse_trailers(self, stream_id: int, events: list) -> list:
        """Answer the call on ``stream_id`` 431 if its response headers are not out yet, and reset it, even once
        the 431 or the call's own answer ended the stream; ``events`` less the call's, with the reset that
        ends the call."""
        stream = self.streams[stream_id]
        if not stream.state_machine.headers_sent:
            self.send_headers(stream_id, _HEADERS_TOO_LARGE, end_stream=True)
        if stream.closed:
            self.reset_closed(stream_id, h2.errors.ErrorCodes.PROTOCOL_ERROR)
        else:
            self.reset_stream(stream_id, h2.errors.ErrorCodes.PROTOCOL_ERROR)
        return [event for event in events if getattr(event, "stream_id", None) != stream_id] + [_reset(stream_id)]

    def _answer_trailers(self, stream_id: int, headers, events: list) -> None:
        """Answer request trailers within the limit that ended the stream as grpc-java answers them: read as a
        new call's headers, refused (:meth:`_answer_as_a_new_call`) unless a call could start with them; once
        the call's answer has ended the stream on this side, an error of the whole connection."""
        state_machine = self.streams[stream_id].state_machine
        if not state_machine.headers_sent:
            refusal = refusal_of_request_headers(headers)
            if refusal is None:  # the new call replaces the call on the stream, and takes its half-close
                events[:] = [_reset(stream_id), h2.events.RequestReceived(stream_id=stream_id, headers=headers),
                             *(event for event in events if type(event) is h2.events.StreamEnded)]
            elif refusal[0] == 0 and refusal[1] == h2.errors.ErrorCodes.INTERNAL_ERROR:
                self.reset_stream(stream_id, h2.errors.ErrorCodes.INTERNAL_ERROR)  # the call ends unrun
                events[:] = [_reset(stream_id)]
            elif refusal[0] == 0:
                self.reset_stream(stream_id, refusal[1])
                self.cancel_closed(stream_id)
                events.append(AnsweredAsANewCall(stream_id))
            else:
                events.append(self._answer_as_a_new_call(stream_id, *refusal))
        elif state_machine.state is StreamState.CLOSED:
            raise TrailersAfterTheAnswer(f"Request trailers on stream {stream_id} after its answer ended")

    def _answer_as_a_new_call(self, stream_id: int, http_status: int, code: int, details: str) -> AnsweredAsANewCall:
        """Answer trailers read as a new call's malformed headers as grpc-java answers them: the HTTP error
        with ``grpc-status`` and ``grpc-message`` in HEADERS, ``details`` as text in a DATA ending the stream,
        then RST_STREAM CANCEL."""
        self.send_headers(stream_id, ((b":status", b"%d" % http_status), (b"content-type", _TEXT),
                                      (b"grpc-status", b"%d" % code),
                                      (b"grpc-message", framing.encode_message(details))))
        body = details.encode("utf-8")
        if self.local_flow_control_window(stream_id) < len(body):  # Netty would hold it back for the window
            body = b""
        self.send_data(stream_id, body, end_stream=True)
        self.cancel_closed(stream_id)
        return AnsweredAsANewCall(stream_id)

    def cancel_closed(self, stream_id: int) -> None:
        """RST_STREAM CANCEL on ``stream_id``, though the stream has ended (:meth:`reset_closed`)."""
        self.reset_closed(stream_id, h2.errors.ErrorCodes.CANCEL)

    def reset_closed(self, stream_id: int, code: h2.errors.ErrorCodes) -> None:
        """RST_STREAM ``code`` on ``stream_id``, though the stream has ended (``h2`` sends none on a closed
        stream); the client's frames after it are ignored."""
        self._prepare_for_sending([RstStreamFrame(stream_id, error_code=code)])
        stream = self.streams.get(stream_id)
        if stream is not None:
            stream.state_machine.stream_closed_by = StreamClosedBy.SEND_RST_STREAM

    def _receive_goaway_frame(self, frame: GoAwayFrame) -> tuple[list, list]:
        if frame.error_code != h2.errors.ErrorCodes.NO_ERROR:
            return super()._receive_goaway_frame(frame)
        event = h2.events.ConnectionTerminated()
        event.error_code = h2.errors.ErrorCodes.NO_ERROR
        event.last_stream_id = frame.last_stream_id
        event.additional_data = frame.additional_data or None
        return [], [event]


def refusal_of_request_headers(headers) -> tuple[int, int, str] | None:
    """How grpc-java refuses request ``headers`` it cannot start a call with, checked in its order: (the HTTP
    status, the gRPC status code, the reason), or (0, an HTTP/2 error code, the reason) for a stream it resets
    unanswered: PROTOCOL_ERROR as it resets a malformed call, the call they follow going on to its half-close;
    INTERNAL_ERROR for the exception its checks throw, which ends that call too. None when a call could start
    with them."""
    if any(name == b"connection" for name, _ in headers):  # connection-specific: malformed (RFC 9113, 8.2.2)
        return 0, h2.errors.ErrorCodes.PROTOCOL_ERROR, "Connection-specific header field"
    hosts = [value for name, value in headers if name == b"host"]
    if len(hosts) > 1 and not any(name == b":authority" for name, _ in headers):
        return 400, framing.INTERNAL, "Multiple host headers"
    fields = dict(headers)
    path = fields.get(b":path")
    if path is None:
        return 404, framing.UNIMPLEMENTED, "Expected path but is missing"
    if not path:  # grpc-java reads its first character, and throws
        return 0, h2.errors.ErrorCodes.INTERNAL_ERROR, "Empty path"
    if path[:1] != b"/":
        return 404, framing.UNIMPLEMENTED, f"Expected path to start with /: {path.decode('latin-1')}"
    content_type = fields.get(b"content-type")
    if content_type is None:
        return 415, framing.INTERNAL, "Content-Type is missing from the request"
    grpc_type = content_type.lower()
    if grpc_type[:16] != b"application/grpc" or grpc_type[16:17] not in (b"", b"+", b";"):
        return 415, framing.INTERNAL, f"Content-Type '{content_type.decode('latin-1')}' is not supported"
    method = fields.get(b":method")
    if method != b"POST":
        shown = "null" if method is None else method.decode("latin-1")
        return 405, framing.INTERNAL, f"Method '{shown}' is not supported"
    return None


def _reset(stream_id: int) -> h2.events.StreamReset:
    """The event of a call this end reset (PROTOCOL_ERROR): its call ends."""
    return h2.events.StreamReset(stream_id=stream_id, error_code=h2.errors.ErrorCodes.PROTOCOL_ERROR,
                                 remote_reset=False)


@dataclass(slots=True)
class AnsweredAsANewCall:
    """The transport answered the call's request trailers (an HTTP error or a reset, as grpc-java answers a
    new call's malformed headers), yet the call runs: its own answer goes out as RST_STREAM CANCEL."""

    stream_id: int


@dataclass(slots=True)
class CallStarted:
    """A call has begun: the method's ``path`` (``/package.Service/Method``), its ``metadata`` (the headers
    that are not HTTP/2's or gRPC's own) and its ``timeout`` in seconds (None: no deadline)."""

    stream_id: int
    path: str
    metadata: tuple[tuple[str, str | bytes], ...]
    timeout: float | None


@dataclass(slots=True)
class MessageReceived:
    stream_id: int
    message: bytes


@dataclass(slots=True)
class RequestsEnded:
    """The client sends no more messages on the call (it half-closed the stream)."""

    stream_id: int


@dataclass(slots=True)
class CallEnded:
    """The call is over before its answer ended it: the client reset its stream, the connection ended, or
    the transport answered it (a message too large, an unknown compression)."""

    stream_id: int


@dataclass(slots=True)
class _Stream:
    encoding: bytes = b""
    #: bytes read not yet cut into messages
    inbound: bytearray = field(default_factory=bytearray)
    #: whether the response headers went out
    answered: bool = False
    #: bytes of DATA waiting for the client's window
    outbound: bytearray = field(default_factory=bytearray)
    #: the trailers to send once ``outbound`` is out
    trailers: list[tuple[bytes, bytes]] | tuple[tuple[bytes, bytes], ...] | None = None
    #: whether the transport answered the call (:class:`AnsweredAsANewCall`): its own answer is a RST_STREAM
    cancelled: bool = False


class GrpcConnection:
    """The server's end of one HTTP/2 connection carrying gRPC calls. ``max_message_size``: the largest
    message a call may send (a larger one ends the call RESOURCE_EXHAUSTED, as grpcio ends it)."""

    def __init__(self, max_message_size: int):
        self.max_message_size = max_message_size
        self._h2 = _ServerConnection(_CONFIG)
        self._h2.local_settings = h2.settings.Settings(client=False, initial_values={
            h2.settings.SettingCodes.INITIAL_WINDOW_SIZE: WINDOW,
            h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: MAX_CONCURRENT_STREAMS,
            h2.settings.SettingCodes.MAX_HEADER_LIST_SIZE: MAX_HEADER_LIST_SIZE,
        })
        self._h2.initiate_connection()
        self._h2.increment_flow_control_window(WINDOW - self._h2.inbound_flow_control_window)
        self._streams: dict[int, _Stream] = {}
        #: the calls with an answer not yet framed, in the order they answered (a dict as an ordered set)
        self._answering: dict[int, None] = {}
        #: True once the connection cannot carry another frame (a protocol error, GOAWAY received)
        self.closed = False
        #: why the connection failed (a protocol error), for the log
        self.error = ""
        #: the last call taken once :meth:`go_away` was called
        self._last_stream_id: int | None = None
        self._goaway = b""

    @property
    def calls(self) -> int:
        """Calls open on the connection."""
        return len(self._streams)

    def data_to_send(self) -> bytes:
        if self._answering:
            answering, self._answering = self._answering, {}
            for stream_id in answering:
                self._flush(stream_id)
        data = self._h2.data_to_send()
        if self._goaway:
            data, self._goaway = data + self._goaway, b""
        return data

    # ------------------------------------------------------------------ inbound

    def receive(self, data: bytes) -> list:
        """The call events ``data`` brings. A protocol error (a bad preface, a broken frame) ends the
        connection: a GOAWAY goes out, :attr:`closed` is set and every open call ends."""
        if self.closed:
            return []
        try:
            h2_events = self._h2.receive_data(data)
        except h2.exceptions.ProtocolError as exc:
            return self._fail(exc)
        events: list = []
        for event in h2_events:
            kind = type(event)
            if kind is h2.events.DataReceived:
                self._data(event, events)
            elif kind is h2.events.RequestReceived:
                self._request(event, events)
            elif kind is h2.events.StreamEnded:
                if event.stream_id in self._streams:
                    events.append(RequestsEnded(event.stream_id))
            elif kind is h2.events.StreamReset:
                if self._streams.pop(event.stream_id, None) is not None:
                    events.append(CallEnded(event.stream_id))
            elif kind is h2.events.WindowUpdated or kind is h2.events.RemoteSettingsChanged:
                for stream_id in [event.stream_id] if getattr(event, "stream_id", 0) else list(self._streams):
                    self._flush(stream_id)
            elif kind is h2.events.ConnectionTerminated and event.error_code != h2.errors.ErrorCodes.NO_ERROR:
                self.closed = True
                events += self._end_all()
            elif kind is AnsweredAsANewCall:
                stream = self._streams.get(event.stream_id)
                if stream is not None:
                    stream.answered = stream.cancelled = True  # its response headers are the transport's
        return events

    def _fail(self, exc: Exception) -> list:
        self.closed = True
        self.error = str(exc) or type(exc).__name__  # h2 has queued its GOAWAY before raising
        return self._end_all()

    def _end_all(self) -> list:
        ended = [CallEnded(stream_id) for stream_id in self._streams]
        self._streams.clear()
        return ended

    def _request(self, event: h2.events.RequestReceived, events: list) -> None:
        stream_id = event.stream_id
        if self._last_stream_id is not None and stream_id > self._last_stream_id:
            self._h2.reset_stream(stream_id, h2.errors.ErrorCodes.REFUSED_STREAM)
            return
        path = b""
        encoding = b""
        timeout = None
        metadata = []
        for name, value in event.headers:
            if name[:1] == b":":
                if name == b":path":
                    path = value
            elif name[:5] == b"grpc-":
                if name == b"grpc-timeout":
                    timeout = framing.parse_timeout(value)
                elif name == b"grpc-encoding":
                    encoding = value
            elif name != b"te" and name != b"content-type":
                metadata.append((name.decode("latin-1"), framing.metadata_value(name, value)))
        self._streams[stream_id] = _Stream(encoding)
        events.append(CallStarted(stream_id, path.decode("latin-1"), tuple(metadata), timeout))

    def _data(self, event: h2.events.DataReceived, events: list) -> None:
        stream_id = event.stream_id
        if event.flow_controlled_length:  # a closed stream's share is the connection's alone
            self._h2.acknowledge_received_data(event.flow_controlled_length, stream_id)
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        inbound = stream.inbound
        inbound += event.data
        while len(inbound) >= PREFIX_LENGTH:
            compressed, length = PREFIX.unpack_from(inbound)
            try:
                if length > self.max_message_size:
                    raise BadMessage(framing.RESOURCE_EXHAUSTED, f"Received message larger than max ({length} "
                                                                 f"vs. {self.max_message_size})")
                if len(inbound) < PREFIX_LENGTH + length:
                    return
                message = bytes(inbound[PREFIX_LENGTH:PREFIX_LENGTH + length])
                del inbound[:PREFIX_LENGTH + length]
                if compressed:
                    message = framing.decompress(stream.encoding, message, self.max_message_size)
            except BadMessage as bad:
                self.finish(stream_id, bad.code, bad.details)
                events.append(CallEnded(stream_id))
                return
            events.append(MessageReceived(stream_id, message))

    # ------------------------------------------------------------------ outbound

    def send_message(self, stream_id: int, message: bytes) -> None:
        """One response message on the call (dropped when the call has ended)."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        if not stream.answered:
            stream.answered = True
            self._h2.send_headers(stream_id, _RESPONSE_HEADERS)
        stream.outbound += framing.frame(message)
        self._answering[stream_id] = None

    def finish(self, stream_id: int, code: int, details: str = "",
               trailing: tuple[tuple[str, str], ...] = ()) -> None:
        """End the call with status ``code``, ``details`` and ``trailing`` metadata, once the messages sent
        before are out (dropped when the call has ended)."""
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        if code == framing.OK and not details and not trailing:
            trailers = _OK_TRAILERS if stream.answered else _RESPONSE_HEADERS + _OK_TRAILERS
            stream.answered = True
            stream.trailers = trailers
            self._answering[stream_id] = None
            return
        trailers = [(b"grpc-status", b"%d" % code)]
        if details:
            trailers.append((b"grpc-message", framing.encode_message(details)))
        trailers += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in trailing]
        if not stream.answered:  # Trailers-Only: one HEADERS frame ends the call
            stream.answered = True
            trailers[:0] = _RESPONSE_HEADERS
        stream.trailers = trailers
        self._answering[stream_id] = None

    def _flush(self, stream_id: int) -> None:
        stream = self._streams.get(stream_id)
        if stream is None:
            return
        outbound = stream.outbound
        h2conn = self._h2
        try:
            while outbound:
                size = min(h2conn.local_flow_control_window(stream_id), h2conn.max_outbound_frame_size, len(outbound))
                if size <= 0:
                    return
                h2conn.send_data(stream_id, bytes(outbound[:size]))
                del outbound[:size]
            if stream.trailers is not None:
                del self._streams[stream_id]
                h2conn.send_headers(stream_id, stream.trailers, end_stream=True)
        except h2.exceptions.StreamClosedError:
            self._streams.pop(stream_id, None)
            if stream.cancelled:
                h2conn.cancel_closed(stream_id)

    def cancel(self, stream_id: int) -> None:
        """End the call without a status (RST_STREAM CANCEL): its answer is abandoned."""
        if self._streams.pop(stream_id, None) is not None:
            try:
                self._h2.reset_stream(stream_id, h2.errors.ErrorCodes.CANCEL)
            except h2.exceptions.StreamClosedError:
                pass

    def go_away(self) -> None:
        """Tell the client no new call is taken (GOAWAY NO_ERROR); the calls open go on. The frame is made
        here, not by ``h2``: its GOAWAY closes the connection to every frame, the open calls' answers too."""
        if self.closed or self._last_stream_id is not None:
            return
        self._last_stream_id = self._h2.highest_inbound_stream_id
        goaway = GoAwayFrame(0, last_stream_id=self._last_stream_id, error_code=h2.errors.ErrorCodes.NO_ERROR)
        self._goaway = goaway.serialize()
