"""The Twisted protocol shared by both ends of a remoting connection.

Connections are full duplex: each side may send requests, so inbound frames are split by the RESPONSE
flag into answers to our own requests (matched by opaque) and requests for the local processor.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import Any

from twisted.internet import defer, interfaces, tcp
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

from ferrymq.wire.codes import Flag
from ferrymq.wire.command import RemotingCommand, next_opaque
from ferrymq.wire.errors import FrameError
from ferrymq.wire.frame import FrameDecoder, encode

from .channel import Channel, format_address
from .dispatch import Processor, dispatch
from .errors import RemotingClosedError, RemotingTimeoutError
from .options import TransportOptions
from .pending import PROMISES

log = logging.getLogger("ferrymq.remoting")

# Plain ints: IntFlag arithmetic costs microseconds per frame on this path.
_RESPONSE = int(Flag.RESPONSE)
_ONEWAY = int(Flag.ONEWAY)
#: Idle checks per idle period: a silent connection is closed between 1 and 1.25 periods after its last frame.
_IDLE_CHECKS = 4


@implementer(interfaces.IPushProducer)
class RemotingProtocol(Protocol):
    """Frames in, commands out. Registered as the transport's push producer for back-pressure: when
    unsent writes pass ``write_high_water`` Twisted pauses us and we stop reading the socket (and stop
    running queued requests) until the buffer drains."""

    def __init__(self, processor: Processor | None, options: TransportOptions, clock: Any, owner: Any = None):
        self.processor = processor
        self.options = options
        self.clock = clock
        self.owner = owner  # server or client bookkeeping: connection_made / connection_lost
        self.decoder = FrameDecoder(options.max_frame_size)
        self.channel: Channel | None = None
        self.peer = "?"
        self._pending: dict[int, tuple[defer.Deferred, Any, RemotingCommand]] = {}
        self._inbox: deque[RemotingCommand] = deque()
        self._paused = False
        self._draining = False
        self._closing = False
        self._connected = False
        self.inflight = 0
        self._idle_waiters: list[defer.Deferred] = []
        #: Frames answered while one read is handled; written together when the read is done.
        self._out: list[bytes] | None = None
        #: Answers of requests completed later (a SYNC_FLUSH group commit answers a whole group in one
        #: reactor call): collected and written in one send at the end of that reactor turn.
        self._late: list[bytes] | None = None
        self._socket: Any = None
        #: Idle close: reads and writes only set ``_active``; a timer looks at it a few times per period
        #: (rescheduling a timer on every frame cost about 1% of the broker's time under load).
        self._active = True
        self._idle_since = 0.0
        self._idle_timer: Any = None

    # ------------------------------------------------------------------ connection lifecycle

    def connectionMade(self) -> None:
        self._connected = True
        self.peer = format_address(self.transport.getPeer())
        self.channel = Channel(self, self.peer, format_address(self.transport.getHost()))
        # Apache's Netty ends (server and client) run with TCP_NODELAY: a response must not wait for
        # the peer's ACK of the previous one (Nagle), which costs up to a delayed-ACK period per answer.
        set_no_delay = getattr(self.transport, "setTcpNoDelay", None)
        if set_no_delay is not None:
            try:
                set_no_delay(True)
            except OSError:
                pass
        if isinstance(self.transport, tcp.Connection):
            self._socket = self.transport.socket
        bufsize = getattr(self.transport, "bufferSize", None)
        if bufsize is not None:
            self.transport.bufferSize = self.options.write_high_water
        self.transport.registerProducer(self, True)
        if self.options.idle_timeout > 0:
            self._idle_since = self.clock.seconds()
            self._idle_timer = self.clock.callLater(self.options.idle_timeout / _IDLE_CHECKS, self._check_idle)
        if self.owner is not None:
            self.owner.connection_made(self)

    def connectionLost(self, reason: Any = None) -> None:
        self._connected = False
        if self._idle_timer is not None and self._idle_timer.active():
            self._idle_timer.cancel()
        self._idle_timer = None
        pending, self._pending = self._pending, {}
        detail = reason.getErrorMessage() if reason is not None and hasattr(reason, "getErrorMessage") else ""
        for d, timer, cmd in pending.values():
            if timer.active():
                timer.cancel()
            d.errback(RemotingClosedError(self.peer, f"request code {cmd.code} got no response ({detail})"))
        self._inbox.clear()
        if self.channel is not None:
            self.channel._mark_closed()
        if self.owner is not None:
            self.owner.connection_lost(self)
        self._notify_idle()

    def _check_idle(self) -> None:
        self._idle_timer = None
        if not self._connected:
            return
        now = self.clock.seconds()
        if self._active:
            self._active = False
            self._idle_since = now
        elif now - self._idle_since >= self.options.idle_timeout:
            self.timeoutConnection()
            return
        self._idle_timer = self.clock.callLater(self.options.idle_timeout / _IDLE_CHECKS, self._check_idle)

    def timeoutConnection(self) -> None:
        log.info("closing connection %s: idle for %.0f s", self.peer, self.options.idle_timeout)
        self.transport.abortConnection()

    def close(self) -> None:
        if self._connected and not self._closing:
            if self._late:
                self._flush_late()
            self._closing = True
            self.transport.loseConnection()

    # ------------------------------------------------------------------ inbound

    def dataReceived(self, data: bytes) -> None:
        if self._closing:
            return
        self._active = True
        try:
            commands = self.decoder.feed(data)
        except FrameError as exc:
            self._bad_frame(str(exc))
            return
        except Exception as exc:  # noqa: BLE001 - any decoder failure is a bad frame, not a crash
            self._bad_frame(f"undecodable frame ({type(exc).__name__}: {exc})")
            return
        for cmd in commands:
            if cmd.flag & _RESPONSE:
                self._complete(cmd)
            else:
                self._inbox.append(cmd)
        # Every answer produced while handling this read leaves in one write: one syscall per read
        # instead of one buffered write (and two epoll updates) per response.
        self._out = []
        try:
            self._run_inbox()
        finally:
            out, self._out = self._out, None
            if out:
                self._write(out[0] if len(out) == 1 else b"".join(out))

    def _bad_frame(self, reason: str) -> None:
        log.warning("closing connection %s: %s", self.peer, reason)
        self._closing = True
        self._inbox.clear()
        self.transport.abortConnection()

    def _complete(self, cmd: RemotingCommand) -> None:
        entry = self._pending.pop(cmd.opaque, None)
        if entry is None:
            log.debug("response opaque %s from %s matches no pending request (timed out?)", cmd.opaque, self.peer)
            return
        d, timer, _ = entry
        if timer.active():
            timer.cancel()
        d.callback(cmd)

    def _run_inbox(self) -> None:
        while self._inbox and not self._paused and not self._closing:
            self._handle_request(self._inbox.popleft())

    def _handle_request(self, cmd: RemotingCommand) -> None:
        result = dispatch(self.processor, cmd, self.channel)
        if not isinstance(result, PROMISES):
            self._answer(result, cmd)
            return
        self.inflight += 1
        result.addBoth(self._late_result, cmd)

    def _late_result(self, response: Any, request: RemotingCommand) -> None:
        """A Deferred's outcome: its answer (dispatch turns every failure into an error response, so a
        Failure here is a bug in that promise), then the request no longer counts as in flight."""
        try:
            if isinstance(response, Failure):
                log.error("request code %s from %s failed without an answer: %s", request.code, self.peer,
                          response.getErrorMessage())
            else:
                self._answer_late(response, request)
        finally:
            self._request_done(None)

    def _answer(self, response: RemotingCommand | None, request: RemotingCommand) -> None:
        if response is None or request.flag & _ONEWAY or not self._connected:
            return
        try:
            self.send(response)
        except Exception:  # noqa: BLE001 - an unencodable response must not take the connection down
            log.exception("cannot write the response to code %s for %s", request.code, self.peer)

    def _answer_late(self, response: RemotingCommand | None, request: RemotingCommand) -> None:
        """A Deferred's answer: queued, and every answer queued during this reactor turn leaves in one
        send (callLater(0) runs in the same pass over the reactor's calls that ran the completions)."""
        if response is None or request.flag & _ONEWAY or not self._connected:
            return
        if self._out is not None:  # fired while this connection's read is being handled
            self._answer(response, request)
            return
        try:
            data = encode(response)
        except Exception:  # noqa: BLE001 - an unencodable response must not take the connection down
            log.exception("cannot write the response to code %s for %s", request.code, self.peer)
            return
        self._active = True
        if self._late is None:
            self._late = [data]
            self.clock.callLater(0, self._flush_late)
        else:
            self._late.append(data)

    def _flush_late(self) -> None:
        late, self._late = self._late, None
        if late and self._connected:
            self._write(late[0] if len(late) == 1 else b"".join(late))

    def _request_done(self, _: object) -> None:
        self.inflight -= 1
        self._notify_idle()

    # ------------------------------------------------------------------ outbound

    def send(self, cmd: RemotingCommand) -> None:
        if not self._connected:
            raise RemotingClosedError(self.peer, "cannot write to a closed connection")
        data = encode(cmd)
        if self._out is not None:
            self._out.append(data)
        else:
            self._write(data)
        self._active = True

    def _write(self, data: bytes) -> None:
        """Send now when nothing is queued before us (the common case: the socket buffer has room), else
        hand over to the transport's buffer. Twisted's own path would queue, register for writability and
        send on the next reactor turn: two extra epoll calls and a turn of latency per answer."""
        t = self.transport
        sock = self._socket
        if sock is not None and not t._tempDataBuffer and t.offset >= len(t.dataBuffer) and t.connected \
                and not t.disconnecting:
            try:
                sent = sock.send(data)
            except OSError:  # EAGAIN, or a broken connection: the transport's own write finds out and reports it
                sent = 0
            if sent >= len(data):
                return
            data = data[sent:]
        t.write(data)

    def request(self, cmd: RemotingCommand, timeout: float) -> defer.Deferred:
        if not self._connected or self._closing:
            return defer.fail(RemotingClosedError(self.peer, "connection is closing"))
        if cmd.opaque in self._pending:
            cmd.opaque = next_opaque()
        d = defer.Deferred()
        timer = self.clock.callLater(timeout, self._timed_out, cmd.opaque, cmd.code, timeout)
        self._pending[cmd.opaque] = (d, timer, cmd)
        try:
            self.send(cmd)
        except Exception:
            self._pending.pop(cmd.opaque, None)
            timer.cancel()
            raise
        return d

    def _timed_out(self, opaque: int, code: int, timeout: float) -> None:
        entry = self._pending.pop(opaque, None)
        if entry is not None:
            entry[0].errback(RemotingTimeoutError(self.peer, code, opaque, timeout))

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    # ------------------------------------------------------------------ back-pressure (IPushProducer)

    def pauseProducing(self) -> None:
        if not self._paused:
            log.debug("pausing reads from %s: write buffer above %d bytes", self.peer, self.options.write_high_water)
        self._paused = True
        self.transport.pauseProducing()

    def resumeProducing(self) -> None:
        self._paused = False
        if not self._draining and self._connected:
            self.transport.resumeProducing()
        self._run_inbox()

    def stopProducing(self) -> None:
        self._paused = True

    @property
    def paused(self) -> bool:
        return self._paused

    # ------------------------------------------------------------------ graceful shutdown

    def drain(self) -> defer.Deferred:
        """Stop reading new requests; fire once every request already read has been answered."""
        self._draining = True
        if self._connected:
            self.transport.pauseProducing()
        d = defer.Deferred()
        self._idle_waiters.append(d)
        self._notify_idle()
        return d

    def _notify_idle(self) -> None:
        if self.inflight or (self._inbox and self._connected):
            return
        if self._late:  # whoever waits for idle (a drain before close) must find every answer written
            self._flush_late()
        waiters, self._idle_waiters = self._idle_waiters, []
        for d in waiters:
            d.callback(None)
