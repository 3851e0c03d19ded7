"""Rounds of sessions, alternating which broker goes first, and the medians and ratios over them.

Sessions run strictly one at a time (2 cores: a second broker would steal the first one's CPU). The order
flips every session (A B, B A, A B, ...) so slow drift of the machine (other work, page cache, thermal)
does not favour either broker.
"""

from __future__ import annotations

import os
import platform
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .brokers import APACHE_BROKER_JVM_FLAGS, APACHE_NAMESRV_JVM_FLAGS, make_side
from .javatools import CLIENT_JVM_FLAGS, LoadTools, load_tools
from .plan import METRICS, Outcome, Plan
from .scenarios import Session


def session_order(plan: Plan) -> list[tuple[int, str, str]]:
    """(round, flush, broker) in run order, flipping the broker order every (round, flush) pair."""
    order = []
    k = 0
    for r in range(plan.rounds):
        for flush in plan.flush_types:
            brokers = list(plan.brokers) if k % 2 == 0 else list(reversed(plan.brokers))
            order += [(r, flush, b) for b in brokers]
            k += 1
    return order


def summarize(outcomes: list[Outcome], plan: Plan) -> dict:
    """Per flush mode and figure: each broker's median over rounds, and FerryMQ/Apache."""
    summary: dict[str, dict] = {}
    for flush in plan.flush_types:
        per_metric = {}
        for m in METRICS:
            row: dict[str, object] = {}
            for broker in plan.brokers:
                values = [o.metrics[m.key] for o in outcomes
                          if o.broker == broker and o.flush == flush and m.key in o.metrics]
                row[broker] = statistics.median(values) if values else None
                row[f"{broker}_rounds"] = len(values)
            a, f = row.get("apache"), row.get("ferrymq")
            row["ratio"] = (f / a) if (isinstance(a, float | int) and isinstance(f, float | int) and a) else None
            per_metric[m.key] = row
        summary[flush] = per_metric
    return summary


def machine() -> dict:
    """What the figures ran on (they mean little without it)."""
    cpu = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    try:
        java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()[0]
    except (OSError, IndexError):
        java = "unknown"
    return {"cpu": cpu, "cores": os.cpu_count(), "mem_gib": round(mem_gib, 1), "kernel": platform.release(),
            "python": platform.python_version(), "java": java}


@dataclass
class Run:
    plan: Plan
    keep: bool = False
    progress: Callable[[str], None] = print
    outcomes: list[Outcome] = field(default_factory=list)

    def execute(self) -> dict:
        started = time.time()
        tools: LoadTools = load_tools()
        root = Path(tempfile.mkdtemp(prefix="ferrymq-sidebyside-"))
        self.progress(f"side-by-side: {len(session_order(self.plan))} sessions, work dir {root}")
        try:
            for r, flush, broker in session_order(self.plan):
                home = root / f"r{r}-{flush.lower()}-{broker}"
                side = make_side(broker, home, flush)
                t0 = time.monotonic()
                self.progress(f"  round {r + 1}/{self.plan.rounds} {flush} {broker} ...")
                load_before = os.getloadavg()[0]
                outcome = Session(side, tools, self.plan, Outcome(r, broker, flush), log_dir=home / "logs").run()
                # Other work on the machine shows up here; figures from a loaded machine deserve less weight.
                outcome.extra["loadavg_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]
                side.remove_store()
                self.outcomes.append(outcome)
                self.progress(f"    {self._one_line(outcome)} ({time.monotonic() - t0:.0f}s)")
        finally:
            if not self.keep:
                shutil.rmtree(root, ignore_errors=True)
        return {
            "meta": {
                "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                "wall_s": round(time.time() - started, 1),
                "machine": machine(),
                "rocketmq_version": tools.version,
                "apache_broker_jvm_flags": list(APACHE_BROKER_JVM_FLAGS),
                "apache_namesrv_jvm_flags": list(APACHE_NAMESRV_JVM_FLAGS),
                "client_jvm_flags": list(CLIENT_JVM_FLAGS),
                "plan": self.plan.as_dict(),
                "work_dir": str(root) if self.keep else None,
            },
            "summary": summarize(self.outcomes, self.plan),
            "sessions": [o.as_dict() for o in self.outcomes],
        }

    @staticmethod
    def _one_line(o: Outcome) -> str:
        if o.unavailable:
            return o.unavailable
        shown = ", ".join(f"{k}={v:,.1f}" for k, v in o.metrics.items())
        errs = f"; {len(o.errors)} failed: {', '.join(o.errors)}" if o.errors else ""
        return shown + errs
