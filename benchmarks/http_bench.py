"""HTTP gateway publish and consume beside the remoting sync send: one broker, one run, 64 at once.

Run: ``.venv/bin/python -m benchmarks.http_bench [--quick | --full] [--rounds N] [--gateway loop|thread|process] [--out FILE]``.

One ``ferrymq standalone`` (ASYNC_FLUSH, temp store, loopback, the HTTP gateway served as by default, on
the broker's own loop) is driven in rounds. Each round runs, in an order that flips every round so drift of the
shared machine favours neither side:

* **remoting sync send**: LoadProbe's ``sync`` mode (the side-by-side's program on the official Java
  5.5.0 client, ``sidebyside/java``), 64 threads each sending the next 1 KiB message when the last is
  answered; the rate and round-trip percentiles over the last seconds of the run (the first warm up the
  JVM and the broker);
* **HTTP publish**: ``wrk`` (Debian's package, installed with apt-get when missing and run as root), 64
  keep-alive HTTP/1.1 connections on one thread, each POSTing a 1 KiB raw body to
  ``/v1/topics/{topic}/messages`` when the last is answered, after an untimed warm-up run;
* **HTTP consume**: the messages this round published over HTTP, taken by asyncio workers (httpx,
  keep-alive) with ``GET .../messages?group=G&max=32`` and acked with ``POST .../ack``, a new group
  starting at the topic's first message; the rate runs from the first message taken to the last acked.

Both send sides are closed loops of 64, so at saturation each one's latency is 64 over its own rate
(Little's law) and their p99 difference says how much less the gateway carries, not what it adds. What
the gateway adds to a publish's latency is read below saturation, in two paced phases run the same way:

* **paced remoting sync send** and **paced HTTP publish**: the same 64 senders, each pausing after
  every answer before it sends again, a random time uniform from 0 to twice ``pause_ms`` (64 ms), so
  that they do not move in step (LoadProbe ``sync --pause``; wrk's ``delay()``): about 1,000 msg/s on
  either side, far below what either carries. The p99 difference of these is the p99 the gateway adds.

 The load tools' CPU is reported beside each
figure (in cores: CPU seconds over wall seconds), and the server's CPU per message (the broker process,
which serves HTTP too, and the gateway's own process with ``--gateway process``: the broker with
``httpListenPort=0`` and ``ferrymq gateway http`` in front of it), so a reader can tell whether the tool
or the server was the limit. Figures are medians over the rounds, with their range; the ratio and the
p99 difference are taken within each round first.
Target (issue 22): HTTP publish >= 0.5x the remoting sync send (saturated), and <= 2 ms more p99 (paced).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.sidebyside import javatools, parse
from benchmarks.sidebyside.brokers import FerrySide, ferrymq_executable
from benchmarks.sidebyside.procstat import tree_cpu_s
from benchmarks.rounds import children_cpu_s, debian_program, run_rounds, spread
from compat_tests.processes import LOOPBACK, Child, free_port

TARGET_RATIO = 0.5
TARGET_P99_ADDED_MS = 2.0
PUBLISH_CONTENT_TYPE = "application/octet-stream"


#: the broker's httpEventLoop of each --gateway served by the broker process
EVENT_LOOPS = {"loop": "BROKER", "thread": "OWN_THREAD"}


@dataclass(frozen=True)
class Plan:
    rounds: int = 3
    seconds: float = 10.0  # measured seconds of each send phase
    warmup_s: float = 4.0  # untimed sends before them (the Java side: inside the same JVM run)
    concurrency: int = 64  # HTTP connections and Java sender threads
    pause_ms: int = 64  # the paced phases: each sender's mean pause after every answer (~1,000 msg/s in all)
    message_size: int = 1024
    consume_workers: int = 8
    consume_max: int = 32  # messages per GET
    queues: int = 8
    flush: str = "ASYNC_FLUSH"
    segment_mib: int = 64
    #: "loop": served by the broker process on its own loop (httpEventLoop=BROKER); "thread": by the broker
    #: process on a loop of its own (httpEventLoop=OWN_THREAD); "process": `ferrymq gateway http`
    gateway: str = "loop"

    @classmethod
    def quick(cls, **overrides) -> "Plan":
        return replace(cls(), **overrides)

    @classmethod
    def full(cls, **overrides) -> "Plan":
        return replace(cls(rounds=5, seconds=30.0, warmup_s=10.0), **overrides)


# -- the load tools' output (no I/O) -----------------------------------------------------------------


def wrk_script(size: int, content_type: str = PUBLISH_CONTENT_TYPE, pause_ms: int = 0) -> str:
    """wrk's Lua: POST a ``size``-byte body on every request (with ``pause_ms``, each connection waits a
    random time from 0 to twice that after an answer before its next request, as LoadProbe's ``sync
    --pause`` does); at the end print ``RESULT {json}`` (the line format LoadProbe prints, read by
    :func:`parse.result`), latencies in microseconds."""
    pace = f"delay = function() return math.random(0, {2 * pause_ms}) end\n" if pause_ms else ""
    return f"""wrk.method = "POST"
wrk.headers["Content-Type"] = "{content_type}"
wrk.body = string.rep("m", {size})
{pace}
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('RESULT {{"requests": %d, "duration_us": %d, "connect_errors": %d, "read_errors": %d, ' ..
    '"write_errors": %d, "status_errors": %d, "timeouts": %d, "mean_us": %.1f, "p50_us": %d, "p90_us": %d, ' ..
    '"p99_us": %d, "p999_us": %d, "max_us": %d}}\\n', summary.requests, summary.duration, e.connect, e.read,
    e.write, e.status, e.timeout, latency.mean, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency:percentile(99.9), latency.max))
end
"""


def wrk_figures(text: str) -> dict[str, float]:
    """Rate (answers that were 2xx, over the run) and latency percentiles in ms from wrk's output."""
    raw = parse.result(text, "wrk")
    failed = raw["connect_errors"] + raw["read_errors"] + raw["write_errors"] + raw["status_errors"] + raw["timeouts"]
    ok = raw["requests"] - raw["status_errors"]  # wrk counts a non-2xx answer among its requests too
    seconds = raw["duration_us"] / 1e6
    return {"tps": round(ok / seconds, 1), "ok": ok, "failed": failed, "seconds": round(seconds, 3),
            **{q: round(raw[f"{q[:-3]}_us"] / 1000, 3) for q in ("mean_ms", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")}}


# -- rounds and their summary --------------------------------------------------------------------------


@dataclass
class Round:
    """One round's figures: the three phases' rates and latencies, and what the broker and tools spent."""

    index: int
    order: list[str]
    remoting: dict[str, float] = field(default_factory=dict)
    publish: dict[str, float] = field(default_factory=dict)
    paced_remoting: dict[str, float] = field(default_factory=dict)
    paced_publish: dict[str, float] = field(default_factory=dict)
    consume: dict[str, float] = field(default_factory=dict)
    loadavg_1min: list[float] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


#: (key, label, unit, phase, figure) for the table; phase and figure index Round
FIGURES = (
    ("publish_tps", "HTTP publish, 64 keep-alive connections", "msg/s", "publish", "tps"),
    ("publish_p50_ms", "HTTP publish p50", "ms", "publish", "p50_ms"),
    ("publish_p99_ms", "HTTP publish p99", "ms", "publish", "p99_ms"),
    ("remoting_tps", "remoting sync send, 64 threads", "msg/s", "remoting", "tps"),
    ("remoting_p50_ms", "remoting sync send p50", "ms", "remoting", "p50_ms"),
    ("remoting_p99_ms", "remoting sync send p99", "ms", "remoting", "p99_ms"),
    ("paced_publish_tps", "paced HTTP publish (64 connections, 64 ms pauses)", "msg/s", "paced_publish", "tps"),
    ("paced_publish_p50_ms", "paced HTTP publish p50", "ms", "paced_publish", "p50_ms"),
    ("paced_publish_p99_ms", "paced HTTP publish p99", "ms", "paced_publish", "p99_ms"),
    ("paced_remoting_tps", "paced remoting sync send (64 threads, 64 ms pauses)", "msg/s", "paced_remoting", "tps"),
    ("paced_remoting_p50_ms", "paced remoting sync send p50", "ms", "paced_remoting", "p50_ms"),
    ("paced_remoting_p99_ms", "paced remoting sync send p99", "ms", "paced_remoting", "p99_ms"),
    ("consume_tps", "HTTP consume (GET max=32, then ack)", "msg/s", "consume", "tps"),
    ("publish_broker_us", "server CPU per message, HTTP publish", "µs", "publish", "broker_cpu_us_per_msg"),
    ("remoting_broker_us", "server CPU per message, remoting sync send", "µs", "remoting", "broker_cpu_us_per_msg"),
    ("consume_broker_us", "server CPU per message, HTTP consume", "µs", "consume", "broker_cpu_us_per_msg"),
    ("publish_tool_cores", "wrk CPU", "cores", "publish", "tool_cores"),
    ("remoting_tool_cores", "Java senders CPU", "cores", "remoting", "tool_cores"),
    ("consume_tool_cores", "consume client CPU", "cores", "consume", "tool_cores"),
)


def summarize(rounds: list[Round]) -> dict[str, dict[str, float] | None]:
    """Median, min and max over the rounds of every figure, and of three per-round comparisons: HTTP
    publish over remoting sync send (saturated), the p99 the gateway adds (paced) and the p99 difference
    at saturation."""
    out = {key: spread([getattr(r, phase)[figure] for r in rounds if figure in getattr(r, phase)])
           for key, _label, _unit, phase, figure in FIGURES}
    both = [r for r in rounds if "tps" in r.publish and r.remoting.get("tps")]
    out["ratio"] = spread([r.publish["tps"] / r.remoting["tps"] for r in both])
    paced = [r for r in rounds if "p99_ms" in r.paced_publish and "p99_ms" in r.paced_remoting]
    out["p99_added_ms"] = spread([r.paced_publish["p99_ms"] - r.paced_remoting["p99_ms"] for r in paced])
    out["saturated_p99_added_ms"] = spread([r.publish["p99_ms"] - r.remoting["p99_ms"] for r in both])
    return out


def verdict(summary: dict) -> dict[str, bool | None]:
    ratio, added = summary.get("ratio"), summary.get("p99_added_ms")
    return {"throughput": None if ratio is None else ratio["median"] >= TARGET_RATIO,
            "p99": None if added is None else added["median"] <= TARGET_P99_ADDED_MS}


def _fmt(value: float, unit: str) -> str:
    if unit == "msg/s":
        return f"{value:,.0f}"
    if unit == "µs":
        return f"{value:,.0f}"
    return f"{value:.2f}"


def table(summary: dict) -> str:
    """A Markdown table: each figure's median and range over the rounds, then the targets."""
    rows = ["| figure | median | min–max | rounds |", "|---|---:|---:|---:|"]
    for key, label, unit, _phase, _figure in FIGURES:
        s = summary.get(key)
        if s is not None:
            rows.append(f"| {label} ({unit}) | {_fmt(s['median'], unit)} | {_fmt(s['min'], unit)}–{_fmt(s['max'], unit)} "
                        f"| {s['rounds']} |")
    met = verdict(summary)
    for key, label, target, ok in (
        ("ratio", "HTTP publish / remoting sync send", f"≥ {TARGET_RATIO}", met["throughput"]),
        ("p99_added_ms", "p99 added by the gateway, paced (ms)", f"≤ {TARGET_P99_ADDED_MS:g} ms", met["p99"]),
        ("saturated_p99_added_ms", "p99 difference at saturation (ms)", None, None),
    ):
        s = summary.get(key)
        if s is not None:
            judged = f", target {target}: {'met' if ok else 'missed'}" if target else ""
            rows.append(f"| {label}{judged} | {s['median']:.2f} | {s['min']:.2f}–{s['max']:.2f} | {s['rounds']} |")
    return "\n".join(rows)


# -- running it ---------------------------------------------------------------------------------------


def ensure_wrk() -> str:
    """wrk's path; installed from the distribution (apt-get) when missing and this process may."""
    return debian_program("wrk", "wrk", "http_bench drives HTTP with wrk")


class Bench:
    def __init__(self, plan: Plan, home: Path, progress=print):
        self.plan = plan
        self.home = home
        self.progress = progress
        self.wrk = ensure_wrk()
        self.tools = javatools.load_tools()
        self.http_port = free_port()
        in_broker = plan.gateway != "process"
        self.side = FerrySide(home / "ferrymq", plan.flush, {"httpListenPort": self.http_port if in_broker else 0,
                                                             "httpEventLoop": EVENT_LOOPS.get(plan.gateway, "OWN_THREAD"),
                                                             "mappedFileSizeCommitLog": plan.segment_mib << 20})
        self.gateway: Child | None = None  # the gateway's own process, when it has one
        self.script = home / "publish.lua"
        self.script.write_text(wrk_script(plan.message_size))
        self.paced_script = home / "paced.lua"
        self.paced_script.write_text(wrk_script(plan.message_size, pause_ms=plan.pause_ms))

    def url(self, path: str) -> str:
        return f"http://{LOOPBACK}:{self.http_port}{path}"

    # -- broker

    def start(self) -> None:
        topics = ["http_bench_warmup"] + [f"http_bench_{kind}_r{r}" for r in range(self.plan.rounds)
                                          for kind in ("sync", "publish", "pacedsync", "paced")]
        self.side.launch()
        probe = Child("probe", self.tools.probe(self.home, "probe", namesrv=self.side.namesrv_addr, topic="http_bench_probe",
                                                timeout_ms=60000, create_topics=",".join(topics),
                                                broker_addr=self.side.broker_addr, queues=self.plan.queues),
                      self.home / "probe.log").start()
        try:
            probe.proc.wait(timeout=120)
        finally:
            probe.kill()
        if "TOPICS_READY" not in probe.log_tail(100000):
            raise RuntimeError(f"the broker did not take the benchmark topics; {self.side.describe_failure()}")
        if self.plan.gateway == "process":
            conf = self.home / "gateway.conf"
            conf.write_text(f"bindAddress={LOOPBACK}\nhttpListenPort={self.http_port}\n")
            self.gateway = Child("FerryMQ HTTP gateway", [ferrymq_executable(), "gateway", "http", "-n",
                                                          self.side.namesrv_addr, "-c", str(conf)],
                                 self.home / "gateway.out").start()
        self._wait_for_gateway()

    def _wait_for_gateway(self, timeout_s: float = 60.0) -> None:
        import httpx

        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url("/v1/topics"), timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the HTTP gateway did not answer within {timeout_s:.0f} s; {self.side.describe_failure()}")

    def stop(self) -> None:
        if self.gateway is not None:
            self.gateway.kill()
        self.side.stop()

    def server_cpu_s(self) -> float:
        """CPU of the broker process and, when it has its own, the gateway's."""
        cpu = tree_cpu_s(self.side.broker_pid)
        if self.gateway is not None and self.gateway.alive():
            cpu += tree_cpu_s(self.gateway.proc.pid)
        return cpu

    # -- phases

    def _timed(self, run, messages_of) -> dict[str, float]:
        """Run one load tool; add the server's CPU per message and the tool's CPU in cores."""
        broker0, tool0, wall0 = self.server_cpu_s(), children_cpu_s(), time.monotonic()
        figures = run()
        broker, tool, wall = self.server_cpu_s() - broker0, children_cpu_s() - tool0, time.monotonic() - wall0
        messages = messages_of(figures)
        figures["broker_cpu_us_per_msg"] = round(1e6 * broker / messages, 1) if messages else 0.0
        figures["tool_cores"] = round(tool / wall, 2)
        return figures

    def remoting(self, r: int) -> dict[str, float]:
        return self._sync(f"sync-r{r}", f"http_bench_sync_r{r}", 0)

    def paced_remoting(self, r: int) -> dict[str, float]:
        return self._sync(f"pacedsync-r{r}", f"http_bench_pacedsync_r{r}", self.plan.pause_ms)

    def _sync(self, name: str, topic: str, pause_ms: int) -> dict[str, float]:
        """LoadProbe sync: its run includes the warm-up, and the server's CPU counts over the whole run."""
        p = self.plan
        seconds = int(p.warmup_s + p.seconds)
        argv = self.tools.probe(self.home, "sync", namesrv=self.side.namesrv_addr, topic=topic, seconds=seconds,
                                measure=int(p.seconds), threads=p.concurrency, size=p.message_size, pause=pause_ms)

        def run() -> dict[str, float]:
            res = parse.result(javatools.run_to_end("sync", argv, self.home / f"{name}.log", seconds + 60), "sync")
            return {k: res[k] for k in ("tps", "ok", "failed", "p50_ms", "p90_ms", "p99_ms", "p999_ms", "max_ms")}

        return self._timed(run, lambda f: f["tps"] * seconds)

    def _wrk(self, name: str, topic: str, seconds: float, script: Path | None = None) -> dict[str, float]:
        p = self.plan
        argv = [self.wrk, "-t1", f"-c{p.concurrency}", f"-d{seconds:g}s", "--timeout", "10s", "-s",
                str(script or self.script), self.url(f"/v1/topics/{topic}/messages")]
        return wrk_figures(javatools.run_to_end(name, argv, self.home / f"{name}.log", seconds + 30))

    def publish(self, r: int) -> dict[str, float]:
        self._wrk(f"wrk-warmup-r{r}", "http_bench_warmup", self.plan.warmup_s)
        return self._timed(lambda: self._wrk(f"wrk-r{r}", f"http_bench_publish_r{r}", self.plan.seconds),
                           lambda f: f["ok"])

    def paced_publish(self, r: int) -> dict[str, float]:
        self._wrk(f"wrk-paced-warmup-r{r}", "http_bench_warmup", self.plan.warmup_s, self.paced_script)
        return self._timed(lambda: self._wrk(f"wrk-paced-r{r}", f"http_bench_paced_r{r}", self.plan.seconds,
                                             self.paced_script), lambda f: f["ok"])

    def consume(self, r: int, count: int) -> dict[str, float]:
        """Take and ack ``count`` messages of round ``r``'s HTTP topic; this process is the client."""
        topic, group = f"http_bench_publish_r{r}", f"http_bench_group_r{r}"
        broker0, client0 = self.server_cpu_s(), time.process_time()
        res = asyncio.run(consume_all(self.url(""), topic, group, count, self.plan.consume_workers,
                                      self.plan.consume_max, timeout_s=120 + count / 500))
        broker, client = self.server_cpu_s() - broker0, time.process_time() - client0
        res["broker_cpu_us_per_msg"] = round(1e6 * broker / res["acked"], 1) if res["acked"] else 0.0
        res["tool_cores"] = round(client / res["wall_s"], 2)
        if res["acked"] < count:
            raise RuntimeError(f"acked only {res['acked']} of {count} messages within the time limit")
        return res

    def round(self, r: int) -> Round:
        order = ["remoting", "publish"] if r % 2 == 0 else ["publish", "remoting"]
        order += [f"paced_{phase}" for phase in order]
        result = Round(r, order + ["consume"])
        load = os.getloadavg()[0]
        for phase in order:
            try:
                setattr(result, phase, getattr(self, phase)(r))
            except Exception as exc:  # one phase failing must not cost the others
                result.errors[phase] = f"{type(exc).__name__}: {exc}"[:2000]
        if "ok" in result.publish:
            try:
                result.consume = self.consume(r, int(result.publish["ok"]))
            except Exception as exc:
                result.errors["consume"] = f"{type(exc).__name__}: {exc}"[:2000]
        result.loadavg_1min = [round(load, 2), round(os.getloadavg()[0], 2)]
        return result


async def consume_all(base: str, topic: str, group: str, count: int, workers: int, max_messages: int,
                      timeout_s: float) -> dict[str, float]:
    """``workers`` loops of GET (up to ``max_messages``, long-polling 1 s) then ack, until ``count`` are acked."""
    import httpx

    acked = 0
    first: float | None = None
    last = 0.0
    requests = 0
    deadline = time.monotonic() + timeout_s
    ack_url = f"{base}/v1/topics/{topic}/ack"

    async def worker(client: httpx.AsyncClient) -> None:
        nonlocal acked, first, last, requests
        params = {"group": group, "max": str(max_messages), "wait": "1"}
        while acked < count and time.monotonic() < deadline:
            answer = await client.get(f"{base}/v1/topics/{topic}/messages", params=params)
            answer.raise_for_status()
            handles = [m["receiptHandle"] for m in answer.json()["messages"]]
            requests += 1
            if not handles:
                continue
            if first is None:
                first = time.monotonic()
            settled = await client.post(ack_url, json={"group": group, "receiptHandles": handles})
            settled.raise_for_status()
            requests += 1
            acked += len(handles)
            last = time.monotonic()

    start = time.monotonic()
    limits = httpx.Limits(max_connections=workers, max_keepalive_connections=workers)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:
        await asyncio.gather(*(worker(client) for _ in range(workers)))
    seconds = (last - first) if first is not None else 0.0
    return {"tps": round(acked / seconds, 1) if seconds else 0.0, "acked": acked, "requests": requests,
            "seconds": round(seconds, 3), "start_to_first_s": round((first or start) - start, 3),
            "wall_s": round(time.monotonic() - start, 3)}


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="http_bench", description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="3 rounds of 10 s phases (the default; about 6 minutes)")
    size.add_argument("--full", action="store_true", help="5 rounds of 30 s phases (about 20 minutes)")
    p.add_argument("--rounds", type=int, help="rounds (medians are taken over them)")
    p.add_argument("--seconds", type=float, help="measured seconds of each send phase")
    p.add_argument("--gateway", choices=("loop", "thread", "process"),
                   help="loop: the gateway served by the broker process on its own event loop (httpEventLoop="
                        "BROKER); thread: served by the broker process on a loop of its own (OWN_THREAD); process: "
                        "the broker with httpListenPort=0 and `ferrymq gateway http` in front of it")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--keep", action="store_true", help="keep the work dir (broker and tool logs)")
    args = p.parse_args(argv if argv is not None else [])
    overrides = {k: v for k, v in {"rounds": args.rounds, "seconds": args.seconds, "gateway": args.gateway}.items() if v is not None}
    plan = Plan.full(**overrides) if args.full else Plan.quick(**overrides)
    return run_rounds("http_bench", Bench, plan, _describe, args, argv, summarize, table, verdict)


def _describe(done: Round) -> str:
    return (f"({', '.join(done.order)}) remoting {done.remoting.get('tps', 0):,.0f} msg/s p99 "
            f"{done.remoting.get('p99_ms', 0):.1f} ms; HTTP publish {done.publish.get('tps', 0):,.0f} msg/s p99 "
            f"{done.publish.get('p99_ms', 0):.1f} ms (wrk {done.publish.get('tool_cores', 0):.2f} cores); "
            f"HTTP consume {done.consume.get('tps', 0):,.0f} msg/s; paced p99 remoting "
            f"{done.paced_remoting.get('p99_ms', 0):.1f} ms, HTTP {done.paced_publish.get('p99_ms', 0):.1f} ms; "
            f"load {done.loadavg_1min}"
            + (f"; failed: {done.errors}" if done.errors else ""))


if __name__ == "__main__":
    main(sys.argv[1:])
