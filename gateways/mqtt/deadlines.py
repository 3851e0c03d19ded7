"""One reactor timer for the deadlines of every connection (keep-alive, CONNECT timeout).

A timer per connection costs a ``DelayedCall`` and a reactor wake-up each time one fires, and a
connection's fires once a keep-alive period even while its device pings on time (it comes due early,
finds the later deadline and is set again): 10,000 idle devices with a 30 s keep-alive woke the reactor
about 300 times a second for nothing. Here deadlines wait in a heap and one timer, set for the earliest
of them rounded up to :data:`RESOLUTION`, serves every deadline due by then: a connection is checked at
most that long after its deadline, and the reactor wakes at most once per :data:`RESOLUTION`.

Filing is lazy, as the per-connection timer was: a deadline that moved later (a packet arrived) keeps
its entry, and when that entry comes due the owner is asked again (:meth:`Deadlines.file` from its
callback files the later one). A packet costs nothing here.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import time
from collections.abc import Callable, Hashable
from typing import Any

log = logging.getLogger("ferrymq.gateway.mqtt")

#: seconds: deadlines are served on this grid (a connection closes at most this long after its deadline)
RESOLUTION = 0.1


class Deadlines:
    """Calls ``due(key)`` once the deadline filed for ``key`` has passed (``now`` is its clock, the
    reactor's ``callLater`` measures the delays)."""

    def __init__(self, clock: Any, due: Callable[[Hashable], None], *, now: Callable[[], float] = time.time,
                 resolution: float = RESOLUTION):
        self.clock = clock
        self.due = due
        self.now = now
        self.resolution = resolution
        #: (deadline, tie-breaker, key); an entry whose deadline is no longer ``_filed[key]`` is stale
        self._heap: list[tuple[float, int, Hashable]] = []
        self._filed: dict[Hashable, float] = {}
        self._order = itertools.count()
        self._call = None
        self._wake_at = math.inf

    def __len__(self) -> int:
        return len(self._filed)

    def file(self, key: Hashable, deadline: float) -> None:
        """Call ``due(key)`` after ``deadline``, unless an earlier deadline is filed for ``key`` already
        (its call comes first; the callback files again if it is not due yet)."""
        filed = self._filed.get(key)
        if filed is not None and filed <= deadline:
            return
        self._filed[key] = deadline
        heapq.heappush(self._heap, (deadline, next(self._order), key))
        if deadline < self._wake_at:
            self._schedule(deadline)

    def forget(self, key: Hashable) -> None:
        """No call for ``key`` (its entry stays in the heap until its time, then is dropped)."""
        self._filed.pop(key, None)

    def stop(self) -> None:
        if self._call is not None and self._call.active():
            self._call.cancel()
        self._call, self._wake_at = None, math.inf

    def _schedule(self, deadline: float) -> None:
        wake_at = math.ceil(deadline / self.resolution) * self.resolution
        if wake_at >= self._wake_at:
            return
        delay = max(0.0, wake_at - self.now())
        if self._call is not None and self._call.active():
            self._call.reset(delay)
        else:
            self._call = self.clock.callLater(delay, self._fire)
        self._wake_at = wake_at

    def _fire(self) -> None:
        self._call, self._wake_at = None, math.inf
        heap, filed = self._heap, self._filed
        now = self.now()
        while heap and heap[0][0] <= now:
            deadline, _, key = heapq.heappop(heap)
            if filed.get(key) != deadline:
                continue  # forgotten, or filed again for an earlier deadline served before
            del filed[key]
            try:
                self.due(key)
            except Exception:  # one connection's failure must not stop the others' deadlines
                log.exception("MQTT connection deadline failed")
        while heap and filed.get(heap[0][2]) != heap[0][0]:
            heapq.heappop(heap)
        if heap:
            self._schedule(heap[0][0])


__all__ = ["RESOLUTION", "Deadlines"]
