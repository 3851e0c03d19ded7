"""StallWatch: a reactor turn longer than the threshold is logged with its length, its GC share and where
the reactor thread's time went; a stall the machine's load caused is told from the process's own."""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from twisted.internet.task import Clock

from ferrymq.server.stall_watch import LOGGED_STALL, StallWatch
from ferrymq.server.thread_cpu import CpuTimes, ThreadCpu

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
    assert abs(watch.stalled_seconds - 0.4) < 1e-9  # what /metrics adds up
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


class FakeCpu:
    """CPU times the test sets: ``times`` is what the next sample returns."""

    def __init__(self):
        self.times = CpuTimes(0.0, 0.0, 0.0)

    def open(self):
        pass

    def close(self):
        pass

    def sample(self) -> CpuTimes:
        return self.times


def test_a_stall_spent_waiting_for_a_cpu_is_the_machines_not_a_warning(caplog):
    clock, now, cpu = Clock(), FakeTime(), FakeCpu()
    watch = StallWatch(clock, threshold=0.25, now=now, cpu=cpu)
    watch.start()
    cpu.times = CpuTimes(ran=0.002, waited=0.45, process=0.003)  # runnable, no CPU given, for 450 of 500 ms
    with caplog.at_level(logging.INFO, "ferrymq.stall"):
        _tick_at(clock, now, watch.interval + 0.5)
        cpu.times = CpuTimes(ran=0.302, waited=0.5, process=0.303)  # then 300 ms of its own work, 50 ms waiting
        _tick_at(clock, now, 2 * watch.interval + 0.5 + 0.35)
    watch.stop()
    assert (watch.stalls, watch.machine_stalls) == (1, 1)
    busy, own = caplog.records
    assert busy.levelno == logging.INFO and not LOGGED_STALL.search(busy.getMessage())
    assert busy.getMessage() == ("the reactor was late by 500 ms because the machine was busy: its thread waited "
                                 "450 ms for a CPU and ran 2 ms")
    assert own.levelno == logging.WARNING
    assert "stalled for 350 ms (cyclic GC 0 ms of it): its thread ran 300 ms, waited 50 ms for a CPU, the " \
           "process's other threads ran 0 ms" in own.getMessage()


def _watched(body: str, *, threshold: float = 0.2, seconds: float = 1.5) -> str:
    """A script running a reactor with a StallWatch; ``body`` sets up the process and schedules what happens
    in the reactor thread. It prints "running" once the watch runs, and its counts at the end."""
    return textwrap.dedent(f"""
        import logging, os, sys, time
        from twisted.internet import reactor
        from ferrymq.server.stall_watch import StallWatch
        logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(levelname)s %(message)s")
        watch = StallWatch(reactor, threshold={threshold})
        reactor.callWhenRunning(watch.start)
        reactor.callWhenRunning(lambda: print("running", flush=True))
    """) + textwrap.dedent(body) + textwrap.dedent(f"""
        reactor.callLater({seconds}, reactor.stop)
        reactor.run()
        watch.stop()
        print("stalls", watch.stalls, "machine", watch.machine_stalls)
    """)


def _run_watched(body: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", _watched(body, **kwargs)], check=False, cwd=ROOT, capture_output=True,
                          text=True, timeout=30)


def test_a_busy_loop_in_the_reactor_thread_is_the_process_own_stall():
    proc = _run_watched("""
        def a_busy_callback():
            end = time.thread_time() + 0.6  # 600 ms of CPU, however long the machine takes to give it
            while time.thread_time() < end:
                pass
        reactor.callLater(0.3, a_busy_callback)
    """, seconds=2.0)
    assert proc.returncode == 0, proc.stderr
    # the busy loop is the one stall of the process's own; a busy machine may add lateness of its own
    assert re.search(r"^stalls 1 machine \d+$", proc.stdout, re.M), proc.stdout + proc.stderr
    assert proc.stderr.count("WARNING the reactor was stalled") == 1, proc.stderr
    ran = int(proc.stderr.split("its thread ran ")[1].split(" ms")[0])
    assert ran >= 600, proc.stderr


def test_a_thread_blocked_without_cpu_is_still_the_process_own_stall():
    """Sleeping (as in a blocking system call) uses no CPU, but nothing kept the thread off a CPU either."""
    proc = _run_watched("reactor.callLater(0.3, time.sleep, 0.6)")
    assert "stalls 1 machine 0" in proc.stdout, proc.stdout + proc.stderr
    assert int(proc.stderr.split("its thread ran ")[1].split(" ms")[0]) < 100, proc.stderr


def _kernel_counts_run_queue_waits() -> bool:
    cpu = ThreadCpu()
    cpu.open()
    counts = cpu.counts_waits
    cpu.close()
    return counts


@pytest.mark.skipif(not _kernel_counts_run_queue_waits(),
                    reason="this kernel does not count a thread's run-queue wait (/proc/thread-self/schedstat)")
def test_a_thread_kept_waiting_for_a_cpu_is_the_machines_stall():
    """The watched process shares one CPU, at the lowest priority (SCHED_IDLE), with three busy processes:
    the reactor thread is runnable but not run, as on an overloaded machine."""
    cpu = min(os.sched_getaffinity(0))
    script = _watched(f"""
        os.sched_setaffinity(0, {{{cpu}}})
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        from ferrymq.server.thread_cpu import ThreadCpu
        total = ThreadCpu()
        total.open()
        at_start = total.sample()
        reactor.addSystemEventTrigger("after", "shutdown",
                                      lambda: print("waited", round((total.sample() - at_start).waited * 1000)))
    """, threshold=0.1, seconds=2.5)
    watched = subprocess.Popen([sys.executable, "-c", script], cwd=ROOT, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True)
    assert watched.stdout.readline().strip() == "running"
    hog = f"import os, time\nos.sched_setaffinity(0, {{{cpu}}})\nend = time.monotonic() + 1.0\nwhile time.monotonic() < end: pass"
    hogs = [subprocess.Popen([sys.executable, "-c", hog]) for _ in range(3)]
    out, err = watched.communicate(timeout=30)
    for h in hogs:
        h.wait(timeout=10)
    assert watched.returncode == 0, err
    waited = int(out.split("waited ")[1].split()[0])
    if waited < 500:  # the hogs hold the CPU for a second: the kernel saw the thread wait, or did not count it
        pytest.skip(f"the kernel counted {waited} ms of run-queue wait for a thread kept off its CPU for about "
                    f"a second (SCHED_IDLE waits are not accounted here): {err.strip()}")
    stalls, machine = (int(n) for n in out.split("stalls ")[1].split(" machine "))
    assert stalls == 0 and machine >= 1, out + err
    assert "because the machine was busy" in err and "WARNING" not in err, err


def test_thread_cpu_counts_this_threads_cpu_time():
    cpu = ThreadCpu()
    cpu.open()
    try:
        before = cpu.sample()
        end = time.thread_time() + 0.05
        while time.thread_time() < end:
            pass
        used = cpu.sample() - before
    finally:
        cpu.close()
    assert 0.04 <= used.ran <= 1.0 and used.process >= used.ran - 0.01
    assert used.waited is None or used.waited >= 0


def test_stop_removes_the_gc_callback():
    import gc

    watch, _clock, _now = _watch()
    assert watch._on_gc in gc.callbacks
    watch.stop()
    assert watch._on_gc not in gc.callbacks
