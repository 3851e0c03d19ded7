"""Reading the load tools' output (sans I/O: text in, figures out).

Apache's benchmark Producer and BatchProducer print, once per report interval after their first ten
one-second snapshots, a line of ``Name: value`` fields joined by `` | `` whose rates cover the last ten
snapshots (a 9 s sliding window). LoadProbe (java/) prints ``RESULT {json}`` once, or a line naming why it
could not (``PROBE_TIMEOUT ...``, ``FILL_FAILED ...``, ``LATENCY_FAILED ...``).
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass

from .plan import WINDOW_S


@dataclass(frozen=True)
class StatsLine:
    """One periodic report of Apache's benchmark producer (``mps`` equals ``tps`` for single sends)."""

    tps: float
    mps: float
    avg_rt_ms: float
    max_rt_ms: float
    failed: int


def _fields(line: str) -> dict[str, str]:
    out = {}
    for part in line.split(" | "):
        name, sep, value = part.partition(": ")
        if sep:
            out[name.strip()] = value.strip()
    return out


def stats_lines(text: str) -> list[StatsLine]:
    """Every periodic ``Send TPS`` report in the tool's output, oldest first."""
    lines = []
    for raw in text.splitlines():
        if not raw.startswith("Current Time:") or "Send TPS:" not in raw:
            continue
        f = _fields(raw)
        tps = float(f["Send TPS"])
        lines.append(
            StatsLine(
                tps=tps,
                mps=float(f.get("Send MPS", tps)),
                avg_rt_ms=float(f["Average RT(ms)"]),
                max_rt_ms=float(f["Max RT(ms)"]),
                failed=int(f.get("Send Failed", 0)) + int(f.get("Response Failed", f.get("Send Message Failed", 0))),
            )
        )
    return lines


def steady_rate(text: str, what: str) -> StatsLine:
    """The last report: its window is the final 9 s of the run, after client start-up and warm-up."""
    lines = stats_lines(text)
    if not lines:
        raise ValueError(f"{what}: the tool printed no 'Send TPS' report (it prints the first after ~10 s; "
                         f"run phases of at least 12 s). Output tail:\n{text[-1500:]}")
    return lines[-1]


def rate_from_start(text: str, what: str) -> tuple[float, dict]:
    """The rate over a run from its first snapshot (one second in), as far as whole report windows reach.

    Each report covers the 9 s before it, so the first report and every ninth after it tile the run
    without overlap: their mean is the rate over those windows together. Also returns, for the JSON file,
    every report's rate, their median, the longest send and the failed sends.
    """
    lines = stats_lines(text)
    if not lines:
        steady_rate(text, what)  # raises, naming the cause
    tiles = [line.tps for line in lines[::WINDOW_S]]
    rates = [line.tps for line in lines]
    extra = {"seconds_covered": WINDOW_S * len(tiles), "tps_per_report": rates,
             "median_report_tps": statistics.median(rates), "max_rt_ms": max(line.max_rt_ms for line in lines),
             "failed": lines[-1].failed}
    return sum(tiles) / len(tiles), extra


def result(text: str, what: str) -> dict:
    """The JSON object of LoadProbe's ``RESULT`` line; a ValueError naming the failure line otherwise."""
    for raw in text.splitlines():
        if raw.startswith("RESULT "):
            return json.loads(raw[len("RESULT "):], strict=False)  # failure texts may hold control characters
    for raw in text.splitlines():
        if raw.startswith(("PROBE_TIMEOUT", "FILL_FAILED", "LATENCY_FAILED")):
            raise ValueError(f"{what}: {raw}")
    raise ValueError(f"{what}: no RESULT line. Output tail:\n{text[-1500:]}")


def status_kib(status_text: str, field: str = "VmRSS") -> int:
    """A memory field (``VmRSS``, ``RssAnon``, ``RssFile``) of a /proc/<pid>/status text, in KiB."""
    for raw in status_text.splitlines():
        if raw.startswith(f"{field}:"):
            return int(raw.split()[1])
    raise ValueError(f"no {field} line (kernel thread or exited process?)")


def vm_rss_kib(status_text: str) -> int:
    return status_kib(status_text, "VmRSS")
