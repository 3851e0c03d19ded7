"""Apache RocketMQ's classic HA protocol (DefaultHAService), sans I/O: bytes in, offsets and frames out.

Two raw TCP streams, no remoting frames:

* slave -> master: ``int64 maxPhyOffset`` reports, repeated; the master reads them in 8-byte units and
  keeps the last complete one (the first one is where the slave wants the stream to start);
* master -> slave: ``int64 startPhyOffset | int32 bodySize | bodySize bytes`` transfer frames of raw
  commit-log data; a frame with no body is a heartbeat.

The readers never copy a frame body out of the received data: a body is a memoryview of the bytes the
transport handed over (a frame split across reads is joined once).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

REPORT = struct.Struct(">q")
TRANSFER_HEADER = struct.Struct(">qi")
REPORT_SIZE = REPORT.size
TRANSFER_HEADER_SIZE = TRANSFER_HEADER.size


class ProtocolError(ValueError):
    """The peer sent something the protocol does not allow; the connection is to be closed."""


def encode_report(offset: int) -> bytes:
    """A slave's report: the next commit-log byte it needs (its max offset)."""
    return REPORT.pack(offset)


def encode_transfer_header(offset: int, size: int) -> bytes:
    """The header of a transfer frame of ``size`` bytes starting at commit-log ``offset`` (0: heartbeat)."""
    return TRANSFER_HEADER.pack(offset, size)


def first_transfer_offset(requested: int, master_max_offset: int, segment_size: int) -> int:
    """Where the master starts streaming to a slave that asked for ``requested``: there, or for a slave
    with an empty log (0) the start of the master's last commit-log segment, as Apache does."""
    if requested:
        return requested
    return max(0, master_max_offset - master_max_offset % segment_size)


class ReportReader:
    """Master side: the slave's offset reports, read in 8-byte units."""

    __slots__ = ("_partial",)

    def __init__(self) -> None:
        self._partial = b""

    def feed(self, data: bytes) -> int | None:
        """The offset of the last complete report in what was received so far, or None if no report
        was completed by ``data``."""
        if self._partial:
            data = self._partial + data
        whole = len(data) - len(data) % REPORT_SIZE
        self._partial = data[whole:]
        if not whole:
            return None
        offset = REPORT.unpack_from(data, whole - REPORT_SIZE)[0]
        if offset < 0:
            raise ProtocolError(f"slave reported a negative offset {offset}")
        return offset


@dataclass(frozen=True, slots=True)
class Transfer:
    """One transfer frame: ``data`` (possibly empty: a heartbeat) belongs at commit-log ``offset``."""

    offset: int
    data: memoryview

    @property
    def is_heartbeat(self) -> bool:
        return not self.data


class TransferReader:
    """Slave side: the master's transfer frames.

    ``max_body`` bounds a frame body (a master sends at most haTransferBatchSize bytes; a larger size is
    a corrupt stream, not a reason to buffer without limit)."""

    __slots__ = ("_pending", "max_body")

    def __init__(self, max_body: int = 64 << 20) -> None:
        self._pending = b""
        self.max_body = max_body

    def feed(self, data: bytes) -> list[Transfer]:
        """The frames ``data`` completes, in order. Their views stay valid after later feeds."""
        if self._pending:
            data = self._pending + data
        view = memoryview(data)
        end = len(data)
        pos = 0
        out: list[Transfer] = []
        while end - pos >= TRANSFER_HEADER_SIZE:
            offset, size = TRANSFER_HEADER.unpack_from(data, pos)
            if offset < 0 or size < 0 or size > self.max_body:
                raise ProtocolError(f"bad transfer frame header: offset {offset}, body size {size}")
            body_end = pos + TRANSFER_HEADER_SIZE + size
            if body_end > end:
                break
            out.append(Transfer(offset, view[pos + TRANSFER_HEADER_SIZE : body_end]))
            pos = body_end
        self._pending = data[pos:] if pos < end else b""
        return out

    @property
    def buffered(self) -> int:
        """Bytes received of a frame not complete yet."""
        return len(self._pending)
