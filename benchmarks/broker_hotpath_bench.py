"""FerryMQ alone under the side-by-side harness's Java load, optionally profiled with py-spy.

The side-by-side run (``python -m benchmarks.broker_bench``) measures both brokers through every phase; this
one repeats only the phases the broker's hot paths decide (sync send 1 KiB x 32 threads, async send, draining
a backlog) against one ``ferrymq standalone`` (ASYNC_FLUSH, temp store, loopback), so a change to the broker
can be judged in about a minute. It reuses the harness's launch code and load tools (Apache's Producer and
the harness's LoadProbe on the official Java client), and prints each figure beside the load average, since
other jobs share this machine's two cores.

    .venv/bin/python -m benchmarks.broker_hotpath_bench [--seconds 12] [--backlog 50000] [--profile DIR]

``--profile DIR`` attaches ``py-spy record`` (``pip install py-spy``) to the broker for each phase and writes
DIR/<phase>.svg (flame graph) and DIR/<phase>.txt (top functions by own samples).
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.sidebyside import javatools, parse
from benchmarks.sidebyside.brokers import FerrySide
from compat_tests.processes import Child

#: seconds at the end of a send phase its rate and the broker's CPU are read over (Apache's Producer
#: tool reports each second; the first seconds are warm-up)
MEASURED_S = 9


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds the broker has used (the figure that other jobs on the box disturb least)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _load() -> str:
    return "{:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


class Profiler:
    """py-spy attached to the broker for one phase; raw collapsed stacks are summarised into a top list."""

    def __init__(self, out: Path | None, pid: int, native: bool = False):
        self.out, self.pid, self.proc, self.native = out, pid, None, native

    def start(self, phase: str, seconds: float) -> None:
        if self.out is None:
            return
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        self.phase = phase
        self.raw = self.out / f"{phase}.collapsed"
        self.proc = subprocess.Popen(
            [spy, "record", "--pid", str(self.pid), "--duration", str(int(seconds)), "--rate", "200",
             "--format", "raw", "--output", str(self.raw)] + (["--native"] if self.native else ["--nonblocking"]),
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def stop(self) -> None:
        if self.proc is None:
            return
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.terminate()
            self.proc.wait()
        self.proc = None
        if self.raw.exists():
            (self.out / f"{self.phase}.txt").write_text(top_functions(self.raw.read_text()))

def top_functions(collapsed: str, n: int = 30) -> str:
    """Own and cumulative sample shares per function from py-spy's collapsed-stack output."""
    own: collections.Counter[str] = collections.Counter()
    cum: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        frames = stack.split(";")[1:]  # first frame is the process/thread name
        k = int(count)
        total += k
        if frames:
            own[frames[-1]] += k
        for frame in set(frames):
            cum[frame] += k
    if not total:
        return "no samples\n"
    lines = [f"{total} samples", "own%   cum%   function"]
    for frame, k in own.most_common(n):
        lines.append(f"{100 * k / total:5.1f}  {100 * cum[frame] / total:5.1f}  {frame}")
    lines.append("\ncumulative:")
    for frame, k in cum.most_common(n):
        lines.append(f"{100 * k / total:5.1f}  {frame}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="broker_hotpath_bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--seconds", type=float, default=12.0,
                   help=f"seconds per send phase (Producer reports over the last {MEASURED_S} s)")
    p.add_argument("--backlog", type=int, default=50000, help="messages filled then drained")
    p.add_argument("--threads", type=int, default=32, help="sync producer threads")
    p.add_argument("--inflight", type=int, default=1024, help="async sends in flight")
    p.add_argument("--phases", default="sync,async,latency,drain",
                   help="comma-separated subset of sync,batch,async,latency,drain")
    p.add_argument("--batch", type=int, default=16, help="messages per batch of the batch phase (BatchProducer)")
    p.add_argument("--flush", default="ASYNC_FLUSH", choices=("ASYNC_FLUSH", "SYNC_FLUSH"), help="the broker's flushDiskType")
    p.add_argument("--rate", type=int, default=1000, help="offered load of the latency phase, msg/s")
    p.add_argument("--profile", type=Path, help="write py-spy profiles of each phase here")
    p.add_argument("--native", action="store_true",
                   help="profile native frames too (py-spy --native, pauses the broker per sample): shows time "
                        "inside the compiled hot-path modules, which plain sampling cannot see into")
    p.add_argument("--segment-mib", type=int,
                   help="commit-log segment size (mappedFileSizeCommitLog) in MiB: a few tens put the writer in "
                        "segments written full of zeros ahead of it, as in the side-by-side's timed phases "
                        "(which follow a 1 GiB backlog); by default it writes the fresh store's first segment")
    p.add_argument("--http", choices=("on", "off", "BROKER", "OWN_THREAD"), default="on",
                   help="the HTTP gateway: on (the default, idle on a port of its own, served where httpEventLoop "
                        "says by default), BROKER or OWN_THREAD (on, with that httpEventLoop: the reactor is the "
                        "asyncio one on uvloop with BROKER, epoll's with OWN_THREAD) or off (httpListenPort=0)")
    p.add_argument("--grpc", choices=("on", "off", "BROKER", "OWN_THREAD"), default="on",
                   help="the gRPC service: on (the default, idle, served where grpcEventLoop says by default), "
                        "BROKER or OWN_THREAD (on, with that grpcEventLoop; the reactor is the asyncio one on uvloop "
                        "when it or the HTTP gateway is BROKER) or off (grpcListenPort=0)")
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    args = p.parse_args(argv)
    if args.seconds < MEASURED_S + 1:
        p.error(f"--seconds must be at least {MEASURED_S + 1}: a send phase's rate is read over its last {MEASURED_S} s")
    phases = set(args.phases.split(","))
    tools = javatools.load_tools()
    home = Path(tempfile.mkdtemp(prefix="ferrymq-hotpath-"))
    overrides: dict[str, object] = ({"httpListenPort": 0} if args.http == "off" else
                                    {"httpEventLoop": args.http} if args.http in ("BROKER", "OWN_THREAD") else {})
    overrides.update({"grpcListenPort": 0} if args.grpc == "off" else
                     {"grpcEventLoop": args.grpc} if args.grpc in ("BROKER", "OWN_THREAD") else {})
    if args.segment_mib:
        overrides["mappedFileSizeCommitLog"] = args.segment_mib << 20
    side = FerrySide(home / "ferrymq", args.flush, overrides)
    results: dict[str, object] = {}
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    try:
        side.launch()
        ns = side.namesrv_addr
        probe = Child("probe", tools.probe(home, "probe", namesrv=ns, topic="HotProbe", timeout_ms=60000,
                                           create_topics="HotSync,HotBatch,HotAsync,HotLatency,HotBacklog", broker_addr=side.broker_addr,
                                           queues=8), home / "probe.log").start()
        probe.proc.wait(timeout=120)
        prof = Profiler(args.profile, side.broker_pid, args.native)

        pid = side.broker_pid
        mark = [_cpu_s(pid)]

        def begin() -> None:
            mark[0] = _cpu_s(pid)

        def record(name: str, value: float, unit: str, extra: dict | None = None, messages: int = 0) -> None:
            cpu = _cpu_s(pid) - mark[0]
            per = 1e6 * cpu / messages if messages else 0.0
            results[name] = {"value": value, "unit": unit, "load": _load(), "broker_cpu_s": round(cpu, 2),
                             "broker_cpu_us_per_msg": round(per, 1), **(extra or {})}
            print(f"{name:>10}: {value:10.0f} {unit:6} broker CPU {per:6.1f} us/msg  load average "
                  f"{results[name]['load']}", flush=True)

        def windowed(name: str, argv: list[str]) -> str:
            """Run one of Apache's report-per-second tools for ``args.seconds``; its steady rate is judged
            over the last ~9 s, so the broker's CPU is taken over the same window. Returns the tool's log."""
            prof.start(name, args.seconds - 3)
            child = Child(name, argv, home / f"{name}.log").start()
            try:
                time.sleep(args.seconds - MEASURED_S)
                begin()
                time.sleep(MEASURED_S)
                cpu_end = _cpu_s(pid)
            finally:
                child.kill()
            prof.stop()
            mark[0] += _cpu_s(pid) - cpu_end  # count only the window
            return (home / f"{name}.log").read_text(errors="replace")

        if "sync" in phases:
            line = parse.steady_rate(windowed("sync", tools.producer(home, ns, "HotSync", threads=args.threads,
                                                                     size=1024)), "sync")
            record("sync", line.tps, "msg/s", {"avg_rt_ms": line.avg_rt_ms, "failed": line.failed}, int(line.tps * 9))
        if "batch" in phases:
            # Apache's BatchProducer (the side-by-side batch figure): its report line counts sends (batches) and
            # messages; the broker's CPU is divided by messages.
            line = parse.steady_rate(windowed("batch", tools.batch_producer(
                home, ns, "HotBatch", threads=args.threads, size=1024, batch=args.batch)), "batch")
            record("batch", line.mps, "msg/s", {"sends_per_s": line.tps, "avg_rt_ms": line.avg_rt_ms,
                                                 "failed": line.failed}, int(line.mps * 9))
        if "async" in phases:
            begin()
            prof.start("async", args.seconds - 2)
            res = parse.result(javatools.run_to_end(
                "async", tools.probe(home, "async", namesrv=ns, topic="HotAsync", seconds=int(args.seconds), measure=9,
                                     size=1024, inflight=args.inflight), home / "async.log", args.seconds + 60), "async")
            prof.stop()
            record("async", res["tps"], "msg/s", {"failed": res["failed"]}, res["ok"])
        if "latency" in phases:
            begin()
            prof.start("latency", args.seconds)
            res = parse.result(javatools.run_to_end(
                "latency", tools.probe(home, "latency", namesrv=ns, topic="HotLatency", group="hot_latency",
                                       rate=args.rate, seconds=int(args.seconds), warmup=5, size=1024, threads=20),
                home / "latency.log", args.seconds + 140), "latency")
            prof.stop()
            record("e2e p99", res["p99_ms"], "ms", {q: res[f"{q}_ms"] for q in ("p50", "p99", "p999")},
                   args.rate * (args.seconds + 5))
        if "drain" in phases:
            begin()
            fill = parse.result(javatools.run_to_end(
                "fill", tools.probe(home, "fill", namesrv=ns, topic="HotBacklog", count=args.backlog, size=1024,
                                    threads=16, batch=16), home / "fill.log", 120 + args.backlog / 500), "fill")
            record("fill", fill.get("tps", 0.0), "msg/s", messages=args.backlog)
            begin()
            prof.start("drain", max(5, min(30, args.backlog / 20000)))
            res = parse.result(javatools.run_to_end(
                "drain", tools.probe(home, "drain", namesrv=ns, topic="HotBacklog", group="hot_drain", count=args.backlog,
                                     threads=20, timeout_ms=int((120 + args.backlog / 500) * 1000)),
                home / "drain.log", 180 + args.backlog / 500), "drain")
            prof.stop()
            record("drain", res["tps"], "msg/s", {"complete": res["complete"]}, res["consumed"])
    finally:
        side.stop()
        shutil.rmtree(home, ignore_errors=True)
    if args.out:
        args.out.write_text(json.dumps(results, indent=2))
    return results


if __name__ == "__main__":
    main()
