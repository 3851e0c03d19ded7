"""The master side of AutoSwitch replication: a listener on haListenPort answering each slave's handshake
with the epoch file, then streaming the commit log in frames that say which epoch wrote them.

A frame never spans two epochs, so a slave records each epoch where it starts. A slave that reports the
master's end counts as caught up; the slaves caught up within haMaxTimeSlaveNotCatchup are the ones the
master reports in its sync state set (:meth:`AutoSwitchMaster.in_sync_slaves`), and a slave catching up
asks for that report at once.

Under a steady stream of sends the master's end moves on before each report arrives, so a slave may never
report it. A slave that reports everything sent to it (Apache's lastMasterMaxOffset test) therefore *joins*:
for :data:`JOIN_WINDOW_S` the all-ack wait counts it as a member, which holds each new send until the slave
has it, so its next report reaches the end. The window also covers the controller's answer, as Apache
counts the proposed sync state set while it waits for it: nothing is acknowledged without the slave while
the set that includes it is being decided.

A connection's flow control, heartbeats and expiry, waking the connections on new data, the SYNC_MASTER
wait and stopping are the classic master's (:mod:`ferrymq.server.ha.master`); the wait also takes
:data:`ALL_IN_SYNC_STATE_SET` (allAckInSyncStateSet): every slave of the sync state set must hold the
message.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from ferrymq.server.store.message_store import MessageStore

from .. import master as classic
from ..master import HAMaster
from .epoch import EpochFile
from .protocol import (
    SlaveFrameReader,
    SlaveHandshake,
    encode_master_handshake,
    encode_transfer_header,
)

log = logging.getLogger("ferrymq.ha.autoswitch")

#: Apache's haMaxTimeSlaveNotCatchup: a slave not caught up for this long leaves the sync state set (s)
NOT_CATCHUP_S = 15.0
#: the slave-ack count of a wait for every slave of the sync state set (Apache's ALL_ACK_IN_SYNC_STATE_SET)
ALL_IN_SYNC_STATE_SET = -1
#: how long a joining slave counts in all-ack waits without the controller adding it to the set (s)
JOIN_WINDOW_S = 3.0


class SlaveConnection(classic.SlaveConnection):
    """The classic connection with the AutoSwitch frames: the slave's handshake (its brokerId) answered with
    the epoch file, and transfer frames stamped with the epoch that wrote them."""

    master: AutoSwitchMaster

    def __init__(self, master: AutoSwitchMaster):
        super().__init__(master)
        self.reader = SlaveFrameReader()
        self.slave_id: int | None = None
        #: the master's end when the last frame left for this slave (Apache's lastMasterMaxOffset)
        self.sent_end = -1
        self.caught_up_at = 0.0

    @property
    def name(self) -> str:
        return f"{self.addr} (brokerId {self.slave_id})"

    def connectionLost(self, reason: Any = None) -> None:
        super().connectionLost(reason)
        self.master.leave(self.slave_id)

    def reports_received(self, frames: list) -> None:
        for frame in frames:
            if isinstance(frame, SlaveHandshake):
                self.slave_id = frame.broker_id
                store = self.master.store
                log.info("slave %s (brokerId %d) handshakes; master ends at %d, epochs %s", self.addr,
                         frame.broker_id, store.get_max_phy_offset(),
                         [(e.epoch, e.start_offset) for e in self.master.epochs.entries])
                self.write(encode_master_handshake(store.get_max_phy_offset(), self.master.epochs.entries))
                self.last_write = time.monotonic()
            else:
                self._acked(frame.max_offset)

    def _acked(self, offset: int) -> None:
        self.ack_offset = offset
        master = self.master
        if self.next_offset < 0:
            self.next_offset = offset or master.store.get_min_phy_offset()
            log.info("slave %s (brokerId %s) replicates from %d", self.addr, self.slave_id, self.next_offset)
        if offset >= master.store.get_max_phy_offset():
            newly = time.monotonic() - self.caught_up_at > NOT_CATCHUP_S
            self.caught_up_at = time.monotonic()
            if newly:
                master.caught_up(self)
        elif offset >= self.sent_end >= 0:
            master.join(self)
        self.pump()
        master.acked()

    def frame_limit(self) -> int:
        """A frame never spans two epochs."""
        entry = self.master.epoch_at(self.next_offset)
        return 0 if entry is None else min(self.master.batch_size, entry.end_offset - self.next_offset)

    def frame_header(self, offset: int, size: int) -> bytes | None:
        master = self.master
        entry = master.epoch_at(offset) or (master.epochs.entries or [None])[-1]
        if entry is None:
            return None
        return encode_transfer_header(offset, size, entry.epoch, entry.start_offset, master.confirm_offset())

    def pump(self) -> None:
        start = self.next_offset
        super().pump()
        if self.next_offset != start:
            self.sent_end = self.master.store.get_max_phy_offset()


class AutoSwitchMaster(HAMaster):
    connection_type = SlaveConnection

    def __init__(self, store: MessageStore, epochs: EpochFile, reactor: Any, *, batch_size: int = 32 * 1024,
                 heartbeat_ms: int = 5000, housekeeping_ms: int = 20000,
                 on_caught_up: Callable[[], Any] = lambda: None,
                 members: Callable[[], frozenset[int]] = frozenset):
        """``members``: the slaves of the sync state set as the controller last said (the confirm offset
        and an all-ack wait count those); ``on_caught_up``: called when a slave catches up."""
        super().__init__(store, reactor, batch_size=batch_size, heartbeat_ms=heartbeat_ms,
                         housekeeping_ms=housekeeping_ms)
        self.epochs = epochs
        self.on_caught_up = on_caught_up
        self.members = members
        #: joining slaves (brokerId -> when their window ends), counted as members by all-ack waits
        self.joining: dict[int, float] = {}

    def reach(self, slaves: int) -> int:
        """With :data:`ALL_IN_SYNC_STATE_SET`, the offset before which every member (and joining slave)
        holds every byte: the lowest of their acknowledged offsets (-1 while one is not connected)."""
        if slaves != ALL_IN_SYNC_STATE_SET:
            return super().reach(slaves)
        members = self.members()
        if self.joining:
            members = members | self.joining.keys()
        if not members:
            return classic.NO_WAIT
        acks: dict[int, int] = {}
        for c in self.connections:
            if c.slave_id in members and c.ack_offset > acks.get(c.slave_id, -1):
                acks[c.slave_id] = c.ack_offset
        return min(acks.values()) if len(acks) == len(members) else -1

    def join(self, conn: SlaveConnection) -> None:
        """Count ``conn``'s slave in all-ack waits for :data:`JOIN_WINDOW_S` (see the module's docstring)."""
        slave_id = conn.slave_id
        if slave_id is None or slave_id in self.members():
            return
        if slave_id not in self.joining:
            log.info("slave %s (brokerId %d) holds all sent to it (%d); all-ack sends wait for it while it joins",
                     conn.addr, slave_id, conn.ack_offset)
        self.joining[slave_id] = time.monotonic() + JOIN_WINDOW_S

    def leave(self, slave_id: int | None) -> None:
        """End ``slave_id``'s join; the waits it held back are answered if the members hold them."""
        if self.joining.pop(slave_id, None) is not None:
            self.acked()

    def _poll(self) -> None:
        super()._poll()
        if self.joining:
            now, members = time.monotonic(), self.members()
            for slave_id, until in list(self.joining.items()):
                if slave_id in members:
                    del self.joining[slave_id]
                elif until <= now:
                    log.warning("slave brokerId %d joined %.0f s ago and is still not in the sync state set; "
                                "all-ack sends no longer wait for it", slave_id, JOIN_WINDOW_S)
                    self.leave(slave_id)

    def epoch_at(self, offset: int):
        for entry in reversed(self.epochs.entries):
            if entry.start_offset <= offset:
                return entry if offset < entry.end_offset or entry is self.epochs.entries[-1] else None
        return None

    def confirm_offset(self) -> int:
        """What every slave of the sync state set holds (the master's end when it has none connected)."""
        members = self.members()
        acks = [c.ack_offset for c in self.connections if c.slave_id in members and c.ack_offset > 0]
        return min([self.store.get_max_phy_offset(), *acks])

    def caught_up(self, conn: SlaveConnection) -> None:
        log.info("slave %s (brokerId %s) caught up at %d", conn.addr, conn.slave_id, conn.ack_offset)
        self.join(conn)
        self.on_caught_up()

    def in_sync_slaves(self) -> set[int]:
        now = time.monotonic()
        return {c.slave_id for c in self.connections
                if c.slave_id is not None and now - c.caught_up_at <= NOT_CATCHUP_S}
