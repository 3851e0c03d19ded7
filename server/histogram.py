"""A latency histogram cheap enough to fill from the threads that do the work, read at scrape time.

prometheus_client's own Histogram would do, but its metrics live in a registry for the process; these
are plain counts that :mod:`ferrymq.server.broker.metrics` turns into a family when it is scraped, with
the broker's other figures. Each observation takes a lock (the flush threads may observe at the same
time) and a bisect: well under a microsecond, against the fsync of a millisecond or so being timed.
"""

from __future__ import annotations

import bisect
import threading
from dataclasses import dataclass

#: Upper bounds, seconds: an fsync on an SSD takes 0.1-2 ms; on a disk that is busy writing back, seconds.
FLUSH_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


@dataclass(frozen=True)
class HistogramCounts:
    """A histogram as read at one moment: ``counts[i]`` observations fell at or under ``bounds[i]`` and
    above the bound before it; ``counts[-1]`` are those above the last bound."""

    bounds: tuple[float, ...]
    counts: tuple[int, ...]
    total: float

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[str, int]]:
        """``(le, count at or under it)`` pairs, ``+Inf`` last, as the exposition format wants them."""
        pairs, running = [], 0
        for bound, count in zip((*self.bounds, float("inf")), self.counts):
            running += count
            pairs.append(("+Inf" if bound == float("inf") else repr(bound), running))
        return pairs


class Histogram:
    def __init__(self, bounds: tuple[float, ...] = FLUSH_BUCKETS):
        self.bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._total = 0.0
        self._lock = threading.Lock()

    def observe(self, value: float) -> None:
        i = bisect.bisect_left(self.bounds, value)
        with self._lock:
            self._counts[i] += 1
            self._total += value

    def read(self) -> HistogramCounts:
        with self._lock:
            return HistogramCounts(self.bounds, tuple(self._counts), self._total)
