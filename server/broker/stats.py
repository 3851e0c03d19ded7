"""Put/get counters and rates for GET_BROKER_RUNTIME_INFO (what mqadmin clusterList/brokerStatus show)."""

from __future__ import annotations

import shutil
import time
from collections import deque
from typing import Callable, NamedTuple

#: The three TPS windows mqadmin prints, seconds.
WINDOWS = (10, 60, 600)


class RateCounter:
    """A monotonically growing total with one-second samples, for ``"tps10 tps60 tps600"`` strings."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self.total = 0
        self._clock = clock
        self._samples: deque[tuple[float, int]] = deque(maxlen=WINDOWS[-1] + 2)

    def add(self, n: int = 1) -> None:
        self.total += n

    def sample(self) -> None:
        """Record the total now (the broker calls this every second)."""
        self._samples.append((self._clock(), self.total))

    def tps(self, window: int) -> float:
        now, total = self._clock(), self.total
        base = None
        for ts, value in self._samples:
            if now - ts <= window:
                base = (ts, value)
                break
        if base is None or now - base[0] <= 0:
            return 0.0
        return (total - base[1]) / (now - base[0])

    def tps_text(self) -> str:
        return " ".join(f"{self.tps(w):.2f}" for w in WINDOWS)


class BrokerStats:
    """Broker-wide counters, plus the totals at this morning's and yesterday's midnight."""

    def __init__(self, clock: Callable[[], float] = time.time):
        self._clock = clock
        self.boot_ms = int(clock() * 1000)
        self.put = RateCounter(clock)
        #: messages a slave stored from its master's stream: its put rate (putTps), not its sends
        #: (msgPutTotal*), as on Apache's slave
        self.replicated = RateCounter(clock)
        self.get_found = RateCounter(clock)
        self.get_miss = RateCounter(clock)
        self.get_transferred = RateCounter(clock)
        #: timers taken into the wheel / fired (totals copied from the timer service before each sample)
        self.timer_enqueue = RateCounter(clock)
        self.timer_dequeue = RateCounter(clock)
        self.put_today_morning = 0
        self.put_yesterday_morning = 0
        self.get_today_morning = 0
        self.get_yesterday_morning = 0
        self._day = time.localtime(clock()).tm_yday

    def sample(self) -> None:
        day = time.localtime(self._clock()).tm_yday
        if day != self._day:
            self._day = day
            self.put_yesterday_morning, self.put_today_morning = self.put_today_morning, self.put.total
            self.get_yesterday_morning, self.get_today_morning = self.get_today_morning, self.get_transferred.total
        for counter in (self.put, self.replicated, self.get_found, self.get_miss, self.get_transferred, self.timer_enqueue,
                        self.timer_dequeue):
            counter.sample()


class DiskSpace(NamedTuple):
    total: int
    used: int
    #: what an unprivileged writer can still use (blocks reserved for root are in neither figure)
    free: int

    @property
    def used_ratio(self) -> float:
        """What Apache reports as commitLogDiskRatio: the share of the disk in use (by anything)."""
        return self.used / self.total if self.total else 0.0


def disk_space(path: str) -> DiskSpace:
    """The space of the file system holding ``path``; zeros when it cannot be read."""
    try:
        usage = shutil.disk_usage(path)
    except OSError:
        return DiskSpace(0, 0, 0)
    return DiskSpace(usage.total, usage.used, usage.free)
