"""The slave side of AutoSwitch replication: handshake with the master, cut the commit log back to where
the two agree, then append what the master streams.

On connecting the slave sends its controller-assigned brokerId; the master answers with its epoch entries
and end. The slave truncates to :func:`~.protocol.truncate_point` (dropping what a master it once was
wrote and no one acknowledged), reports where its log now ends, and appends each transfer frame that
starts exactly there, recording an epoch entry when a frame's epoch is new. Reports follow every append
and at least every haSendHeartbeatInterval; reconnecting and closing a silent master are the classic
slave's (:mod:`ferrymq.server.ha.slave`).
"""

from __future__ import annotations

import logging
import time
from typing import Any

from ferrymq.server.store.message_store import MessageStore

from .. import slave as classic
from ..protocol import ProtocolError
from ..slave import HASlave
from ferrymq.remoting.twisted_io import prompt_writer
from .epoch import EpochFile
from .protocol import (
    MasterFrameReader,
    MasterHandshake,
    encode_slave_handshake,
    encode_slave_report,
    truncate_point,
)

log = logging.getLogger("ferrymq.ha.autoswitch")


class MasterConnection(classic.MasterConnection):
    """The classic connection's upkeep with the AutoSwitch frames: the handshake first, then frames stamped
    with their epoch; reports are due once the handshake is done."""

    slave: AutoSwitchSlave

    def __init__(self, slave: AutoSwitchSlave):
        super().__init__(slave)
        self.reader = MasterFrameReader(max_body=max(slave.max_frame, 1 << 20))
        self.transferring = False

    def connectionMade(self) -> None:
        self.write = prompt_writer(self.transport)
        self.slave.connected(self)
        self.write(encode_slave_handshake(self.slave.broker_id))

    def report_frame(self, offset: int) -> bytes:
        return encode_slave_report(offset)

    def _fail(self, why: str) -> None:
        log.error("master %s: %s; closing", self.slave.address, why)
        self.transport.loseConnection()

    def dataReceived(self, data: bytes) -> None:
        self.last_read = time.monotonic()
        try:
            frames = self.reader.feed(data)
        except ProtocolError as exc:
            self._fail(str(exc))
            return
        if frames:
            try:
                self._take(frames)
            finally:
                self.slave.store.dispatch_appended()

    def _take(self, frames: list) -> None:
        """The handshake, then frames appended to the commit log; the report of the new end goes out before
        the caller dispatches them (consume queues, index), as the classic slave's."""
        slave = self.slave
        store, epochs = slave.store, slave.epochs
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
                    store.append_to_commitlog(frame.offset, frame.data, dispatch=False)
                except (ValueError, OSError) as exc:
                    self._fail(f"cannot append replicated data at {frame.offset}: {exc}")
                    return
        if self.transferring and store.get_max_phy_offset() > self.reported:
            self.report()


class AutoSwitchSlave(HASlave):
    """The classic slave's connection upkeep (reconnecting, reports, heartbeats) speaking the AutoSwitch
    protocol as the controller-assigned ``broker_id``."""

    connection_type = MasterConnection

    def __init__(self, store: MessageStore, epochs: EpochFile, reactor: Any, broker_id: int, *,
                 heartbeat_ms: int = 5000, housekeeping_ms: int = 20000, max_frame: int = 32 * 1024):
        super().__init__(store, reactor, heartbeat_ms=heartbeat_ms, housekeeping_ms=housekeeping_ms,
                         max_frame=max_frame)
        self.epochs = epochs
        self.broker_id = broker_id

    def set_master_address(self, address: str) -> None:
        """As the classic slave's; an empty address (no master named yet) keeps the one held."""
        if address:
            super().set_master_address(address)
