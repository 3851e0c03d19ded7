"""Sampled request latency per request code: the figures of Apache's ``rocketmq_rpc_latency`` histogram.

Timing every request would put two clock reads and a bucket search on each message. Instead a server
times the first request of one read in :data:`SAMPLE_EVERY_READS`: a read under load carries many
requests, so the cost is a countdown per read, and a request is timed only now and then. The histogram
counts the sampled requests, not all of them; its quantiles are those of the requests, its ``_count``
is not their number (the broker's TPS figures are). A sample runs from the request's dispatch to its
answer being queued: a held pull is timed for as long as it was held (``is_long_polling``).
"""

from __future__ import annotations

import bisect

from ferrymq.wire.codes import RequestCode

#: Time the first request of one read in this many.
SAMPLE_EVERY_READS = 32

#: Apache's bucket bounds for ``rocketmq_rpc_latency``, in milliseconds as Apache records them.
BOUNDS_MS = (1.0, 3.0, 5.0, 7.0, 10.0, 100.0, 1000.0, 2000.0, 3000.0)

#: Requests the broker may hold until messages arrive: their late answers are long polls.
LONG_POLLING_CODES = frozenset({RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE, RequestCode.POP_MESSAGE,
                                RequestCode.NOTIFICATION})


class RequestLatency:
    """Bucket counts per (request code, response code, long poll), filled on the reactor thread."""

    __slots__ = ("countdown", "histograms")

    def __init__(self) -> None:
        #: Reads left until the next one whose first request is timed.
        self.countdown = SAMPLE_EVERY_READS
        #: key -> [count per bucket (the last above every bound)..., sum of milliseconds]
        self.histograms: dict[tuple[int, int, bool], list[float]] = {}

    def observe(self, code: int, response_code: int, late: bool, seconds: float) -> None:
        ms = seconds * 1000.0
        key = (code, response_code, late and code in LONG_POLLING_CODES)
        counts = self.histograms.get(key)
        if counts is None:
            counts = self.histograms[key] = [0.0] * (len(BOUNDS_MS) + 2)
        counts[bisect.bisect_left(BOUNDS_MS, ms)] += 1
        counts[-1] += ms
