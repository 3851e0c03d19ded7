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
import time
from collections.abc import Sequence
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
