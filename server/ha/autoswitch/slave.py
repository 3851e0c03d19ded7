"""The slave side of AutoSwitch replication: handshake with the master, cut the commit log back to where
the two agree, then append what the master streams.

On connecting the slave sends its controller-assigned brokerId; the master answers with its epoch entries
and end. The slave truncates to :func:`~.protocol.truncate_point` (dropping what a master it once was
wrote and no one acknowledged), reports where its log now ends, and appends each transfer frame that
starts exactly there, recording an epoch entry when a frame's epoch is new. Reports follow every append
and at least every haSendHeartbeatInterval. The connection is retried until stopped.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ferrymq.remoting.client import split_address
from ferrymq.server.store.message_store import MessageStore
from twisted.internet import protocol, task

from ..protocol import ProtocolError, no_delay
from .epoch import EpochFile
from .protocol import (
    MasterFrameReader,
    MasterHandshake,
    encode_slave_handshake,
    encode_slave_report,
    truncate_point,
)

log = logging.getLogger("ferrymq.ha.autoswitch")

TICK = 0.1
MAX_RETRY_S = 5.0


class MasterConnection(protocol.Protocol):
    def __init__(self, slave: AutoSwitchSlave):
        self.slave = slave
        self.reader = MasterFrameReader(max_body=max(slave.max_frame, 1 << 20))
        self.transferring = False
        self.reported = -1
        self.last_report = 0.0
        self.last_read = time.monotonic()

    def connectionMade(self) -> None:
        no_delay(self.transport)
        self.slave.connection = self
        self.transport.write(encode_slave_handshake(self.slave.broker_id))

    def connectionLost(self, reason: Any = None) -> None:
        self.slave.disconnected(self)

    def report(self) -> None:
        self.reported = self.slave.store.get_max_phy_offset()
        self.last_report = time.monotonic()
        self.transport.write(encode_slave_report(self.reported))

    def _fail(self, why: str) -> None:
        log.error("master %s: %s; closing", self.slave.address, why)
        self.transport.loseConnection()

    def dataReceived(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        slave = self.slave
        store, epochs = slave.store, slave.epochs
        try:
            frames = self.reader.feed(data)
        except ProtocolError as exc:
            self._fail(str(exc))
            return
        for frame in frames:
            if isinstance(frame, MasterHandshake):
                cut = truncate_point(epochs.entries, store.get_max_phy_offset(), frame.entries, frame.max_offset)
                if cut is not None and cut < 0:
                    self._fail(f"no epoch in common with the master (mine {epochs.entries}, its {frame.entries})")
                    return
                if cut is not None and cut < store.get_max_phy_offset():
                    log.warning("truncating the commit log from %d to %d, where it agrees with the master's",
                                store.get_max_phy_offset(), cut)
                    store.truncate_to(cut)
                    epochs.truncate_from_offset(cut)
                self.transferring = True
                self.report()
                continue
            if not self.transferring:
                self._fail("transfer frame before the handshake")
                return
            local = store.get_max_phy_offset()
            if local and frame.offset != local:
                self._fail(f"master pushed offset {frame.offset}, not this slave's end {local}")
                return
            if frame.epoch > epochs.last_epoch:
                try:
                    epochs.append(frame.epoch, frame.epoch_start)
                except ValueError as exc:
                    self._fail(str(exc))
                    return
            if frame.data:
                try:
                    store.append_to_commitlog(frame.offset, frame.data)
                except (ValueError, OSError) as exc:
                    self._fail(f"cannot append replicated data at {frame.offset}: {exc}")
                    return
        if self.transferring and store.get_max_phy_offset() > self.reported:
            self.report()

    def tick(self, now: float) -> None:
        if now - self.last_read > self.slave.housekeeping_s:
            self._fail(f"nothing received for {now - self.last_read:.0f} s")
        elif self.transferring and now - self.last_report > self.slave.heartbeat_s:
            self.report()


class _Factory(protocol.ClientFactory):
    def __init__(self, slave: AutoSwitchSlave):
        self.slave = slave

    def buildProtocol(self, addr: Any) -> MasterConnection | None:
        return MasterConnection(self.slave) if self.slave.factory is self else None

    def clientConnectionFailed(self, connector: Any, reason: Any) -> None:
        if self.slave.factory is self:
            log.warning("AutoSwitch HA: connect to master %s failed: %s", self.slave.address,
                        reason.getErrorMessage())
            self.slave.retry_later()


class AutoSwitchSlave:
    def __init__(self, store: MessageStore, epochs: EpochFile, reactor: Any, broker_id: int, *,
                 heartbeat_ms: int = 5000, housekeeping_ms: int = 20000, max_frame: int = 32 * 1024):
        self.store = store
        self.epochs = epochs
        self.reactor = reactor
        self.broker_id = broker_id
        self.heartbeat_s = heartbeat_ms / 1000
        self.housekeeping_s = housekeeping_ms / 1000
        self.max_frame = max_frame
        self.address = ""
        self.connection: MasterConnection | None = None
        self.factory: _Factory | None = None
        self._connector: Any = None
        self._retry: Any = None
        self._loop: task.LoopingCall | None = None
        self.running = False

    def start(self) -> None:
        self.running = True
        loop = self._loop = task.LoopingCall(self._tick)
        loop.clock = self.reactor
        loop.start(TICK, now=False)

    def stop(self) -> None:
        self.running = False
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._drop()

    def set_master_address(self, address: str) -> None:
        if not address or address == self.address:
            return
        log.info("AutoSwitch HA master address %s -> %s", self.address or "(none)", address)
        self.address = address
        self._drop()
        self._connect()

    def _drop(self) -> None:
        self.factory = None
        if self.connection is not None:
            self.connection.transport.abortConnection()
            self.connection = None
        elif self._connector is not None:
            self._connector.disconnect()
        self._connector = None

    def _connect(self) -> None:
        if not self.running or not self.address or self._connector is not None:
            return
        host, port = split_address(self.address)
        self.factory = _Factory(self)
        self._connector = self.reactor.connectTCP(host, port, self.factory, timeout=3)

    def disconnected(self, conn: MasterConnection) -> None:
        if self.connection is conn:
            self.connection = None
            self.retry_later()

    def retry_later(self) -> None:
        self._connector = None
        if self.running and (self._retry is None or not self._retry.active()):
            self._retry = self.reactor.callLater(min(MAX_RETRY_S, self.heartbeat_s), self._connect)

    def _tick(self) -> None:
        if self.connection is not None:
            self.connection.tick(time.monotonic())
