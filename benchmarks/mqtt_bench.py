"""The MQTT gateway side by side with mosquitto: publish->subscribe at QoS 0 and 1, and idle connections.

Run: ``.venv/bin/python -m benchmarks.mqtt_bench [--quick | --full] [--rounds N] [--phases qos0,qos1,idle] [--sides ferrymq] [--out FILE]``.

Two brokers run at once on the loopback address of the same machine: Debian's ``mosquitto`` (installed
with apt-get when missing and run as root; anonymous, nothing persisted, otherwise its defaults) and one
``ferrymq standalone`` (ASYNC_FLUSH, temp store, HTTP gateway off, MQTT on a free port). Each round runs
every phase on one broker then on the other, in an order that flips every round so drift of the shared
machine favours neither side, and the FerryMQ/mosquitto ratios are taken within the round.

The load tool is ``benchmarks/mqttload`` (Go, Eclipse Paho, MQTT 3.1.1), built with ``go build`` on first
use into a cache directory keyed by its sources:

* **qos0**, **qos1**: 4 publishers and 1 subscriber (filter ``{prefix}/+``), 1 KiB payloads, each
  publisher with at most 16 messages sent and not yet received (a closed loop end to end: 64 messages on
  the way). The rate is messages received per second over the measured seconds after a warm-up; the
  latency is from the publisher's send to the subscriber's receipt (one process, one clock). Saturated,
  each side's mean latency is its 64 messages on the way over its own rate, so the p99 there says how
  much less a broker carries, not what it adds;
* **qos1paced**: the same at QoS 1, each publisher pausing a random time (uniform 0 to 2 ms) after each
  PUBLISH: about 1,000 msg/s each, the same offered load on both brokers and well below either's
  saturation, so the latency is what the broker adds. The p99 target is judged here;
* **idle**: 10,000 clients CONNECT (keep-alive 30 s: each sends one PINGREQ per period) and each
  subscribes to its own topic at QoS 1 (``mqttidle/r{round}/c{i}``, a device's command topic), then the
  broker's RSS and CPU are sampled at rest; RSS also before the clients came.

Beside each figure: the broker's CPU (its process tree, per message or in cores) and the load tool's
(in cores), so a reader can tell which side was the limit, and the 1-min load average of the machine.
Figures are medians over the rounds with their range.
Targets (issue 23): FerryMQ QoS 1 rate >= 0.5x mosquitto's (saturated), p99 <= 2x mosquitto's (paced;
the saturated one beside it), 10,000 connections under 500 MiB RSS.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.sidebyside import parse
from benchmarks.sidebyside.brokers import FerrySide
from benchmarks.sidebyside.procstat import rss_mib, tree_cpu_s, tree_rss_mib
from benchmarks.rounds import children_cpu_s, debian_program, run_rounds, spread
from compat_tests.processes import LOOPBACK, Child, free_port, port_open

TARGET_QOS1_RATIO = 0.5
TARGET_P99_RATIO = 2.0
TARGET_IDLE_RSS_MIB = 500.0
LOAD_TOOL = Path(__file__).parent / "mqttload"
BROKERS = ("ferrymq", "mosquitto")
PHASES = ("qos0", "qos1", "qos1paced", "idle")
#: each publish->subscribe phase: its QoS, and whether its publishers pause (Plan.paced_pause_ms) after each PUBLISH
PUBSUB = {"qos0": (0, False), "qos1": (1, False), "qos1paced": (1, True)}


@dataclass(frozen=True)
class Plan:
    rounds: int = 3
    seconds: float = 10.0  # measured seconds of each publish->subscribe phase
    warmup_s: float = 3.0
    publishers: int = 4
    subscribers: int = 1
    window: int = 16  # messages per publisher sent and not yet received
    message_size: int = 1024
    paced_pause_ms: float = 1.0  # qos1paced: each publisher's mean pause after a PUBLISH
    idle_clients: int = 10_000
    idle_keepalive_s: int = 30
    idle_subscribe: bool = True  # each idle client subscribes to a topic of its own
    idle_measure_s: float = 10.0  # seconds the idle broker is sampled
    phases: tuple[str, ...] = PHASES
    sides: tuple[str, ...] = BROKERS  # the brokers measured (one alone: its CPU per message undisturbed)
    timeline_dir: str | None = None  # each publish->subscribe run writes its messages' send times and latencies here

    @classmethod
    def quick(cls, **overrides) -> Plan:
        return replace(cls(), **overrides)

    @classmethod
    def full(cls, **overrides) -> Plan:
        return replace(cls(rounds=5, seconds=20.0, warmup_s=5.0, idle_measure_s=30.0), **overrides)


# -- rounds and their summary (no I/O) ------------------------------------------------------------------


@dataclass
class Round:
    """One round: each broker's figures by phase (:data:`PHASES`)."""

    index: int
    order: list[str]
    ferrymq: dict[str, dict[str, float]] = field(default_factory=dict)
    mosquitto: dict[str, dict[str, float]] = field(default_factory=dict)
    loadavg_1min: list[float] = field(default_factory=list)
    errors: dict[str, str] = field(default_factory=dict)


#: (key, label, unit, phase, figure) for the table: each row shows both brokers and their ratio
FIGURES = (
    ("qos0_rate", "QoS 0 publish->subscribe", "msg/s", "qos0", "rate"),
    ("qos0_p50_ms", "QoS 0 latency p50", "ms", "qos0", "p50_ms"),
    ("qos0_p99_ms", "QoS 0 latency p99", "ms", "qos0", "p99_ms"),
    ("qos1_rate", "QoS 1 publish->subscribe", "msg/s", "qos1", "rate"),
    ("qos1_p50_ms", "QoS 1 latency p50", "ms", "qos1", "p50_ms"),
    ("qos1_p99_ms", "QoS 1 latency p99", "ms", "qos1", "p99_ms"),
    ("qos1_lost", "QoS 1 messages not received within 2 s", "msgs", "qos1", "lost"),
    ("qos1paced_rate", "QoS 1 paced publish->subscribe", "msg/s", "qos1paced", "rate"),
    ("qos1paced_p50_ms", "QoS 1 paced latency p50", "ms", "qos1paced", "p50_ms"),
    ("qos1paced_p99_ms", "QoS 1 paced latency p99", "ms", "qos1paced", "p99_ms"),
    ("qos0_broker_us", "broker CPU per message, QoS 0", "µs", "qos0", "broker_cpu_us_per_msg"),
    ("qos1_broker_us", "broker CPU per message, QoS 1", "µs", "qos1", "broker_cpu_us_per_msg"),
    ("qos1paced_broker_us", "broker CPU per message, QoS 1 paced", "µs", "qos1paced", "broker_cpu_us_per_msg"),
    ("qos0_tool_cores", "load tool CPU, QoS 0", "cores", "qos0", "tool_cores"),
    ("qos1_tool_cores", "load tool CPU, QoS 1", "cores", "qos1", "tool_cores"),
    ("idle_rss_mib", "RSS with the idle clients connected", "MiB", "idle", "rss_mib"),
    ("idle_rss_before_mib", "RSS before they connected", "MiB", "idle", "rss_before_mib"),
    ("idle_cpu_pct", "broker CPU at rest, idle clients connected", "%", "idle", "cpu_pct"),
    ("idle_connect_s", "time to connect (and subscribe) the idle clients", "s", "idle", "connect_seconds"),
)


def summarize(rounds: list[Round]) -> dict[str, dict[str, dict[str, float] | None]]:
    """For every figure: each broker's median, min and max over the rounds, and the FerryMQ/mosquitto
    ratio taken within each round first (rounds where both brokers measured it)."""
    out: dict[str, dict[str, dict[str, float] | None]] = {}
    for key, _label, _unit, phase, figure in FIGURES:
        values = {broker: [getattr(r, broker)[phase][figure] for r in rounds if figure in getattr(r, broker).get(phase, {})]
                  for broker in BROKERS}
        both = [r for r in rounds
                if figure in r.ferrymq.get(phase, {}) and r.mosquitto.get(phase, {}).get(figure)]
        out[key] = {"ferrymq": spread(values["ferrymq"]), "mosquitto": spread(values["mosquitto"]),
                    "ratio": spread([r.ferrymq[phase][figure] / r.mosquitto[phase][figure] for r in both])}
    return out


def verdict(summary: dict) -> dict[str, bool | None]:
    """The targets: the rate saturated, the p99 paced (saturated when no paced phase ran), the RSS."""
    rate, rss = (summary.get(k) or {} for k in ("qos1_rate", "idle_rss_mib"))
    p99 = summary.get("qos1paced_p99_ms") or {}
    if not p99.get("ratio"):
        p99 = summary.get("qos1_p99_ms") or {}
    return {"qos1_throughput": None if not rate.get("ratio") else rate["ratio"]["median"] >= TARGET_QOS1_RATIO,
            "qos1_p99": None if not p99.get("ratio") else p99["ratio"]["median"] <= TARGET_P99_RATIO,
            "idle_rss": None if not rss.get("ferrymq") else rss["ferrymq"]["max"] < TARGET_IDLE_RSS_MIB}


def _fmt(value: float, unit: str) -> str:
    if unit in ("msg/s", "µs", "msgs"):
        return f"{value:,.0f}"
    if unit in ("MiB", "%"):
        return f"{value:,.1f}"
    return f"{value:.2f}"


def _cell(s: dict[str, float] | None, unit: str) -> str:
    if s is None:
        return "–"
    return f"{_fmt(s['median'], unit)} ({_fmt(s['min'], unit)}–{_fmt(s['max'], unit)})"


def table(summary: dict) -> str:
    """A Markdown table: each figure's median (min–max) over the rounds for both brokers, the per-round
    ratio, then the targets."""
    rows = ["| figure | FerryMQ | mosquitto | FerryMQ / mosquitto |", "|---|---:|---:|---:|"]
    for key, label, unit, _phase, _figure in FIGURES:
        s = summary.get(key)
        if s is None or (s["ferrymq"] is None and s["mosquitto"] is None):
            continue
        ratio = s["ratio"]
        ratio_cell = "–" if ratio is None else f"{ratio['median']:.2f} ({ratio['min']:.2f}–{ratio['max']:.2f})"
        rows.append(f"| {label} ({unit}) | {_cell(s['ferrymq'], unit)} | {_cell(s['mosquitto'], unit)} | {ratio_cell} |")
    met = verdict(summary)
    p99 = "QoS 1 p99, paced" if (summary.get("qos1paced_p99_ms") or {}).get("ratio") else "QoS 1 p99"
    for name, target, ok in (("QoS 1 rate", f"≥ {TARGET_QOS1_RATIO}x mosquitto's", met["qos1_throughput"]),
                             (p99, f"≤ {TARGET_P99_RATIO:g}x mosquitto's", met["qos1_p99"]),
                             ("RSS with the idle clients", f"< {TARGET_IDLE_RSS_MIB:g} MiB", met["idle_rss"])):
        if ok is not None:
            rows.append(f"\ntarget: {name} {target}: **{'met' if ok else 'missed'}**")
    return "\n".join(rows)


# -- the tools ----------------------------------------------------------------------------------------


def ensure_mosquitto() -> str:
    """mosquitto's path; installed from the distribution (apt-get) when missing and this process may."""
    return debian_program("mosquitto", "mosquitto", "mqtt_bench compares with mosquitto", ["/usr/sbin/mosquitto"])


def load_tool() -> Path:
    """The load tool's binary, built with ``go build`` when its sources changed (modules from the Go
    module proxy, as ``go`` is set up)."""
    go = shutil.which("go") or ("/usr/local/go/bin/go" if os.path.exists("/usr/local/go/bin/go") else None)
    sources = sorted(p for p in LOAD_TOOL.iterdir() if p.name in ("go.mod", "go.sum") or p.suffix == ".go")
    digest = hashlib.sha256(b"".join(p.read_bytes() for p in sources)).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "ferrymq"
    binary = cache / f"mqttload-{digest}"
    if binary.exists():
        return binary
    if go is None:
        raise SystemExit("mqtt_bench's load tool (benchmarks/mqttload) is Go: install Go 1.24 or later and run again")
    cache.mkdir(parents=True, exist_ok=True)
    print(f"building the load tool: go build -o {binary} ...", flush=True)
    proc = subprocess.run([go, "build", "-o", str(binary), "."], cwd=LOAD_TOOL, capture_output=True, text=True,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"go build of benchmarks/mqttload failed:\n{proc.stderr[-3000:]}")
    return binary


class Mosquitto:
    """mosquitto on a free loopback port: anonymous, nothing persisted, its defaults otherwise."""

    name = "mosquitto"

    def __init__(self, home: Path):
        self.binary = ensure_mosquitto()
        self.home = home
        self.port = free_port()
        self.child: Child | None = None

    def start(self) -> None:
        self.home.mkdir(parents=True, exist_ok=True)
        conf = self.home / "mosquitto.conf"
        conf.write_text(f"listener {self.port} {LOOPBACK}\nallow_anonymous true\npersistence false\n"
                        "log_dest stderr\nlog_type error\nlog_type warning\n")
        self.child = Child("mosquitto", [self.binary, "-c", str(conf)], self.home / "mosquitto.log").start()
        self.child.wait_until(lambda: port_open(LOOPBACK, self.port), "listening", 10)

    @property
    def pid(self) -> int:
        return self.child.proc.pid

    def rss_mib(self, field: str = "VmRSS") -> float:
        return rss_mib(self.pid, field)

    def cpu_s(self) -> float:
        return tree_cpu_s(self.pid)

    def stop(self) -> None:
        if self.child is not None:
            self.child.kill()


class Ferry:
    """``ferrymq standalone`` with the MQTT listener on a free port and the HTTP gateway off."""

    name = "ferrymq"

    def __init__(self, home: Path):
        self.port = free_port()
        self.side = FerrySide(home, "ASYNC_FLUSH", {"httpListenPort": 0, "mqttListenPort": self.port})

    def start(self) -> None:
        child = self.side.launch()
        child.wait_until(lambda: port_open(LOOPBACK, self.port) and port_open(LOOPBACK, self.side.port),
                         "listening", 60)

    @property
    def pid(self) -> int:
        return self.side.broker_pid

    def rss_mib(self, field: str = "VmRSS") -> float:
        return tree_rss_mib(self.pid, field)

    def cpu_s(self) -> float:
        return tree_cpu_s(self.pid)

    def stop(self) -> None:
        self.side.stop()


class Bench:
    def __init__(self, plan: Plan, home: Path):
        self.plan = plan
        self.home = home
        self.tool = str(load_tool())
        self.brokers = {"ferrymq": Ferry(home / "ferrymq"), "mosquitto": Mosquitto(home / "mosquitto")}

    def start(self) -> None:
        for side in self.plan.sides:
            self.brokers[side].start()

    def stop(self) -> None:
        for side in self.plan.sides:
            self.brokers[side].stop()

    def url(self, broker: str) -> str:
        return f"tcp://{LOOPBACK}:{self.brokers[broker].port}"

    def pubsub(self, broker: str, phase: str, r: int) -> dict[str, float]:
        p = self.plan
        qos, paced = PUBSUB[phase]
        argv = [self.tool, "pubsub", "-broker", self.url(broker), "-topic", f"mqttbench/r{r}{phase}", "-qos", str(qos),
                "-publishers", str(p.publishers), "-subscribers", str(p.subscribers), "-window", str(p.window),
                "-size", str(p.message_size), "-warmup", f"{p.warmup_s:g}s", "-duration", f"{p.seconds:g}s",
                *(["-pause", f"{p.paced_pause_ms:g}ms"] if paced else []),
                *(["-timeline", str(Path(p.timeline_dir) / f"{broker}-{phase}-r{r}.txt")] if p.timeline_dir else [])]
        server, cpu0, tool0, wall0 = self.brokers[broker], self.brokers[broker].cpu_s(), children_cpu_s(), time.monotonic()
        out = _run(f"{broker}-{phase}-r{r}", argv, self.home / f"{broker}-{phase}-r{r}.log", p.warmup_s + p.seconds + 120)
        cpu, tool, wall = server.cpu_s() - cpu0, children_cpu_s() - tool0, time.monotonic() - wall0
        raw = parse.result(out, f"mqttload pubsub at {broker}")
        # the broker's CPU and the messages received both over the whole run (warm-up included)
        total = raw["received"] * (wall / raw["seconds"]) if raw["seconds"] else 0
        figures = {k: round(raw[k], 3) for k in ("rate", "received", "sent", "lost", "failed", "seconds",
                                                  "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms")}
        figures["broker_cpu_us_per_msg"] = round(1e6 * cpu / total, 1) if total else 0.0
        figures["broker_cores"] = round(cpu / wall, 2)
        figures["tool_cores"] = round(tool / wall, 2)
        return figures

    def idle(self, broker: str, r: int) -> dict[str, float]:
        """Connect the idle clients, then sample the broker's RSS (max) and CPU over ``idle_measure_s``."""
        p = self.plan
        server = self.brokers[broker]
        hold = p.idle_measure_s + 3
        argv = [self.tool, "idle", "-broker", self.url(broker), "-clients", str(p.idle_clients),
                "-keepalive", str(p.idle_keepalive_s), "-hold", f"{hold:g}s",
                *(["-subscribe", f"mqttidle/r{r}"] if p.idle_subscribe else [])]
        log = self.home / f"{broker}-idle-r{r}.log"
        rss_before = server.rss_mib()
        tool0 = children_cpu_s()
        child = Child(f"{broker}-idle-r{r}", argv, log).start()
        try:
            child.wait_until(lambda: "READY " in log.read_text(errors="replace"), "connected", 300)
            time.sleep(1.0)  # the last CONNACKs' work settles
            cpu0, wall0 = server.cpu_s(), time.monotonic()
            peak = peak_anon = 0.0
            while time.monotonic() - wall0 < p.idle_measure_s:
                peak = max(peak, server.rss_mib())
                peak_anon = max(peak_anon, server.rss_mib("RssAnon"))
                time.sleep(0.5)
            cpu, wall = server.cpu_s() - cpu0, time.monotonic() - wall0
            child.proc.wait(timeout=hold + 120)
        finally:
            child.kill()
        ready = json.loads(next(line for line in log.read_text().splitlines() if line.startswith("READY "))[6:])
        raw = parse.result(log.read_text(errors="replace"), f"mqttload idle at {broker}")
        return {"clients": raw["clients"], "failed": raw["failed"], "lost": raw["lost"],
                "connect_seconds": round(ready["connect_seconds"], 2), "rss_before_mib": round(rss_before, 1),
                "rss_mib": round(peak, 1), "rss_anon_mib": round(peak_anon, 1), "cpu_pct": round(100 * cpu / wall, 2),
                "measured_s": round(wall, 1), "tool_cpu_s": round(children_cpu_s() - tool0, 2)}

    def round(self, r: int) -> Round:
        order = [b for b in (BROKERS if r % 2 == 0 else reversed(BROKERS)) if b in self.plan.sides]
        result = Round(r, order)
        load = os.getloadavg()[0]
        for broker in order:
            figures = getattr(result, broker)
            for phase in self.plan.phases:
                try:
                    figures[phase] = self.idle(broker, r) if phase == "idle" else self.pubsub(broker, phase, r)
                except Exception as exc:  # one phase failing must not cost the others
                    result.errors[f"{broker}/{phase}"] = f"{type(exc).__name__}: {exc}"[:2000]
        result.loadavg_1min = [round(load, 2), round(os.getloadavg()[0], 2)]
        return result


def _run(name: str, argv: list[str], log: Path, timeout_s: float) -> str:
    """Run the load tool to its end (killed after ``timeout_s``); its output."""
    child = Child(name, argv, log).start()
    try:
        child.proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pass
    finally:
        child.kill()
    return log.read_text(errors="replace")


def _describe(r: Round) -> str:
    parts = []
    for broker in r.order:
        f = getattr(r, broker)
        bits = [f"{ph} {f[ph]['rate']:,.0f} msg/s p99 {f[ph]['p99_ms']:.1f} ms" for ph in PUBSUB if ph in f]
        if "idle" in f:
            bits.append(f"idle {f['idle']['rss_mib']:.0f} MiB {f['idle']['cpu_pct']:.1f}% CPU")
        parts.append(f"{broker}: " + ", ".join(bits))
    return "; ".join(parts) + f"; load {r.loadavg_1min}" + (f"; failed: {r.errors}" if r.errors else "")


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="mqtt_bench", description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="3 rounds, 10 s phases, idle sampled 10 s (the default; ~5 min)")
    size.add_argument("--full", action="store_true", help="5 rounds, 20 s phases, idle sampled 30 s (~15 min)")
    p.add_argument("--rounds", type=int, help="rounds (medians are taken over them)")
    p.add_argument("--seconds", type=float, help="measured seconds of each publish->subscribe phase")
    p.add_argument("--phases", help=f"comma-separated subset of {','.join(PHASES)}")
    p.add_argument("--idle-clients", type=int, help="connections of the idle phase")
    p.add_argument("--sides", help=f"comma-separated subset of {','.join(BROKERS)} (default: both)")
    p.add_argument("--idle-no-subscribe", action="store_true", help="idle clients only connect (no subscription each)")
    p.add_argument("--timeline", type=Path, help="a directory: each publish->subscribe run writes there its messages' "
                                                 "send time and latency (ns), one pair a line")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--keep", action="store_true", help="keep the work dir (broker and tool logs)")
    args = p.parse_args(argv if argv is not None else [])
    phases = tuple(args.phases.split(",")) if args.phases else None
    if phases and not set(phases) <= set(PHASES):
        p.error(f"--phases takes {', '.join(PHASES)}")
    sides = tuple(args.sides.split(",")) if args.sides else None
    if args.timeline:
        args.timeline.mkdir(parents=True, exist_ok=True)
    if sides and not set(sides) <= set(BROKERS):
        p.error(f"--sides takes {', '.join(BROKERS)}")
    overrides = {k: v for k, v in {"rounds": args.rounds, "seconds": args.seconds, "phases": phases, "sides": sides,
                                   "timeline_dir": str(args.timeline) if args.timeline else None,
                                   "idle_clients": args.idle_clients,
                                   "idle_subscribe": False if args.idle_no_subscribe else None}.items() if v is not None}
    plan = Plan.full(**overrides) if args.full else Plan.quick(**overrides)
    return run_rounds("mqtt_bench", Bench, plan, _describe, args, argv, summarize, table, verdict, meta=_mosquitto)


def _mosquitto(bench: Bench) -> dict:
    version = subprocess.run([bench.brokers["mosquitto"].binary, "-h"], capture_output=True, text=True,
                             check=False).stdout.splitlines()[:1]
    return {"mosquitto": version[0] if version else "unknown"}


if __name__ == "__main__":
    main(sys.argv[1:])
