"""Message ids: the broker's offset message id and the client's UNIQ_KEY (shared/protocol/message.md §7).

*Offset message id* = uppercase hex of ``store ip (4|16) | int32 port | int64 commit-log offset``:
32 hex chars for IPv4, 56 for IPv6; readers tell them apart by length.

*UNIQ_KEY* (Java layout) = hex of ``client ip (4|16) | int16 pid | int32 class-loader hash |
int32 ms since the start of the current month (local time) | int16 counter``. Go writes the last six
bytes in lowercase hex; compare UNIQ_KEYs as opaque strings.
"""

from __future__ import annotations

import itertools
import os
import struct
import threading
import time
from datetime import datetime
from typing import NamedTuple

from .message import Host, pack_host, unpack_host

_Q = struct.Struct(">q")


def create_offset_msg_id(store_host: Host, commitlog_offset: int) -> str:
    """Offset message id of the record at ``commitlog_offset`` stored by ``store_host``."""
    return (pack_host(store_host) + _Q.pack(commitlog_offset)).hex().upper()


def offset_msg_id_prefix(store_host: Host) -> str:
    """The host part of every offset message id of ``store_host``: id = prefix + f"{offset:016X}"."""
    return pack_host(store_host).hex().upper()


def parse_offset_msg_id(msg_id: str) -> tuple[Host, int]:
    """(store host, commit-log offset) of an offset message id; ValueError if it is not one."""
    if len(msg_id) not in (32, 56):
        raise ValueError(f"offset message id must be 32 (IPv4) or 56 (IPv6) hex chars, got {len(msg_id)}: {msg_id!r}")
    try:
        raw = bytes.fromhex(msg_id)
    except ValueError:
        raise ValueError(f"offset message id {msg_id!r} is not hex") from None
    ip_len = 4 if len(raw) == 16 else 16
    (port,) = struct.unpack_from(">i", raw, ip_len)
    (offset,) = _Q.unpack_from(raw, ip_len + 4)
    return unpack_host(raw[:ip_len], port), offset


def _month_start_ms(now_ms: int) -> tuple[int, int]:
    """(start of this month, start of next month) in ms, local time, as Java's Calendar computes."""
    d = datetime.fromtimestamp(now_ms / 1000)
    start = d.replace(day=1, hour=0, minute=0, second=0, microsecond=0)
    nxt = start.replace(year=start.year + 1, month=1) if start.month == 12 else start.replace(month=start.month + 1)
    return int(start.timestamp() * 1000), int(nxt.timestamp() * 1000)


class UniqKeyGenerator:
    """Produces UNIQ_KEYs in the Java client's layout (thread-safe)."""

    def __init__(self, ip: bytes = b"\x7f\x00\x00\x01", pid: int | None = None, class_hash: int | None = None):
        pid = (pid if pid is not None else os.getpid()) & 0xFFFF
        class_hash = (class_hash if class_hash is not None else id(self)) & 0xFFFFFFFF
        self._prefix = (ip + struct.pack(">HI", pid, class_hash)).hex().upper()
        self._counter = itertools.count()
        self._lock = threading.Lock()
        self._start, self._next = _month_start_ms(int(time.time() * 1000))

    def next(self, now_ms: int | None = None) -> str:
        now = now_ms if now_ms is not None else int(time.time() * 1000)
        with self._lock:
            if now >= self._next or now < self._start:
                self._start, self._next = _month_start_ms(now)
            span = (now - self._start) & 0xFFFFFFFF
            count = next(self._counter) & 0xFFFF
        return self._prefix + struct.pack(">IH", span, count).hex().upper()


class UniqKeyInfo(NamedTuple):
    ip: str
    pid: int
    class_hash: int
    time_ms: int  #: approximate creation time (month inferred as Java does)
    counter: int


def parse_uniq_key(key: str, now_ms: int | None = None) -> UniqKeyInfo:
    """Fields of a UNIQ_KEY. The month is not stored: like Java, assume this month unless that puts
    the time in the future, then the previous month."""
    raw = bytes.fromhex(key)
    if len(raw) not in (16, 28):
        raise ValueError(f"UNIQ_KEY must be 32 or 56 hex chars, got {len(key)}: {key!r}")
    ip_len = len(raw) - 12
    pid, class_hash, span, counter = struct.unpack_from(">HIIH", raw, ip_len)
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    start, _ = _month_start_ms(now)
    if start + span >= now:
        prev_day = datetime.fromtimestamp(start / 1000 - 86400)
        start, _ = _month_start_ms(int(prev_day.timestamp() * 1000))
    return UniqKeyInfo(unpack_host(raw[:ip_len], 0)[0], pid, class_hash, start + span, counter)
