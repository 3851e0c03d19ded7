"""Command line of the side-by-side benchmark (``.venv/bin/python -m benchmarks.broker_bench --help``)."""

from __future__ import annotations

import argparse
import json
import signal
import sys
from pathlib import Path

from .plan import BROKERS, FLUSH_TYPES, MIN_DURATION_S, MIN_FRESH_S, PHASES, Plan
from .report import plot, table
from .runner import Run, session_order


def _csv(allowed: tuple[str, ...]):
    def parse(text: str) -> tuple[str, ...]:
        items = tuple(x.strip() for x in text.split(",") if x.strip())
        bad = [x for x in items if x not in allowed]
        if bad or not items:
            raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {','.join(allowed)}, got {text!r}")
        return items
    return parse


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="broker_bench",
        description="Apache RocketMQ and FerryMQ side by side on this machine, driven by Apache's benchmark tools "
                    "and the official Java client. Default sizes are the quick ones (about 8 minutes).",
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true",
                      help="small sizes (the default): 1 round, 10 s warm-up, 12 s phases, 100k backlog, 100 MiB recovery")
    size.add_argument("--full", action="store_true",
                      help="the documented run: 3 rounds, 30 s warm-up and phases, 1,000,000 backlog, 1 GiB recovery "
                           "(about an hour)")
    p.add_argument("--rounds", type=int, help="rounds per broker and flush mode (medians are taken across them)")
    p.add_argument("--duration", type=float, help="seconds per send phase, judged over its last 9 s (at least 12)")
    p.add_argument("--warmup", type=float, help="seconds of untimed sync sends before the send phases (0: none)")
    p.add_argument("--backlog", type=int, help="messages written then drained for the consume figure")
    p.add_argument("--recovery-mib", type=int, help="commitlog MiB written before the SIGKILL")
    p.add_argument("--latency-rate", type=int, help="offered load of the latency phase, msg/s")
    p.add_argument("--brokers", type=_csv(BROKERS), help="which brokers (default apache,ferrymq)")
    p.add_argument("--flush", type=_csv(FLUSH_TYPES), help="flushDiskType values (default ASYNC_FLUSH,SYNC_FLUSH)")
    p.add_argument("--phases", type=_csv(PHASES),
                   help="standard: every figure on a warmed-up broker; fresh: 32-thread sync sends on a broker just "
                        "launched on an empty store, timed from the first send (default standard,fresh)")
    p.add_argument("--fresh-duration", type=float, help="seconds of the fresh phase (quick 30, full 60; at least 20)")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--plot", type=Path, help="write the PNG plot here (default: next to --out; needs matplotlib)")
    p.add_argument("--keep", action="store_true", help="keep the work dir (broker and tool logs) for inspection")
    p.add_argument("--estimate", action="store_true", help="print the plan and a rough duration, run nothing")
    return p


def plan_from(args: argparse.Namespace) -> Plan:
    overrides = {k: v for k, v in {
        "rounds": args.rounds, "duration_s": args.duration, "warmup_s": args.warmup, "backlog": args.backlog, "recovery_mib": args.recovery_mib,
        "latency_rate": args.latency_rate, "brokers": args.brokers, "flush_types": args.flush, "phases": args.phases,
        "fresh_s": args.fresh_duration,
    }.items() if v is not None}
    plan = Plan.full(**overrides) if args.full else Plan.quick(**overrides)
    for option, seconds, least in (("--duration", plan.duration_s, MIN_DURATION_S), ("--fresh-duration", plan.fresh_s, MIN_FRESH_S)):
        if seconds < least:
            raise SystemExit(f"{option} must be at least {least:.0f} s: Apache's benchmark producers print their "
                             "first rate after ~10 s")
    if plan.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    return plan


def _terminate(signum, _frame):
    raise SystemExit(128 + signum)


def main(argv: list[str] | None = None) -> dict | None:
    args = parser().parse_args(argv)
    plan = plan_from(args)
    minutes = plan.estimate_s() / 60
    print(f"plan: {plan.as_dict()}\nsessions: {len(session_order(plan))}, about {minutes:.0f} min "
          f"(at the rates seen on a 2-core box; a slower broker takes longer)")
    if args.estimate:
        return None
    # Brokers and tools run in their own sessions; turn SIGTERM into an exception so the finally blocks kill them.
    signal.signal(signal.SIGTERM, _terminate)
    results = Run(plan, keep=args.keep).execute()
    results["meta"]["command"] = " ".join(["python -m benchmarks.broker_bench", *(argv if argv is not None else sys.argv[1:])])
    print()
    print(table(results))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2, default=str))
        print(f"\nresults: {args.out}")
    png = args.plot or (args.out.with_suffix(".png") if args.out else None)
    if png:
        try:
            print(f"plot: {plot(results, png)}")
        except ImportError:
            print("plot skipped: matplotlib is not installed (.venv/bin/pip install matplotlib)")
    return results
