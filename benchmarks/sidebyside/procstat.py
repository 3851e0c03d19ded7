"""Broker footprint from the operating system: RSS and CPU from /proc and bytes the store really holds on disk.

RSS is ``VmRSS`` of the broker process plus any processes it started (the JVM alone for Apache; FerryMQ's
standalone process, which also hosts its name server, and any workers it forks). It counts the mapped
commitlog pages the broker has touched, as the kernel does.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from .parse import status_kib


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """``field`` of /proc/<pid>/status in MiB: VmRSS, or its parts RssAnon (heap) and RssFile (mapped files)."""
    with open(f"/proc/{pid}/status") as f:
        return status_kib(f.read(), field) / 1024


def descendants(pid: int) -> list[int]:
    """Every live process below ``pid`` (from the PPid fields in /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])  # the command name may hold spaces and parentheses
        children.setdefault(ppid, []).append(int(entry))
    found, todo = [], [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def tree_rss_mib(pid: int, field: str = "VmRSS") -> float:
    """RSS of ``pid`` and its descendants (a descendant that exits meanwhile counts as 0)."""
    total = rss_mib(pid, field)
    for child in descendants(pid):
        try:
            total += rss_mib(child, field)
        except (OSError, ValueError):
            pass
    return total


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of /proc/<pid>/stat (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_s(pid: int) -> float:
    """CPU seconds of ``pid`` and its live descendants: what the broker spends, in a figure other work on
    the machine disturbs less than a rate."""
    total = cpu_s(pid)
    for child in descendants(pid):
        try:
            total += cpu_s(child)
        except (OSError, ValueError, IndexError):
            pass
    return total


def allocated_mib(path: Path) -> float:
    """Disk blocks in use under ``path`` (mapped files are sparse, so their length says little)."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.stat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return total / (1024 * 1024)


class PeakRss:
    """Samples a process's RSS on a thread while in a ``with`` block; ``peak`` is the largest seen.

    ``peak_anon`` is the largest anonymous part (heap, stacks): the rest are mapped store pages, which the
    kernel can drop, so the two tell a heavy heap from a busy page cache.
    """

    def __init__(self, pid: int, interval_s: float = 0.5):
        self.pid = pid
        self.interval_s = interval_s
        self.peak = 0.0
        self.peak_anon = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"rss-{pid}", daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, tree_rss_mib(self.pid))
                self.peak_anon = max(self.peak_anon, tree_rss_mib(self.pid, "RssAnon"))
            except (OSError, ValueError):
                return
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "PeakRss":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
