"""The Twisted protocol shared by both ends of a remoting connection: an adapter over the sans-I/O core.

:class:`ferrymq.wire.connection.Connection` decides (framing, correlation, deadlines, idle, batching,
back-pressure); this class feeds it what the socket read, writes what it queued, runs its deadlines and
idle checks on the reactor's clock, maps its back-pressure to Twisted's producer API and hands its
requests to the processor. The write that skips a reactor turn lives in :mod:`.twisted_io`.
"""

from __future__ import annotations

import logging
import math
import sys
from time import perf_counter
from typing import Any

from twisted.internet import defer, interfaces
from twisted.internet.protocol import Protocol
from twisted.python.failure import Failure
from zope.interface import implementer

from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.connection import CLOSED, OPEN, Connection, ResponseReceived, UnmatchedResponse

from . import twisted_io
from .channel import Channel, format_address
from .dispatch import Processor, dispatch
from .errors import RemotingClosedError, RemotingTimeoutError
from .latency import SAMPLE_EVERY_READS, RequestLatency
from .limits import BAD_FRAME, BUSY_REMARK, FRAME_TOO_LARGE, IDLE, TOO_MANY_IN_FLIGHT, Refusals
from .options import TransportOptions
from .pending import PROMISES

log = logging.getLogger("ferrymq.remoting")

#: Idle checks per idle period: a silent connection is closed between 1 and 1.25 periods after its last frame.
_IDLE_CHECKS = 4


@implementer(interfaces.IPushProducer, interfaces.IHandshakeListener)
class RemotingProtocol(Protocol):
    """Frames in, commands out. Registered as the transport's push producer for back-pressure: when
    unsent writes pass ``write_high_water`` Twisted pauses us and we stop reading the socket (and stop
    running queued requests) until the buffer drains.

    Over TLS (an ``INegotiated`` transport) the registration waits for the end of the handshake: the TLS
    layer pauses its producer while it holds writes back for the handshake, and pausing us stops the very
    reads the handshake needs."""

    def __init__(self, processor: Processor | None, options: TransportOptions, clock: Any, owner: Any = None,
                 refusals: Refusals | None = None, latency: RequestLatency | None = None):
        self.processor = processor
        self.options = options
        self.clock = clock
        self.owner = owner  # server or client bookkeeping: connection_made / connection_lost
        self.refusals = refusals if refusals is not None else Refusals()
        #: Where sampled request latencies go (the server's); None: nothing is timed.
        self.latency = latency
        #: No limit is the largest int: the per-request check stays one comparison.
        self._max_inflight = options.max_inflight_per_connection or sys.maxsize
        self._busy_logged = False
        self.core = Connection(options.max_frame_size, options.write_high_water, idle_timeout=options.idle_timeout)
        self.channel: Channel | None = None
        self.peer = "?"
        self._connected = False
        #: True while queued requests are handled: their answers are written together when that ends
        #: (one syscall per read instead of one buffered write and two epoll updates per answer).
        self._serving = False
        #: The end-of-turn write of answers completed outside a read (a SYNC_FLUSH group commit answers
        #: a whole group in one reactor call): callLater(0) runs in the same pass over the reactor's calls.
        self._flush_call: Any = None
        self._write: Any = None
        #: One timer at the earliest request deadline, not one per request.
        self._expiry_call: Any = None
        self._expiry_at = math.inf
        self._idle_timer: Any = None
        self._idle_waiters: list[defer.Deferred] = []

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
        self._write = twisted_io.writer(self.transport)
        if getattr(self.transport, "bufferSize", None) is not None:
            self.transport.bufferSize = self.options.write_high_water
        if not interfaces.INegotiated.providedBy(self.transport):
            self.transport.registerProducer(self, True)
        if self.options.idle_timeout > 0:
            self._idle_timer = self.clock.callLater(self.options.idle_timeout / _IDLE_CHECKS, self._check_idle)
        if self.owner is not None:
            self.owner.connection_made(self)

    def handshakeCompleted(self) -> None:
        if self._connected:
            self.transport.registerProducer(self, True)

    def connectionLost(self, reason: Any = None) -> None:
        self._connected = False
        for call in (self._idle_timer, self._expiry_call, self._flush_call):
            if call is not None and call.active():
                call.cancel()
        self._idle_timer = self._expiry_call = self._flush_call = None
        lost = self.core.connection_lost() if self.core.state is not CLOSED else []
        detail = reason.getErrorMessage() if reason is not None and hasattr(reason, "getErrorMessage") else ""
        for entry in lost:
            entry.context[0].errback(
                RemotingClosedError(self.peer, f"request code {entry.code} got no response ({detail})"))
        if self.channel is not None:
            self.channel._mark_closed()
        if self.owner is not None:
            self.owner.connection_lost(self)
        self._notify_idle()

    def _check_idle(self) -> None:
        self._idle_timer = None
        if not self._connected:
            return
        if self.core.should_close_idle(self.clock.seconds()):
            self.timeoutConnection()
            return
        self._idle_timer = self.clock.callLater(self.options.idle_timeout / _IDLE_CHECKS, self._check_idle)

    def timeoutConnection(self) -> None:
        partial = self.core.partial_frame_bytes
        held = f" holding {partial} bytes of an incomplete frame" if partial else ""
        log.info("closing connection %s: idle for %g s%s", self.peer, self.options.idle_timeout, held)
        self.refusals.count(IDLE)
        self.transport.abortConnection()

    def close(self) -> None:
        if self._connected and self.core.state is OPEN:
            self.core.close()
            self._flush()
            self.transport.loseConnection()

    # ------------------------------------------------------------------ inbound

    def dataReceived(self, data: bytes) -> None:
        events = self.core.receive_data(data)
        for event in events:
            kind = type(event)
            if kind is ResponseReceived:
                event.request.context[0].callback(event.command)
            elif kind is UnmatchedResponse:
                log.debug("response opaque %s from %s matches no pending request (timed out?)",
                          event.command.opaque, self.peer)
            else:
                log.warning("closing connection %s: %s", self.peer, event.reason)
                self.refusals.count(FRAME_TOO_LARGE if event.too_large else BAD_FRAME)
                self.transport.abortConnection()
                return
        self._serve()

    def _serve(self) -> None:
        """Handle queued requests until none is left or the core backs up, writing their answers in
        one buffer; a backed-up core has its output written at once, which may pause us."""
        core = self.core
        self._serving = True
        try:
            latency = self.latency
            if latency is not None:  # one countdown per read, not per request
                latency.countdown -= 1
                if latency.countdown <= 0 and core.requests_ready:
                    latency.countdown = SAMPLE_EVERY_READS
                    self._handle_sampled(core.next_request())
            max_inflight = self._max_inflight
            while True:
                cmd = core.next_request()
                while cmd is not None:
                    if core.inflight > max_inflight:
                        self._refuse_busy(cmd)
                    else:
                        self._handle_request(cmd)
                    cmd = core.next_request()
                self._flush()
                if not core.requests_ready:
                    break
        finally:
            self._serving = False
        if self._idle_waiters:
            self._notify_idle()

    def _handle_request(self, cmd: RemotingCommand) -> None:
        result = dispatch(self.processor, cmd, self.channel)
        if not isinstance(result, PROMISES):
            self._answer(cmd, result)
            return
        result.addBoth(self._late_result, cmd)

    def _handle_sampled(self, cmd: RemotingCommand) -> None:
        """:meth:`_handle_request`, timed from dispatch to the answer (see :mod:`.latency`)."""
        if self.core.inflight > self._max_inflight:
            self._refuse_busy(cmd)
            return
        started = perf_counter()
        result = dispatch(self.processor, cmd, self.channel)
        if not isinstance(result, PROMISES):
            self._answer(cmd, result)
            if result is not None:
                self.latency.observe(cmd.code, result.code, False, perf_counter() - started)
            return
        result.addBoth(self._late_sampled, cmd, started)

    def _late_sampled(self, response: Any, request: RemotingCommand, started: float) -> None:
        if isinstance(response, RemotingCommand) and self.latency is not None:
            self.latency.observe(request.code, response.code, True, perf_counter() - started)
        self._late_result(response, request)

    def _refuse_busy(self, cmd: RemotingCommand) -> None:
        """Answer as Apache answers a request its thread pool's queue has no room for."""
        self.refusals.count(TOO_MANY_IN_FLIGHT)
        if not self._busy_logged:  # once per connection: a pipelining peer would flood the log
            self._busy_logged = True
            log.warning("connection %s has %d requests in flight (maxInFlightRequestsPerConnection): answering "
                        "SYSTEM_BUSY to more, first to code %s", self.peer, self.core.inflight - 1, cmd.code)
        self._answer(cmd, cmd.response(ResponseCode.SYSTEM_BUSY, BUSY_REMARK))

    def _answer(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        try:
            self.core.send_response(request, response)
        except Exception:  # noqa: BLE001 - an unencodable response must not take the connection down
            log.exception("cannot write the response to code %s for %s", request.code, self.peer)

    def _late_result(self, response: Any, request: RemotingCommand) -> None:
        """A promise's outcome (dispatch turns every failure into an error response, so a Failure here is
        a bug in that promise). Answers completed outside a read leave together at the end of the turn."""
        if isinstance(response, Failure):
            log.error("request code %s from %s failed without an answer: %s", request.code, self.peer,
                      response.getErrorMessage())
            response = None
        self._answer(request, response)
        if not self._serving and self.core.bytes_queued and self._flush_call is None and self._connected:
            self._flush_call = self.clock.callLater(0, self._flush_late)
        self._notify_idle()

    def _flush_late(self) -> None:
        self._flush_call = None
        self._flush()

    # ------------------------------------------------------------------ outbound

    def _flush(self) -> None:
        data = self.core.data_to_send()
        if data and self._connected:
            self._write(data)

    def send(self, cmd: RemotingCommand) -> None:
        """Write ``cmd`` as it is (with everything queued before it, unless requests are being handled)."""
        if not self._connected:
            raise RemotingClosedError(self.peer, "cannot write to a closed connection")
        self.core.send(cmd)
        if not self._serving:
            self._flush()

    def request(self, cmd: RemotingCommand, timeout: float) -> defer.Deferred:
        if not self._connected or self.core.state is not OPEN:
            return defer.fail(RemotingClosedError(self.peer, "connection is closing"))
        d = defer.Deferred()
        now = self.clock.seconds()
        deadline = now + timeout
        self.core.send_request(cmd, deadline, (d, timeout))
        if deadline < self._expiry_at:
            self._expire_at(deadline, now)
        if not self._serving:
            self._flush()
        return d

    def _expire_at(self, deadline: float, now: float) -> None:
        if self._expiry_call is not None and self._expiry_call.active():
            self._expiry_call.cancel()
        self._expiry_at = deadline
        self._expiry_call = self.clock.callLater(max(0.0, deadline - now), self._expire)

    def _expire(self) -> None:
        self._expiry_call = None
        self._expiry_at = math.inf
        now = self.clock.seconds()
        for entry in self.core.expire(now):
            d, timeout = entry.context
            d.errback(RemotingTimeoutError(self.peer, entry.code, entry.opaque, timeout))
        deadline = self.core.next_deadline()
        if deadline is not None and deadline < self._expiry_at and self._connected:
            self._expire_at(deadline, now)

    @property
    def pending_count(self) -> int:
        return self.core.pending_count

    @property
    def inflight(self) -> int:
        return self.core.inflight

    # ------------------------------------------------------------------ back-pressure (IPushProducer)

    def pauseProducing(self) -> None:
        """Twisted calls this once its buffer holds more than ``bufferSize`` (= write_high_water)."""
        if not self.core.backed_up:
            log.debug("pausing reads from %s: write buffer above %d bytes", self.peer, self.options.write_high_water)
        self.core.transport_buffered(self.options.write_high_water + 1)
        self.transport.pauseProducing()

    def resumeProducing(self) -> None:
        """Twisted calls this once its buffer is empty."""
        self.core.transport_buffered(0)
        if self._connected and not self.core.reading_paused:
            self.transport.resumeProducing()
        self._serve()

    def stopProducing(self) -> None:
        """The transport is going away; connectionLost follows and closes the core."""

    @property
    def paused(self) -> bool:
        return self.core.backed_up

    # ------------------------------------------------------------------ graceful shutdown

    def drain(self) -> defer.Deferred:
        """Stop reading new requests; fire once every request already read has been answered."""
        self.core.start_draining()
        if self._connected:
            self.transport.pauseProducing()
        d = defer.Deferred()
        self._idle_waiters.append(d)
        self._notify_idle()
        return d

    def _notify_idle(self) -> None:
        if not self._idle_waiters or not self.core.is_idle:
            return
        self._flush()  # whoever waits for idle (a drain before close) must find every answer written
        waiters, self._idle_waiters = self._idle_waiters, []
        for d in waiters:
            d.callback(None)
