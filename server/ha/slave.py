"""The slave side of classic replication: a client of the master's HA port that appends what it streams.

As Apache's DefaultHAClient: on connecting the slave reports its commit-log max offset, the master
streams from there, and the slave reports again after every chunk it appended and at least every
haSendHeartbeatInterval. A frame that does not start at the slave's max offset (once it has data)
closes the connection; so does a master silent for haHousekeepingInterval. The slave reconnects until
stopped, to whichever address :meth:`HASlave.set_master_address` last gave (the configured
haMasterAddress, or the one the name server's registration answer names).

Received bytes go through the store's one append/dispatch path (:meth:`MessageStore.append_to_commitlog`):
the consume queues and the index are built locally, and long-polling pulls on the slave wake. The slave
reports what its commit log holds before it dispatches the records, as Apache's does.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ferrymq.remoting.client import split_address
from ferrymq.server.store.message_store import MessageStore
from ferrymq.wire.bodies import HAClientRuntimeInfo, HARuntimeInfo
from twisted.internet import protocol, task

from .protocol import ProtocolError, TransferReader, encode_report
from ferrymq.remoting.twisted_io import prompt_writer

log = logging.getLogger("ferrymq.ha.slave")

#: how often the connection checks whether a report is due or the master went silent (s)
TICK = 0.1
#: longest wait before reconnecting to a master that refused or dropped the connection (Apache: 5 s)
MAX_RETRY_S = 5.0


class MasterConnection(protocol.Protocol):
    """The classic protocol's connection to the master. A subclass speaking another protocol over the same
    upkeep (reports, heartbeats, a silent master closed) overrides :meth:`connectionMade`,
    :meth:`dataReceived` and :meth:`report_frame`."""

    #: whether reports are due (the master streams to this connection)
    transferring = True

    def __init__(self, slave: HASlave):
        self.slave = slave
        self.reader = TransferReader(max_body=max(slave.max_frame, 1 << 20))
        self.reported = -1
        self.last_report = 0.0
        self.last_read = time.monotonic()

    def connectionMade(self) -> None:
        self.write = prompt_writer(self.transport)
        self.slave.connected(self)
        self.report()

    def connectionLost(self, reason: Any = None) -> None:
        self.slave.disconnected(self)

    def report(self) -> None:
        self.reported = self.slave.store.get_max_phy_offset()
        self.last_report = time.monotonic()
        self.slave.last_write_ms = int(time.time() * 1000)
        self.write(self.report_frame(self.reported))

    def report_frame(self, offset: int) -> bytes:
        """The report that this slave's commit log ends at ``offset``."""
        return encode_report(offset)

    def dataReceived(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        self.slave.last_read_ms = int(time.time() * 1000)
        self.slave.received += len(data)
        store = self.slave.store
        try:
            frames = self.reader.feed(data)
        except ProtocolError as exc:
            log.error("master %s: %s; closing", self.slave.address, exc)
            self.transport.loseConnection()
            return
        if frames:
            try:
                self._append(frames)
            finally:
                store.dispatch_appended()

    def _append(self, frames: list) -> None:
        """Append the frames' bytes to the commit log and report the new end: the ack a SYNC_MASTER's
        senders wait for goes out before the consume queues and the index are built (the caller's
        dispatch), as it says only what the commit log holds."""
        store = self.slave.store
        for frame in frames:
            local = store.get_max_phy_offset()
            if local and frame.offset != local:
                log.error("master pushed offset %d, not this slave's max offset %d; closing", frame.offset, local)
                self.transport.loseConnection()
                return
            if frame.data:
                try:
                    store.append_to_commitlog(frame.offset, frame.data, dispatch=False)
                except (ValueError, OSError) as exc:
                    log.error("cannot append replicated data at %d: %s; closing", frame.offset, exc)
                    self.transport.loseConnection()
                    return
        if store.get_max_phy_offset() > self.reported:
            self.report()

    def tick(self, now: float) -> None:
        if now - self.last_read > self.slave.housekeeping_s:
            log.warning("master %s sent nothing for %.0f s; closing", self.slave.address, now - self.last_read)
            self.transport.loseConnection()
        elif self.transferring and now - self.last_report >= self.slave.heartbeat_s:
            self.report()


class _Factory(protocol.ClientFactory):
    def __init__(self, slave: HASlave, address: str):
        self.slave = slave
        self.address = address

    def buildProtocol(self, addr: Any) -> MasterConnection | None:
        return self.slave.connection_type(self.slave) if self.slave.factory is self else None

    def clientConnectionFailed(self, connector: Any, reason: Any) -> None:
        if self.slave.factory is self:  # not a connection attempt given up for a new address
            log.warning("HA client: connect to master %s failed: %s", self.address, reason.getErrorMessage())
            self.slave.retry_later()


class HASlave:
    """Keeps one replication connection to the master (Apache's HAClient)."""

    #: the protocol the connection speaks
    connection_type: type[MasterConnection] = MasterConnection

    def __init__(self, store: MessageStore, reactor: Any, *, heartbeat_ms: int = 5000,
                 housekeeping_ms: int = 20000, max_frame: int = 32 * 1024):
        self.store = store
        self.reactor = reactor
        self.heartbeat_s = heartbeat_ms / 1000
        self.housekeeping_s = housekeeping_ms / 1000
        self.max_frame = max_frame
        self.address = ""
        self.connection: MasterConnection | None = None
        self._connector: Any = None
        #: the factory of the current connection attempt (callbacks of older ones are ignored)
        self.factory: _Factory | None = None
        self._retry: Any = None
        self._loop: task.LoopingCall | None = None
        self.running = False
        #: wall-clock ms of the last bytes from the master and of the last report to it (haStatus)
        self.last_read_ms = self.last_write_ms = int(time.time() * 1000)
        #: bytes received since the last second's roll, and in the last whole second
        self.received = 0
        self.received_in_second = 0
        self._second = time.monotonic()

    @property
    def retry_s(self) -> float:
        return min(MAX_RETRY_S, self.heartbeat_s)

    def start(self, address: str = "") -> None:
        self.running = True
        loop = self._loop = task.LoopingCall(self._tick)
        loop.clock = self.reactor
        loop.start(TICK, now=False)
        if address:
            self.set_master_address(address)

    def stop(self) -> None:
        self.running = False
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        if self._retry is not None and self._retry.active():
            self._retry.cancel()
        self._drop()

    def set_master_address(self, address: str) -> None:
        """Replicate from ``address`` ('host:port' of the master's HA port) from now on."""
        if address == self.address:
            return
        log.info("HA master address %s -> %s", self.address or "(none)", address)
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
        self.factory = _Factory(self, self.address)
        self._connector = self.reactor.connectTCP(host, port, self.factory, timeout=3)

    def connected(self, conn: MasterConnection) -> None:
        self.connection = conn
        log.info("HA client connected to master %s; replicating from %d", self.address,
                 self.store.get_max_phy_offset())

    def disconnected(self, conn: MasterConnection) -> None:
        if self.connection is conn:
            self.connection = None
            self._connector = None
            log.info("HA client: connection to master %s closed", self.address)
            self.retry_later()

    def retry_later(self) -> None:
        self._connector = None
        if self.running and (self._retry is None or not self._retry.active()):
            self._retry = self.reactor.callLater(self.retry_s, self._connect)

    def _tick(self) -> None:
        now = time.monotonic()
        if now - self._second >= 1.0:
            self._second = now
            self.received_in_second, self.received = self.received, 0
        if self.connection is not None:
            self.connection.tick(now)

    def runtime_info(self) -> HARuntimeInfo:
        """What GET_BROKER_HA_STATUS answers on a slave (``mqadmin haStatus``). The classic protocol carries
        no flush offset of the master, so that stays 0, as on Apache's classic slave."""
        return HARuntimeInfo(master=False, ha_client_runtime_info=HAClientRuntimeInfo(
            master_addr=self.address or None, transferred_byte_in_second=self.received_in_second,
            max_offset=self.store.get_max_phy_offset(), last_read_timestamp=self.last_read_ms,
            last_write_timestamp=self.last_write_ms))
