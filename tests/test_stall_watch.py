"""StallWatch: a reactor turn longer than the threshold is logged with its length and its GC share."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

from twisted.internet.task import Clock

from ferrymq.server.stall_watch import StallWatch

ROOT = Path(__file__).resolve().parents[1]


class FakeTime:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _watch(threshold: float = 0.25) -> tuple[StallWatch, Clock, FakeTime]:
    clock, now = Clock(), FakeTime()
    watch = StallWatch(clock, threshold=threshold, now=now)
    watch.start()
    return watch, clock, now


def _tick_at(clock: Clock, now: FakeTime, t: float) -> None:
    """The reactor gets to the pending tick at time ``t``."""
    now.t = t
    clock.advance(clock.getDelayedCalls()[0].getTime() - clock.seconds())


def test_ticks_on_time_report_nothing(caplog):
    watch, clock, now = _watch()
    with caplog.at_level(logging.WARNING, "ferrymq.stall"):
        for i in range(1, 20):
            _tick_at(clock, now, i * watch.interval + 0.01)  # a little late, well under the threshold
    watch.stop()
    assert watch.stalls == 0
    assert not caplog.records
    assert not clock.getDelayedCalls()


def test_a_late_tick_is_reported_with_its_length_and_gc_share(caplog):
    watch, clock, now = _watch()
    now.t = 0.01
    watch._on_gc("start", {})
    now.t = 0.31  # a 300 ms collection inside the stall
    watch._on_gc("stop", {})
    with caplog.at_level(logging.WARNING, "ferrymq.stall"):
        _tick_at(clock, now, watch.interval + 0.4)
        _tick_at(clock, now, 2 * watch.interval + 0.4 + 0.01)  # back on time: nothing more
    watch.stop()
    assert watch.stalls == 1
    [record] = caplog.records
    assert "stalled for 400 ms (cyclic GC 300 ms of it)" in record.getMessage()


def test_gc_time_counts_only_towards_the_tick_it_happened_before(caplog):
    watch, clock, now = _watch()
    watch._on_gc("start", {})
    now.t = 0.2
    watch._on_gc("stop", {})
    _tick_at(clock, now, 0.21)  # 160 ms late: under the threshold, nothing reported
    with caplog.at_level(logging.WARNING, "ferrymq.stall"):
        _tick_at(clock, now, 0.21 + watch.interval + 0.3)
    watch.stop()
    [record] = caplog.records
    assert "stalled for 300 ms (cyclic GC 0 ms of it)" in record.getMessage()


def test_a_real_stall_is_logged_and_its_stack_written_while_stuck(tmp_path):
    """A callback that blocks the real reactor for 0.8 s: the warning names ~800 ms and the traceback file
    holds the blocking function's frame, taken while it was still running."""
    stacks = tmp_path / "stalls.txt"
    script = textwrap.dedent(f"""
        import logging, sys, time
        from twisted.internet import reactor
        from ferrymq.server.stall_watch import StallWatch
        logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
        def a_blocking_callback():
            time.sleep(0.8)
        watch = StallWatch(reactor, threshold=0.2, traceback_file=open({str(stacks)!r}, "w"))
        reactor.callWhenRunning(watch.start)
        reactor.callLater(0.3, a_blocking_callback)
        reactor.callLater(1.5, reactor.stop)
        reactor.run()
        watch.stop()
        print("stalls", watch.stalls)
    """)
    proc = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert "stalls 1" in proc.stdout, proc.stdout + proc.stderr
    ms = int(proc.stderr.split("stalled for ")[1].split(" ms")[0])
    assert 600 <= ms <= 1500, proc.stderr
    assert "a_blocking_callback" in stacks.read_text()


def test_stop_removes_the_gc_callback():
    import gc

    watch, _clock, _now = _watch()
    assert watch._on_gc in gc.callbacks
    watch.stop()
    assert watch._on_gc not in gc.callbacks
