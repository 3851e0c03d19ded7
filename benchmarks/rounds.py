"""What the gateway benchmarks (http_bench, mqtt_bench) share: a figure's spread over rounds, the load
tool's CPU, a Debian tool installed when missing, and the results file.

Each of them runs its phases in rounds, in an order that flips every round, and reports per figure the
median, min and max over the rounds (:func:`spread`), beside the CPU its load tool used
(:func:`children_cpu_s`), so a reader can tell the tool was not the limit.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from benchmarks.sidebyside.runner import machine


def spread(values: list[float]) -> dict[str, float] | None:
    """Median, min and max of a figure over the rounds that have it (None if none has)."""
    if not values:
        return None
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "rounds": len(values)}


def children_cpu_s() -> float:
    """CPU of the children waited for so far: around one tool's run, that tool's own CPU."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def debian_program(program: str, package: str, needed_by: str, paths: Sequence[str] = ()) -> str:
    """``program``'s path, installed from Debian's ``package`` with apt-get when missing and this process
    runs as root; else SystemExit saying how to install it (``needed_by`` says what needs it)."""

    def find() -> str | None:
        return shutil.which(program) or next((p for p in paths if os.path.exists(p)), None)

    found = find()
    if found is None and shutil.which("apt-get") and os.geteuid() == 0:
        print(f"installing {package} (apt-get install -y {package}) ...", flush=True)
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        for argv in (["apt-get", "install", "-y", "-q", package], ["apt-get", "update", "-q"],
                     ["apt-get", "install", "-y", "-q", package]):
            subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
            found = find()
            if found:
                break
    if found is None:
        raise SystemExit(f"{needed_by}: install {package} (Debian/Ubuntu: sudo apt-get install {package}; "
                         f"Fedora: dnf install {package}; macOS: brew install {package}) and run again")
    return found


def write_results(out: Path | None, module: str, argv: list[str] | None, started: float, plan: Any,
                  work_dir: Path | None, summary: dict, verdict: dict, rounds: list, **meta: Any) -> dict:
    """The run's results (``meta``, ``summary``, ``verdict``, ``rounds``), written as JSON to ``out`` if
    given; ``meta`` adds facts of the run (a reference broker's version, say)."""
    results = {
        "meta": {"started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
                 "wall_s": round(time.time() - started, 1), "machine": machine(), **meta,
                 "command": " ".join([f"python -m benchmarks.{module}", *(argv if argv is not None else [])]),
                 "plan": asdict(plan), "work_dir": str(work_dir) if work_dir else None},
        "summary": summary, "verdict": verdict, "rounds": [asdict(r) for r in rounds],
    }
    if out:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(results, indent=2) + "\n")
        print(f"\nresults: {out}")
    return results


def run_rounds(module: str, make_bench: Callable[[Any, Path], Any], plan: Any, describe: Callable[[Any], str],
               args: Any, argv: list[str] | None, summarize: Callable[[list], dict], table: Callable[[dict], str],
               verdict: Callable[[dict], dict], meta: Callable[[Any], dict] | None = None) -> dict:
    """A benchmark's run: ``make_bench(plan, home)`` started in a fresh work dir, ``plan.rounds`` rounds
    each printed by ``describe``, stopped even when a round fails, then the table printed and the results
    written (``args.out``; the work dir kept with ``args.keep``). ``meta(bench)`` adds facts read once the
    bench has stopped."""
    started = time.time()
    home = Path(tempfile.mkdtemp(prefix=f"ferrymq-{module.replace('_', '-')}-"))
    bench = make_bench(plan, home)
    rounds: list = []
    try:
        bench.start()
        for r in range(plan.rounds):
            done = bench.round(r)
            rounds.append(done)
            print(f"round {r + 1}/{plan.rounds}: {describe(done)}", flush=True)
    finally:
        bench.stop()
        if not args.keep:
            shutil.rmtree(home, ignore_errors=True)
    summary = summarize(rounds)
    print()
    print(table(summary))
    return write_results(args.out, module, argv, started, plan, home if args.keep else None, summary,
                         verdict(summary), rounds, **(meta(bench) if meta else {}))
