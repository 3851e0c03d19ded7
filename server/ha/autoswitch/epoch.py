"""The epoch file: which master epoch wrote which stretch of the commit log (Apache's EpochFileCache).

Each time a broker becomes master it appends ``(epoch, start offset)``: the commit log from that offset
on was written under that epoch, until the next entry's start. Brokers compare these lists to find the
last offset they agree on (:func:`~.protocol.truncate_point`), and a slave truncates what lies past it.

The file is Apache's checkpoint format, so a store moves between FerryMQ and Apache brokers::

    <number of entries>
    <crc32 of the entry lines, & 0x7fffffff; 0: not checked>
    <epoch>-<startOffset>
    ...

It is replaced whole: written beside, the old one kept as ``<file>.bak``, read when the file is missing
or damaged.
"""

from __future__ import annotations

import itertools
import os
import zlib
from pathlib import Path

from ferrymq.wire.bodies import EpochEntry
from ferrymq.wire.bodies.controller import OPEN_END


class EpochFileError(ValueError):
    """The file does not hold a valid epoch list."""


def _parse(text: str) -> list[EpochEntry]:
    lines = text.split("\n")
    try:
        count, crc = int(lines[0]), int(lines[1])
    except (IndexError, ValueError):
        raise EpochFileError("no entry count and checksum lines") from None
    body = [line for line in lines[2:] if line]
    entries = []
    for line in body:
        epoch, sep, start = line.partition("-")
        if sep and epoch.isdigit() and start.isdigit():
            entries.append(EpochEntry(int(epoch), int(start)))
    if len(entries) != count:
        raise EpochFileError(f"expected {count} entries, found {len(entries)}")
    if crc and crc != _crc("".join(f"{line}\n" for line in body)):
        raise EpochFileError("checksum does not match the entries")
    return entries


def _crc(text: str) -> int:
    return zlib.crc32(text.encode()) & 0x7FFFFFFF


class EpochFile:
    """The entries in epoch order, each ended by the next one's start (the last is open)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.entries: list[EpochEntry] = []

    def load(self) -> EpochFile:
        """Read the file (or its backup); none at all: no entries."""
        for candidate in (self.path, self.path.with_name(self.path.name + ".bak")):
            if not candidate.exists():
                continue
            try:
                entries = _parse(candidate.read_text())
            except (EpochFileError, OSError):
                continue
            if entries:
                self._set(entries)
                return self
        self.entries = []
        return self

    def _set(self, entries: list[EpochEntry]) -> None:
        entries = sorted(entries, key=lambda e: e.epoch)
        for prev, nxt in itertools.pairwise(entries):
            prev.end_offset = nxt.start_offset
        if entries:
            entries[-1].end_offset = OPEN_END
        self.entries = entries

    @property
    def last_epoch(self) -> int:
        return self.entries[-1].epoch if self.entries else 0

    def append(self, epoch: int, start_offset: int) -> None:
        """Start ``epoch`` at ``start_offset``; entries of the same or a later epoch are dropped first (a
        master elected again at an epoch it had)."""
        kept = [e for e in self.entries if e.epoch < epoch]
        if kept and kept[-1].start_offset > start_offset:
            raise ValueError(f"epoch {epoch} cannot start at {start_offset}, before epoch {kept[-1].epoch} "
                             f"({kept[-1].start_offset})")
        self._set([*kept, EpochEntry(epoch, start_offset)])
        self._write()

    def truncate_from_offset(self, offset: int) -> None:
        """Forget the epochs that start at or after ``offset`` (the log is cut there)."""
        self._set([e for e in self.entries if e.start_offset < offset])
        self._write()

    def _write(self) -> None:
        lines = "".join(f"{e.epoch}-{e.start_offset}\n" for e in self.entries)
        text = f"{len(self.entries)}\n{_crc(lines)}\n{lines}"
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(self.path.name + ".tmp")
        with open(tmp, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        if self.path.exists():
            os.replace(self.path, self.path.with_name(self.path.name + ".bak"))
        os.replace(tmp, self.path)
