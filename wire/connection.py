"""One remoting connection as a state machine: bytes in, events and bytes out (sans-I/O, as h11's Connection).

Either end of a RocketMQ connection may send requests, so inbound frames are split by the RESPONSE flag
into answers to our own requests (matched by opaque) and requests for the local processor. This module
never touches a socket, a reactor or a clock: the caller feeds what it read to :meth:`Connection.receive_data`,
writes what :meth:`Connection.data_to_send` returns and passes the time in, so every rule below is
testable with plain bytes. :mod:`ferrymq.remoting.protocol` runs it on Twisted.

Requests are pulled with :meth:`Connection.next_request` rather than returned as events: back-pressure can
stop their handling in the middle of one read, and the ones not yet handled stay queued here.

States (:data:`ALLOWED` is the table of which call each one accepts)::

    OPEN ── close() or a bad frame ──> CLOSING ── connection_lost() ──> CLOSED
      └──────────────────── connection_lost() ───────────────────────────┘

In CLOSING nothing more is read and no request expecting an answer is sent, but answers to requests
already read, oneway requests and commands written as they are still go out. In CLOSED nothing is
queued; answers that complete late are dropped.
"""

from __future__ import annotations

import enum
from collections import deque
from dataclasses import dataclass
from heapq import heapify, heappop, heappush
from typing import Any

from .codes import Flag
from .command import RemotingCommand, next_opaque
from .errors import FrameError, FrameTooLarge
from .frame import DEFAULT_MAX_FRAME_SIZE, FrameDecoder, encode

_RESPONSE = int(Flag.RESPONSE)  # plain ints: IntFlag arithmetic is slow on the per-frame path
_ONEWAY = int(Flag.ONEWAY)

#: Netty's defaults, which Apache keeps: pause above 64 KiB unsent, resume at 32 KiB.
DEFAULT_HIGH_WATER = 64 * 1024


class State(enum.Enum):
    OPEN = "OPEN"
    CLOSING = "CLOSING"
    CLOSED = "CLOSED"


OPEN, CLOSING, CLOSED = State.OPEN, State.CLOSING, State.CLOSED

#: The states in which each state-dependent call is accepted; any other raises ConnectionStateError.
#: Calls not listed (send_response, next_request, data_to_send, expire, the idle and back-pressure
#: calls) are accepted in every state.
ALLOWED: dict[str, frozenset[State]] = {
    "receive_data": frozenset({OPEN, CLOSING}),  # CLOSING: ignored, nothing after a close is trusted
    "send_request": frozenset({OPEN}),
    "send": frozenset({OPEN, CLOSING}),
    "close": frozenset({OPEN}),
    "connection_lost": frozenset({OPEN, CLOSING}),
}


class ConnectionStateError(Exception):
    """A call the connection's state does not allow (a bug in the caller, not in the peer)."""

    def __init__(self, call: str, state: State):
        allowed = ", ".join(s.name for s in State if s in ALLOWED[call])
        super().__init__(f"{call}() is not allowed in state {state.name} (only in {allowed})")
        self.call = call
        self.state = state


@dataclass(slots=True)
class PendingRequest:
    """A request sent and awaiting its response. ``context`` is the caller's: what to complete on the answer."""

    opaque: int
    code: int
    deadline: float
    context: Any = None


@dataclass(slots=True)
class ResponseReceived:
    command: RemotingCommand
    request: PendingRequest

    @property
    def context(self) -> Any:
        return self.request.context


@dataclass(slots=True)
class UnmatchedResponse:
    """A response whose opaque matches no pending request: usually one that arrived after its deadline."""

    command: RemotingCommand


@dataclass(slots=True)
class ProtocolError:
    """The byte stream cannot be framed; the connection is CLOSING and must be aborted."""

    reason: str
    #: The length field was above the frame size limit (else the bytes were no frame at all).
    too_large: bool = False


Event = ResponseReceived | UnmatchedResponse | ProtocolError


class Connection:
    """Framing, opaque correlation, deadlines, idle detection, write batching and back-pressure of one
    connection.

    Write batching: every frame queued since the last :meth:`data_to_send` leaves in one buffer, so the
    caller can answer everything one read produced with one write.

    Back-pressure counts the bytes not yet written: those queued here plus what the transport reports
    holding (:meth:`transport_buffered`). Above ``high_water`` the connection is :attr:`backed_up`:
    :meth:`next_request` hands out nothing more until the count falls to ``low_water``.
    """

    __slots__ = (
        "_active", "_backed_up", "_backlog", "_deadlines", "_decoder", "_draining", "_idle_since", "_inbox",
        "_out", "_pending", "_queued", "high_water", "idle_timeout", "inflight", "low_water", "state",
    )

    def __init__(self, max_frame_size: int = DEFAULT_MAX_FRAME_SIZE, high_water: int = DEFAULT_HIGH_WATER,
                 low_water: int | None = None, idle_timeout: float = 0.0):
        self.state = OPEN
        self._decoder = FrameDecoder(max_frame_size)
        self._pending: dict[int, PendingRequest] = {}
        #: (deadline, opaque) of every pending request, plus entries of answered ones, dropped lazily
        #: (cheaper than a timer per request; :meth:`_compact_deadlines` bounds them).
        self._deadlines: list[tuple[float, int]] = []
        self._inbox: deque[RemotingCommand] = deque()
        #: Requests handed out by next_request() and not yet finished with send_response().
        self.inflight = 0
        self._out: list[bytes] = []
        self._queued = 0
        self._backlog = 0
        self.high_water = high_water
        self.low_water = high_water // 2 if low_water is None else low_water
        self._backed_up = False
        self._draining = False
        self.idle_timeout = idle_timeout
        self._active = True
        self._idle_since = 0.0

    def _require(self, call: str) -> None:
        """The state check off the hot path: callers test ``state is not OPEN`` first (OPEN allows all)."""
        if self.state not in ALLOWED[call]:
            raise ConnectionStateError(call, self.state)

    # ------------------------------------------------------------------ inbound

    def receive_data(self, data: bytes) -> list[Event]:
        """Frame ``data``: responses come back as events, requests queue for :meth:`next_request`.

        An unreadable frame yields ProtocolError, moves to CLOSING and drops the queued requests.
        """
        if self.state is not OPEN:
            self._require("receive_data")
            return []
        self._active = True
        try:
            commands = self._decoder.feed(data)
        except FrameTooLarge as exc:
            return [self._fail(str(exc), too_large=True)]
        except FrameError as exc:
            return [self._fail(str(exc))]
        except Exception as exc:  # noqa: BLE001 - any decoder failure is a bad frame, not a crash
            return [self._fail(f"undecodable frame ({type(exc).__name__}: {exc})")]
        events: list[Event] = []
        pending = self._pending
        for cmd in commands:
            if cmd.flag & _RESPONSE:
                entry = pending.pop(cmd.opaque, None)
                events.append(UnmatchedResponse(cmd) if entry is None else ResponseReceived(cmd, entry))
            else:
                self._inbox.append(cmd)
        return events

    def _fail(self, reason: str, too_large: bool = False) -> ProtocolError:
        self.state = CLOSING
        self._inbox.clear()
        return ProtocolError(reason, too_large)

    def next_request(self) -> RemotingCommand | None:
        """The next request to handle, or None: none queued, backed up, or no longer OPEN.

        Each request returned counts as in flight until :meth:`send_response` finishes it.
        """
        if not self._inbox or self._backed_up or self.state is not OPEN:
            return None
        self.inflight += 1
        return self._inbox.popleft()

    @property
    def requests_ready(self) -> bool:
        """True when :meth:`next_request` would return a request."""
        return bool(self._inbox) and not self._backed_up and self.state is OPEN

    @property
    def queued_requests(self) -> int:
        return len(self._inbox)

    @property
    def partial_frame_bytes(self) -> int:
        """Bytes read of a frame not yet complete."""
        return self._decoder.buffered

    # ------------------------------------------------------------------ outbound

    def send_response(self, request: RemotingCommand, response: RemotingCommand | None) -> None:
        """Finish ``request`` (from :meth:`next_request`), queueing ``response`` unless it is None, the
        request was oneway, or the connection is CLOSED (a late answer then has nowhere to go)."""
        self.inflight -= 1
        if response is None or request.flag & _ONEWAY or self.state is CLOSED:
            return
        self._queue(encode(response))

    def send_request(self, cmd: RemotingCommand, deadline: float, context: Any = None) -> PendingRequest:
        """Queue a request that expects a response by ``deadline`` (caller's clock); ``context`` comes
        back with its ResponseReceived, or from :meth:`expire` / :meth:`connection_lost`.

        An opaque still awaiting its own answer is replaced by a fresh one (on ``cmd`` itself).
        """
        if self.state is not OPEN:
            self._require("send_request")
        pending = self._pending
        while cmd.opaque in pending:
            cmd.opaque = next_opaque()
        data = encode(cmd)  # first: an unencodable request leaves no bookkeeping behind
        entry = PendingRequest(cmd.opaque, cmd.code, deadline, context)
        pending[cmd.opaque] = entry
        deadlines = self._deadlines
        heappush(deadlines, (deadline, cmd.opaque))
        if len(deadlines) > 2 * len(pending) + 64:
            self._compact_deadlines()
        self._queue(data)
        return entry

    def send_oneway(self, cmd: RemotingCommand) -> None:
        """Queue a request the peer must not answer: the ONEWAY flag is set here, nothing waits for it."""
        cmd.flag |= _ONEWAY
        self.send(cmd)

    def send(self, cmd: RemotingCommand) -> None:
        """Queue any command as it is (a response built outside the request's handler, a oneway)."""
        if self.state is not OPEN:
            self._require("send")
        self._queue(encode(cmd))

    def _queue(self, data: bytes) -> None:
        self._out.append(data)
        self._queued += len(data)
        self._active = True
        if self._queued + self._backlog > self.high_water:
            self._backed_up = True

    @property
    def bytes_queued(self) -> int:
        """Bytes queued since the last :meth:`data_to_send`."""
        return self._queued

    def data_to_send(self) -> bytes:
        """Everything queued since the last call, in one buffer (b"" when nothing is)."""
        out = self._out
        if not out:
            return b""
        data = out[0] if len(out) == 1 else b"".join(out)
        out.clear()
        self._queued = 0
        if self._backed_up and self._backlog <= self.low_water:
            self._backed_up = False
        return data

    # ------------------------------------------------------------------ back-pressure

    def transport_buffered(self, nbytes: int) -> None:
        """The transport reports holding ``nbytes`` written but not yet sent."""
        self._backlog = nbytes
        unsent = nbytes + self._queued
        if unsent > self.high_water:
            self._backed_up = True
        elif unsent <= self.low_water:
            self._backed_up = False

    @property
    def backed_up(self) -> bool:
        """Unsent bytes passed ``high_water`` and have not yet fallen to ``low_water``: handle no more requests."""
        return self._backed_up

    @property
    def reading_paused(self) -> bool:
        """The caller should not read from the peer: backed up, or draining."""
        return self._backed_up or self._draining

    def start_draining(self) -> None:
        """Stop reading (requests already read are still handed out and answered); see :attr:`is_idle`."""
        self._draining = True

    @property
    def is_idle(self) -> bool:
        """No request queued or in flight: a drain is complete."""
        return not self.inflight and not self._inbox

    # ------------------------------------------------------------------ deadlines and idle close

    def expire(self, now: float) -> list[PendingRequest]:
        """Remove and return the pending requests whose deadline is ``now`` or earlier, earliest first."""
        deadlines = self._deadlines
        pending = self._pending
        expired: list[PendingRequest] = []
        while deadlines and deadlines[0][0] <= now:
            _, opaque = heappop(deadlines)
            entry = pending.get(opaque)
            if entry is not None and entry.deadline <= now:
                del pending[opaque]
                expired.append(entry)
        return expired

    def next_deadline(self) -> float | None:
        """The earliest deadline of a pending request (when to call :meth:`expire` next), or None."""
        deadlines = self._deadlines
        pending = self._pending
        while deadlines:
            deadline, opaque = deadlines[0]
            entry = pending.get(opaque)
            if entry is not None and entry.deadline == deadline:
                return deadline
            heappop(deadlines)  # answered, or its opaque reused by a later request
        return None

    def _compact_deadlines(self) -> None:
        self._deadlines = [(entry.deadline, entry.opaque) for entry in self._pending.values()]
        heapify(self._deadlines)

    @property
    def pending_count(self) -> int:
        return len(self._pending)

    def should_close_idle(self, now: float) -> bool:
        """True once the connection has been silent for ``idle_timeout`` (0 disables).

        Call it a few times per ``idle_timeout``. Frames in or out only set a flag (a timestamp per frame
        would cost the hot path a clock read); a call that finds the flag set clears it and starts the
        silence at ``now``, so with k calls per period a silent connection is reported between 1 and
        1 + 1/k periods after its last frame.
        """
        if self.idle_timeout <= 0 or self.state is CLOSED:
            return False
        if self._active:
            self._active = False
            self._idle_since = now
            return False
        return now - self._idle_since >= self.idle_timeout

    @property
    def idle_since(self) -> float | None:
        """When the current silence started, as last sampled by should_close_idle(); None after activity."""
        return None if self._active else self._idle_since

    # ------------------------------------------------------------------ closing

    def close(self) -> None:
        """OPEN -> CLOSING: stop reading and sending requests; queued output still goes out."""
        if self.state is not OPEN:
            self._require("close")
        self.state = CLOSING

    def connection_lost(self) -> list[PendingRequest]:
        """-> CLOSED. Returns the requests still awaiting a response (the caller fails them); unsent
        output and unhandled requests are dropped."""
        if self.state is CLOSED:
            self._require("connection_lost")
        self.state = CLOSED
        lost = list(self._pending.values())
        self._pending.clear()
        self._deadlines.clear()
        self._inbox.clear()
        self._out.clear()
        self._queued = 0
        return lost
