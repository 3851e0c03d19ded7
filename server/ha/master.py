"""The master side of classic replication: a listener on haListenPort streaming the commit log to slaves.

Everything runs on the reactor, the thread that also appends to the store, and never blocks it: each
connection is a push producer of its transport, so commit-log bytes are read (and copied into a frame,
the one copy Twisted's ``write`` needs) only while the socket takes them. New data wakes the
connections once per reactor turn, whatever the number of messages appended in it; a 100 ms poll (as
Apache's WriteSocketService) covers records no consume queue announces (half messages).

The acks the slaves report feed :meth:`HAMaster.wait_for_replicas`, the SYNC_MASTER wait.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ferrymq.remoting.pending import Pending
from ferrymq.server.store.message_store import MessageStore
from ferrymq.wire.bodies import HAConnectionRuntimeInfo, HARuntimeInfo
from twisted.internet import defer, protocol, task
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

from .protocol import (
    ProtocolError,
    ReportReader,
    encode_transfer_header,
    first_transfer_offset,
)
from ferrymq.remoting.twisted_io import prompt_writer

log = logging.getLogger("ferrymq.ha.master")

#: how often idle connections look for data no arrival announced, and check heartbeats and expiry (s)
POLL_INTERVAL = 0.1
#: :meth:`HAMaster.reach` when no slave needs to hold anything: beyond every commit-log offset
NO_WAIT = 1 << 63


@implementer(IPushProducer)
class SlaveConnection(protocol.Protocol):
    """One slave: its reports in, the commit log out from where it asked.

    The frames are the classic protocol's; a subclass speaking another protocol over the same stream
    overrides :meth:`reports_received` (what the slave said), :meth:`frame_limit` (how far the next frame
    may reach) and :meth:`frame_header`.
    """

    reader: Any
    #: writes to the slave (:func:`ferrymq.remoting.twisted_io.prompt_writer`: TCP_NODELAY, as Apache sets on
    #: both ends, so a slave's report does not sit behind Nagle)
    write: Callable[[bytes], None]

    def __init__(self, master: HAMaster):
        self.master = master
        self.reader = ReportReader()
        #: the slave's latest report: everything before it is stored on the slave
        self.ack_offset = -1
        #: where the next frame starts (-1 until the slave said where to start)
        self.next_offset = -1
        self.paused = False
        self.last_read = self.last_write = time.monotonic()
        self.addr = "?"
        #: bytes sent since the last second's roll, and in the last whole second (Apache's FlowMonitor)
        self.sent = 0
        self.sent_in_second = 0

    @property
    def name(self) -> str:
        """The slave as logs name it."""
        return self.addr

    def connectionMade(self) -> None:
        peer = self.transport.getPeer()
        self.addr = f"{getattr(peer, 'host', '?')}:{getattr(peer, 'port', '?')}"
        self.write = prompt_writer(self.transport)
        self.transport.registerProducer(self, True)
        self.master.connections.add(self)
        log.info("slave %s connected", self.addr)

    def connectionLost(self, reason: Any = None) -> None:
        self.master.connections.discard(self)
        log.info("slave %s disconnected (acked %d)", self.name, self.ack_offset)

    def dataReceived(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        try:
            reports = self.reader.feed(data)
        except ProtocolError as exc:
            log.warning("slave %s: %s; closing", self.addr, exc)
            self.transport.loseConnection()
            return
        self.reports_received(reports)

    def reports_received(self, offset: int | None) -> None:
        """The slave's latest report (None: no whole report yet); the first says where the stream starts."""
        if offset is None:
            return
        self.ack_offset = offset
        if self.next_offset < 0:
            store = self.master.store
            self.next_offset = first_transfer_offset(offset, store.get_max_phy_offset(),
                                                     store.config.mappedFileSizeCommitLog)
            log.info("slave %s asks for data from %d; streaming from %d", self.addr, offset, self.next_offset)
            self.pump()
        self.master.acked()

    # --- IPushProducer: the transport pauses us while its buffer is full
    def pauseProducing(self) -> None:
        self.paused = True

    def resumeProducing(self) -> None:
        self.paused = False
        self.pump()

    def stopProducing(self) -> None:
        self.paused = True

    def frame_limit(self) -> int:
        """The most bytes the next frame may carry from ``next_offset`` (0: none to send now)."""
        return self.master.batch_size

    def frame_header(self, offset: int, size: int) -> bytes | None:
        """The header of a frame of ``size`` bytes from ``offset`` (size 0: a heartbeat; None: none to send)."""
        return encode_transfer_header(offset, size)

    def pump(self) -> None:
        """Send frames from ``next_offset`` while there is data and the transport takes it."""
        if self.next_offset < 0:
            return
        read = self.master.store.get_commitlog_data
        while not self.paused:
            limit = self.frame_limit()
            view = read(self.next_offset, limit) if limit else None
            if view is None:
                return
            size = len(view)
            self.write(b"".join((self.frame_header(self.next_offset, size), view)))
            self.next_offset += size
            self.sent += size
            self.last_write = time.monotonic()

    def housekeep(self, now: float) -> None:
        """Heartbeat when idle; close a connection the slave stopped reporting on."""
        if now - self.last_read > self.master.housekeeping_s:
            log.warning("slave %s sent nothing for %.0f s; closing", self.addr, now - self.last_read)
            self.transport.loseConnection()
            return
        if self.next_offset < 0 or self.paused:
            return
        self.pump()
        if now - self.last_write > self.master.heartbeat_s:
            header = self.frame_header(self.next_offset, 0)
            if header is not None:
                self.write(header)
                self.last_write = now


class _Factory(protocol.Factory):
    def __init__(self, master: HAMaster):
        self.master = master

    def buildProtocol(self, addr: Any) -> SlaveConnection:
        conn = self.master.connection_type(self.master)
        conn.factory = self
        return conn


class HAMaster:
    """Apache's DefaultHAService on a master: serves any number of slaves on one port."""

    #: the protocol each slave's connection speaks
    connection_type: type[SlaveConnection] = SlaveConnection

    def __init__(self, store: MessageStore, reactor: Any, *, batch_size: int = 32 * 1024,
                 heartbeat_ms: int = 5000, housekeeping_ms: int = 20000, max_gap_not_in_sync: int = 256 << 20):
        self.store = store
        #: a slave further behind than this many bytes is not in sync (haMaxGapNotInSync)
        self.max_gap_not_in_sync = max_gap_not_in_sync
        self._second = time.monotonic()
        self.reactor = reactor
        self.batch_size = batch_size
        self.heartbeat_s = heartbeat_ms / 1000
        self.housekeeping_s = housekeeping_ms / 1000
        self.connections: set[SlaveConnection] = set()
        #: SYNC_MASTER waits: (commit-log end, slave acks needed, deadline, Pending), in end order
        self._waits: deque[tuple[int, int, float, Pending]] = deque()
        self._wake: Any = None
        self._port: Any = None
        self._loop: task.LoopingCall | None = None
        self._expiry: Any = None

    def listen(self, port: int, interface: str = "") -> int:
        """Start serving slaves on ``port``; the port actually bound."""
        self._port = self.reactor.listenTCP(port, _Factory(self), interface=interface)
        self.store.add_arriving_listener(self._arrived)
        loop = self._loop = task.LoopingCall(self._poll)
        loop.clock = self.reactor
        loop.start(POLL_INTERVAL, now=False)
        return self._port.getHost().port

    @defer.inlineCallbacks
    def stop(self):
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        self.store.remove_arriving_listener(self._arrived)
        if self._expiry is not None and self._expiry.active():
            self._expiry.cancel()
        for conn in list(self.connections):
            conn.transport.abortConnection()
        if self._port is not None:
            yield self._port.stopListening()
        while self._waits:
            self._waits.popleft()[3].callback(False)

    @property
    def push2slave_max_offset(self) -> int:
        """The highest offset any slave acknowledged (Apache's push2SlaveMaxOffset), -1 with none."""
        return max((c.ack_offset for c in self.connections), default=-1)

    def _arrived(self, *_args: Any) -> None:
        if self._wake is None and self.connections:
            self._wake = self.reactor.callLater(0, self._pump_all)

    def _pump_all(self) -> None:
        self._wake = None
        for conn in list(self.connections):
            conn.pump()

    def _poll(self) -> None:
        now = time.monotonic()
        roll = now - self._second >= 1.0
        if roll:
            self._second = now
        for conn in list(self.connections):
            if roll:
                conn.sent_in_second, conn.sent = conn.sent, 0
            conn.housekeep(now)

    def runtime_info(self) -> HARuntimeInfo:
        """What GET_BROKER_HA_STATUS answers on a master (``mqadmin haStatus``): each slave's acknowledged
        offset, its distance to the commit log's end, and whether that is within haMaxGapNotInSync."""
        end = self.store.get_max_phy_offset()
        slaves = []
        for conn in sorted(self.connections, key=lambda c: c.addr):
            ack = conn.ack_offset  # -1 (as Apache's) before the slave's first report
            slaves.append(HAConnectionRuntimeInfo(
                addr=conn.addr, slave_ack_offset=ack, diff=end - ack, in_sync=end - ack < self.max_gap_not_in_sync,
                transferred_byte_in_second=conn.sent_in_second, transfer_from_where=conn.next_offset))
        return HARuntimeInfo(master=True, master_commit_log_max_offset=end,
                             in_sync_slave_nums=sum(s.in_sync for s in slaves), ha_connection_info=slaves)

    # ------------------------------------------------------------------ SYNC_MASTER

    def wait_for_replicas(self, end: int, slaves: int, timeout_ms: int) -> Pending:
        """Fires True once ``slaves`` connected slaves acknowledged every byte before commit-log offset
        ``end``, False after ``timeout_ms`` (Apache's GroupTransferService). A :class:`Pending`, not a
        Deferred: one is made for every SYNC_MASTER send."""
        d = Pending()
        if end <= self.reach(slaves):
            d.callback(True)
            return d
        deadline = time.monotonic() + timeout_ms / 1000
        self._waits.append((end, slaves, deadline, d))
        if self._expiry is None or not self._expiry.active():
            self._expiry = self.reactor.callLater(timeout_ms / 1000, self._expire)
        if self._wake is None:
            self._wake = self.reactor.callLater(0, self._pump_all)
        return d

    def reach(self, slaves: int) -> int:
        """The commit-log offset before which ``slaves`` connected slaves hold every byte: the
        ``slaves``-th highest acknowledged offset (-1 with fewer slaves connected)."""
        if slaves <= 0:
            return NO_WAIT
        acks = sorted((c.ack_offset for c in self.connections), reverse=True)
        return acks[slaves - 1] if len(acks) >= slaves else -1

    def acked(self) -> None:
        """Answer the waits the slaves' acknowledgements now cover (the reach is worked out once per
        call, not once per wait: a slave's report covers every send in the frames it acknowledges)."""
        waits = self._waits
        reached: dict[int, int] = {}
        while waits:
            end, slaves, _deadline, d = waits[0]
            reach = reached.get(slaves)
            if reach is None:
                reach = reached[slaves] = self.reach(slaves)
            if end > reach:
                return
            waits.popleft()
            d.callback(True)

    def _expire(self) -> None:
        self._expiry = None
        waits = self._waits
        now = time.monotonic()
        while waits and waits[0][2] <= now:
            end, slaves, _deadline, d = waits.popleft()
            log.warning("transfer message to slave timeout, offset %d, request acks %d", end, slaves + 1)
            d.callback(False)
        if waits:
            self._expiry = self.reactor.callLater(max(0.0, waits[0][2] - now), self._expire)
