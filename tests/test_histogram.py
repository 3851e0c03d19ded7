"""The histogram the flush threads fill and /metrics reads."""

from __future__ import annotations

import threading

from ferrymq.server.histogram import Histogram


def test_each_value_counts_in_the_first_bucket_whose_bound_holds_it():
    h = Histogram((0.001, 0.01, 0.1))
    for value in (0.0005, 0.001, 0.002, 0.05, 3.0):
        h.observe(value)
    counts = h.read()
    assert counts.counts == (2, 1, 1, 1)
    assert counts.count == 5 and abs(counts.total - 3.0535) < 1e-9
    assert counts.cumulative() == [("0.001", 2), ("0.01", 3), ("0.1", 4), ("+Inf", 5)]


def test_observations_from_several_threads_are_all_counted():
    h = Histogram((0.5,))

    def observe() -> None:
        for _ in range(20_000):
            h.observe(0.25)

    threads = [threading.Thread(target=observe) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert h.read().counts == (80_000, 0)
