"""Warns when the reactor stops turning: while it does, every request on every connection waits.

A tick is due every ``interval``; one that runs more than ``threshold`` late means the reactor thread was
busy or blocked that long (a long callback, a page fault on a page under writeback, dirty-page
throttling, a cyclic GC pass, another thread holding the GIL) -- or that the machine was too busy to
give it a CPU. The two are told apart by where the thread's time went (:mod:`thread_cpu`): time spent
runnable but waiting for a CPU is the machine's load, and a stall that stays under the threshold once
that wait is taken out is logged at INFO as the machine's; the rest are the process's own, logged as
warnings with the time the reactor thread ran, waited for a CPU, and other threads of the process ran,
and how much of it the cyclic GC took. With ``traceback_file``, a watchdog thread (faulthandler) also
writes every thread's stack there while a stall is still going on: where the reactor is stuck, not
just that it was.
"""

from __future__ import annotations

import faulthandler
import gc
import logging
import re
import time
from typing import IO, Any

from ferrymq.server.thread_cpu import CpuTimes, ThreadCpu

log = logging.getLogger("ferrymq.stall")

#: a reactor turn longer than this is reported (seconds); p99 latencies are a few milliseconds
DEFAULT_THRESHOLD = 0.25
#: finds the warnings (the process's own stalls) in a log: group 1 is the stall's length in ms
LOGGED_STALL = re.compile(r"the reactor was stalled for (\d+) ms")
#: ticks per threshold: a stall is measured to within this fraction of the threshold
_TICKS_PER_THRESHOLD = 5


class StallWatch:
    """Call :meth:`start` from the reactor thread: the CPU times sampled are the calling thread's."""

    def __init__(self, clock: Any, threshold: float = DEFAULT_THRESHOLD, traceback_file: IO[str] | None = None,
                 now=time.perf_counter, cpu: Any = None):
        self.clock = clock
        self.threshold = threshold
        self.interval = threshold / _TICKS_PER_THRESHOLD
        self.traceback_file = traceback_file
        self.now = now
        self.cpu = cpu if cpu is not None else ThreadCpu()
        self.stalls = 0  #: the process's own (warned)
        self.stalled_seconds = 0.0  #: how late the ticks of :attr:`stalls` were, summed
        self.machine_stalls = 0  #: late because the machine kept the thread waiting for a CPU (INFO)
        self._due = 0.0
        self._call: Any = None
        self._cpu_at: CpuTimes | None = None
        self._gc_started = 0.0
        self._gc_seconds = 0.0  # cyclic GC time since the last tick

    def start(self) -> None:
        self.cpu.open()
        gc.callbacks.append(self._on_gc)
        self._cpu_at = self.cpu.sample()
        self._schedule(self.now())

    def stop(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self.traceback_file is not None:
            faulthandler.cancel_dump_traceback_later()
        self.cpu.close()

    def _schedule(self, now: float) -> None:
        self._due = now + self.interval
        self._gc_seconds = 0.0
        if self.traceback_file is not None:  # fires only if the next tick is a whole threshold late
            faulthandler.dump_traceback_later(self.interval + self.threshold, file=self.traceback_file)
        self._call = self.clock.callLater(self.interval, self._tick)

    def _tick(self) -> None:
        # The thread may be kept off a CPU between any two lines. CPU times are sampled on both sides of
        # the clock reading, and one reading ends an interval and starts the next: every moment of the
        # reactor's lateness lies inside a sampled interval, so a wait for a CPU is never missed.
        before = self.cpu.sample()
        now = self.now()
        after = self.cpu.sample()
        late = now - self._due
        if late > self.threshold:
            self._report(late, after - self._cpu_at)
        self._cpu_at = before
        self._schedule(now)

    def _report(self, late: float, used: CpuTimes) -> None:
        """``used``: since the previous tick, so over the interval and the stall after it."""
        waited = used.waited or 0.0
        others = max(used.process - used.ran, 0.0)
        if late - waited <= self.threshold:
            self.machine_stalls += 1
            log.info("the reactor was late by %.0f ms because the machine was busy: its thread waited %.0f ms "
                     "for a CPU and ran %.0f ms", late * 1000, waited * 1000, used.ran * 1000)
            return
        self.stalls += 1
        self.stalled_seconds += late
        wait_note = "" if used.waited is None else f", waited {waited * 1000:.0f} ms for a CPU"
        log.warning("the reactor was stalled for %.0f ms (cyclic GC %.0f ms of it): its thread ran %.0f ms%s, "
                    "the process's other threads ran %.0f ms; requests on every connection waited that long%s",
                    late * 1000, self._gc_seconds * 1000, used.ran * 1000, wait_note, others * 1000,
                    "; thread stacks taken during it are in the stall traceback file"
                    if self.traceback_file is not None else "")

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = self.now()
        else:
            self._gc_seconds += self.now() - self._gc_started
