"""Warns when the reactor stops turning: while it does, every request on every connection waits.

A tick is due every ``interval``; one that runs more than ``threshold`` late means the reactor thread was
busy or blocked that long (a long callback, a page fault on a page under writeback, dirty-page
throttling, a cyclic GC pass). The warning gives the stall's length and how much of it the cyclic GC
took, so a GC pause can be told from the rest. With ``traceback_file``, a watchdog thread (faulthandler)
also writes every thread's stack there while a stall is still going on: where the reactor is stuck, not
just that it was.
"""

from __future__ import annotations

import faulthandler
import gc
import logging
import re
import time
from typing import IO, Any

log = logging.getLogger("ferrymq.stall")

#: a reactor turn longer than this is reported (seconds); p99 latencies are a few milliseconds
DEFAULT_THRESHOLD = 0.25
#: finds the warnings in a log: group 1 is the stall's length in ms
LOGGED_STALL = re.compile(r"the reactor was stalled for (\d+) ms")
#: ticks per threshold: a stall is measured to within this fraction of the threshold
_TICKS_PER_THRESHOLD = 5


class StallWatch:
    def __init__(self, clock: Any, threshold: float = DEFAULT_THRESHOLD, traceback_file: IO[str] | None = None,
                 now=time.perf_counter):
        self.clock = clock
        self.threshold = threshold
        self.interval = threshold / _TICKS_PER_THRESHOLD
        self.traceback_file = traceback_file
        self.now = now
        self.stalls = 0
        self._due = 0.0
        self._call: Any = None
        self._gc_started = 0.0
        self._gc_seconds = 0.0  # cyclic GC time since the last tick

    def start(self) -> None:
        gc.callbacks.append(self._on_gc)
        self._schedule()

    def stop(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)
        if self.traceback_file is not None:
            faulthandler.cancel_dump_traceback_later()

    def _schedule(self) -> None:
        self._due = self.now() + self.interval
        self._gc_seconds = 0.0
        if self.traceback_file is not None:  # fires only if the next tick is a whole threshold late
            faulthandler.dump_traceback_later(self.interval + self.threshold, file=self.traceback_file)
        self._call = self.clock.callLater(self.interval, self._tick)

    def _tick(self) -> None:
        late = self.now() - self._due
        if late > self.threshold:
            self.stalls += 1
            log.warning("the reactor was stalled for %.0f ms (cyclic GC %.0f ms of it): requests on every "
                        "connection waited that long%s", late * 1000, self._gc_seconds * 1000,
                        "; thread stacks taken during it are in the stall traceback file"
                        if self.traceback_file is not None else "")
        self._schedule()

    def _on_gc(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._gc_started = self.now()
        else:
            self._gc_seconds += self.now() - self._gc_started
