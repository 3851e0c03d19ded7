"""Where a thread's wall time went: on a CPU, or runnable but waiting for one (the machine's load).

A thread that is neither is blocked: in a system call (I/O, a page fault, fsync), on a lock or the GIL,
or stopped. Linux counts the first two per thread in ``/proc/thread-self/schedstat`` (nanoseconds on a
CPU, nanoseconds waiting on a run queue, then the number of times it was put on a CPU) when its
run-queue accounting is on; a kernel built or booted without it leaves the last two at 0, so a
running thread that reads 0 times put on a CPU means the wait is not known. Elsewhere only the CPU
time is known. Reading it is one ``pread`` of an already open file, cheap enough to do a few times a
second.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

_SCHEDSTAT = "/proc/thread-self/schedstat"


@dataclass(frozen=True, slots=True)
class CpuTimes:
    """Seconds, cumulative (or, as a difference of two samples, over an interval)."""

    ran: float  #: the thread on a CPU
    waited: float | None  #: the thread runnable, waiting for a CPU; None where the kernel does not tell
    process: float  #: every thread of the process on a CPU

    def __sub__(self, earlier: CpuTimes) -> CpuTimes:
        waited = None if self.waited is None or earlier.waited is None else self.waited - earlier.waited
        return CpuTimes(self.ran - earlier.ran, waited, self.process - earlier.process)


class ThreadCpu:
    """Samples :class:`CpuTimes` of the thread that called :meth:`open` (the file names that thread)."""

    def __init__(self) -> None:
        self._fd: int | None = None

    def open(self) -> None:
        try:
            self._fd = os.open(_SCHEDSTAT, os.O_RDONLY)
        except OSError:  # not Linux, or /proc not mounted: CPU time only
            self._fd = None
            return
        if int(os.pread(self._fd, 128, 0).split()[2]) == 0:  # no run-queue accounting: CPU time only
            self.close()

    @property
    def counts_waits(self) -> bool:
        """Whether :meth:`sample` tells the time spent waiting for a CPU (after :meth:`open`)."""
        return self._fd is not None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def sample(self) -> CpuTimes:
        process = time.process_time()
        if self._fd is not None:
            ran_ns, waited_ns = os.pread(self._fd, 128, 0).split()[:2]
            return CpuTimes(int(ran_ns) / 1e9, int(waited_ns) / 1e9, process)
        return CpuTimes(time.thread_time(), None, process)
