"""The side-by-side reads FerryMQ's event-loop stall warnings back from its log."""

from __future__ import annotations

import logging

from twisted.internet.task import Clock

from benchmarks.sidebyside.brokers import FerrySide
from compat_tests.processes import Child
from ferrymq.server.stall_watch import StallWatch


def test_stalls_logged_by_the_watch_are_read_back_from_the_broker_log(tmp_path):
    side = FerrySide(tmp_path, "ASYNC_FLUSH")
    assert side.reactor_stalls_ms() is None  # not launched
    log_path = tmp_path / "ferrymq.out"
    side.broker = Child("FerryMQ standalone", [], log_path)
    handler = logging.FileHandler(log_path)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))  # the CLI's format
    logger = logging.getLogger("ferrymq.stall")
    logger.addHandler(handler)
    clock, t = Clock(), [0.0]
    watch = StallWatch(clock, threshold=0.25, now=lambda: t[0])
    try:
        watch.start()
        for late in (0.3, 0.01, 1.234):  # two stalls, one tick on time between them
            t[0] += watch.interval + late
            clock.advance(watch.interval)
    finally:
        watch.stop()
        logger.removeHandler(handler)
        handler.close()
    assert side.reactor_stalls_ms() == [300, 1234]
