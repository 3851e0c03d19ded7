"""Apache RocketMQ's AutoSwitch HA protocol (controller mode), sans I/O: bytes in, frames out.

Raw TCP on the master's HA port, like the classic protocol, but every frame starts with the sender's
connection state (Apache's HAConnectionState ordinal: HANDSHAKE 1, TRANSFER 2) and carries epochs.

Slave -> master:

* handshake, once after connecting: ``int32 state=1 | int16 isSyncFromLastFile | int16 isAsyncLearner |
  int64 slaveBrokerId`` (16 bytes);
* reports, after the handshake: ``int32 state=2 | int64 maxPhyOffset`` (12 bytes).

Master -> slave:

* handshake answer: ``int32 state=1 | int32 bodySize | int64 maxPhyOffset | int32 lastEpoch`` (20 bytes),
  then the master's epoch entries, ``int32 epoch | int64 startOffset`` each (12 bytes);
* transfer frames: ``int32 state=2 | int32 bodySize | int64 offset | int32 epoch | int64 epochStartOffset |
  int64 confirmOffset`` (36 bytes), then ``bodySize`` bytes of commit log; no body: a heartbeat.

The slave compares the master's epoch entries with its own (:func:`truncate_point`), cuts its commit log
there, reports where it now ends, and from then on appends what the transfer frames carry, adding an
epoch entry whenever a frame's epoch is new to it.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from ferrymq.wire.bodies import EpochEntry

from ..protocol import ProtocolError

HANDSHAKE, TRANSFER = 1, 2

SLAVE_HANDSHAKE = struct.Struct(">ihhq")
SLAVE_REPORT = struct.Struct(">iq")
MASTER_HANDSHAKE = struct.Struct(">iiqi")
MASTER_TRANSFER = struct.Struct(">iiqiqq")
EPOCH_ENTRY = struct.Struct(">iq")
#: a slave frame's state, read first to know the frame's size
_STATE = struct.Struct(">i")


def encode_slave_handshake(broker_id: int, sync_from_last_file: bool = False, async_learner: bool = False) -> bytes:
    return SLAVE_HANDSHAKE.pack(HANDSHAKE, int(sync_from_last_file), int(async_learner), broker_id)


def encode_slave_report(max_offset: int) -> bytes:
    return SLAVE_REPORT.pack(TRANSFER, max_offset)


def encode_master_handshake(max_offset: int, entries: list[EpochEntry]) -> bytes:
    last_epoch = entries[-1].epoch if entries else 0
    return MASTER_HANDSHAKE.pack(HANDSHAKE, len(entries) * EPOCH_ENTRY.size, max_offset, last_epoch) + b"".join(
        EPOCH_ENTRY.pack(e.epoch, e.start_offset) for e in entries)


def encode_transfer_header(offset: int, size: int, epoch: int, epoch_start: int, confirm_offset: int) -> bytes:
    return MASTER_TRANSFER.pack(TRANSFER, size, offset, epoch, epoch_start, confirm_offset)


@dataclass(frozen=True, slots=True)
class SlaveHandshake:
    broker_id: int
    sync_from_last_file: bool
    async_learner: bool


@dataclass(frozen=True, slots=True)
class SlaveReport:
    max_offset: int


class SlaveFrameReader:
    """Master side: the slave's handshake and reports, in order."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending = b""

    def feed(self, data: bytes) -> list[SlaveHandshake | SlaveReport]:
        data = self._pending + data if self._pending else data
        out: list[SlaveHandshake | SlaveReport] = []
        pos, end = 0, len(data)
        while end - pos >= _STATE.size:
            state = _STATE.unpack_from(data, pos)[0]
            if state == HANDSHAKE:
                if end - pos < SLAVE_HANDSHAKE.size:
                    break
                _s, last_file, learner, broker_id = SLAVE_HANDSHAKE.unpack_from(data, pos)
                out.append(SlaveHandshake(broker_id, last_file == 1, learner == 1))
                pos += SLAVE_HANDSHAKE.size
            elif state == TRANSFER:
                if end - pos < SLAVE_REPORT.size:
                    break
                offset = SLAVE_REPORT.unpack_from(data, pos)[1]
                if offset < 0:
                    raise ProtocolError(f"slave reported a negative offset {offset}")
                out.append(SlaveReport(offset))
                pos += SLAVE_REPORT.size
            else:
                raise ProtocolError(f"slave frame in state {state}, expected {HANDSHAKE} or {TRANSFER}")
        self._pending = data[pos:]
        return out


@dataclass(frozen=True, slots=True)
class MasterHandshake:
    max_offset: int
    last_epoch: int
    entries: list[EpochEntry]


@dataclass(frozen=True, slots=True)
class Transfer:
    """Commit log at ``offset`` written under ``epoch`` (which started at ``epoch_start``); ``data`` empty:
    a heartbeat. ``confirm_offset``: what the master's sync state set holds."""

    offset: int
    epoch: int
    epoch_start: int
    confirm_offset: int
    data: memoryview


class MasterFrameReader:
    """Slave side: the master's handshake answer and transfer frames, in order. ``max_body`` bounds a body
    (a corrupt stream is not a reason to buffer without limit)."""

    __slots__ = ("_pending", "max_body")

    def __init__(self, max_body: int = 64 << 20) -> None:
        self._pending = b""
        self.max_body = max_body

    def feed(self, data: bytes) -> list[MasterHandshake | Transfer]:
        data = self._pending + data if self._pending else data
        view = memoryview(data)
        out: list[MasterHandshake | Transfer] = []
        pos, end = 0, len(data)
        while end - pos >= MASTER_HANDSHAKE.size:
            state, size = struct.unpack_from(">ii", data, pos)
            if size < 0 or size > self.max_body:
                raise ProtocolError(f"master frame with body size {size}")
            if state == HANDSHAKE:
                body_at = pos + MASTER_HANDSHAKE.size
                if end < body_at + size:
                    break
                _s, _n, max_offset, last_epoch = MASTER_HANDSHAKE.unpack_from(data, pos)
                entries = [EpochEntry(*EPOCH_ENTRY.unpack_from(data, at))
                           for at in range(body_at, body_at + size - size % EPOCH_ENTRY.size, EPOCH_ENTRY.size)]
                out.append(MasterHandshake(max_offset, last_epoch, entries))
                pos = body_at + size
            elif state == TRANSFER:
                body_at = pos + MASTER_TRANSFER.size
                if end < body_at + size:
                    break
                _s, _n, offset, epoch, epoch_start, confirm = MASTER_TRANSFER.unpack_from(data, pos)
                out.append(Transfer(offset, epoch, epoch_start, confirm, view[body_at:body_at + size]))
                pos = body_at + size
            else:
                raise ProtocolError(f"master frame in state {state}, expected {HANDSHAKE} or {TRANSFER}")
        self._pending = data[pos:] if pos < end else b""
        return out


def _ended(entries: list[EpochEntry], max_offset: int) -> dict[int, EpochEntry]:
    """Epoch -> entry, each ended by the next one's start and the last by ``max_offset``."""
    ordered = sorted(entries, key=lambda e: e.epoch)
    ends = [e.start_offset for e in ordered[1:]] + [max_offset]
    return {e.epoch: EpochEntry(e.epoch, e.start_offset, end) for e, end in zip(ordered, ends, strict=True)}


def truncate_point(local: list[EpochEntry], local_max: int, master: list[EpochEntry], master_max: int) -> int | None:
    """Where a slave cuts its commit log before replicating: the end of the newest epoch both started at
    the same offset, bounded by both logs' ends (Apache's findConsistentPoint). None: the slave has no
    epochs (a new replica), it keeps its log as it is; -1: the logs share no epoch, there is no safe point."""
    if not local:
        return None
    theirs = _ended(master, master_max)
    for epoch, mine in sorted(_ended(local, local_max).items(), reverse=True):
        peer = theirs.get(epoch)
        if peer is not None and peer.start_offset == mine.start_offset:
            return min(mine.end_offset, peer.end_offset)
    return -1

