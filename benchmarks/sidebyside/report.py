"""The results as a text table (for the terminal and docs/benchmarks.md) and a PNG plot.

Ratios are FerryMQ/Apache. Each row says which way is better, so a reader can tell a win from a loss
without knowing the figure: throughput wins above 1, latency, RSS and times win below 1.
"""

from __future__ import annotations

from pathlib import Path

from .plan import LATENCY_KEYS, METRIC_BY_KEY, METRICS, PHASES, THROUGHPUT_KEYS


def _fmt(value: float | None, unit: str) -> str:
    if value is None:
        return "n/a"
    if unit == "msg/s":
        return f"{value:,.0f}"
    if unit == "MiB":
        return f"{value:,.0f}"
    return f"{value:,.2f}" if value < 100 else f"{value:,.0f}"


def table(results: dict) -> str:
    """A Markdown table: one row per figure the run's phases measure and flush mode."""
    summary = results["summary"]
    phases = set(results["meta"]["plan"].get("phases", PHASES))
    rows = ["| figure | flush | Apache RocketMQ | FerryMQ | FerryMQ/Apache | better |",
            "|---|---|---:|---:|---:|---|"]
    for m in (m for m in METRICS if phases & set(m.phases)):
        for flush, per_metric in summary.items():
            row = per_metric[m.key]
            ratio = row.get("ratio")
            rows.append(
                f"| {m.label} ({m.unit}) | {flush} | {_fmt(row.get('apache'), m.unit)} | {_fmt(row.get('ferrymq'), m.unit)} "
                f"| {'n/a' if ratio is None else f'{ratio:.2f}x'} | {'higher' if m.higher_is_better else 'lower'} |"
            )
    sizes = {f"{s['extra']['commitlog_messages_at_kill']:,} messages (~{s['extra']['commitlog_mib_at_kill']:,.0f} MiB)"
             for s in results["sessions"] if s.get("extra", {}).get("commitlog_messages_at_kill") is not None}
    if sizes:
        rows += ["", f"Recovery: the broker is SIGKILLed holding {' / '.join(sorted(sizes))} of commitlog, then relaunched."]
    anon = [f"{s['broker']} {s['flush']} round {s['round'] + 1}: {s['extra']['rss_anon_load_mib']:,.0f}"
            for s in results["sessions"] if s.get("extra", {}).get("rss_anon_load_mib") is not None]
    if anon:
        rows += ["Peak anonymous RSS in MiB (heap and stacks; the rest of RSS is mapped store pages): " + "; ".join(anon) + "."]
    cpu = [f"{s['broker']} {s['flush']} round {s['round'] + 1}: {s['extra']['fresh_sync32']['broker_cpu_us_per_msg_last_window']:,.1f}"
           for s in results["sessions"]
           if s.get("extra", {}).get("fresh_sync32", {}).get("broker_cpu_us_per_msg_last_window") is not None]
    if cpu:
        rows += ["Broker CPU per message in µs, fresh phase, its last report's window (less disturbed by other work on "
                 "the machine than the rates): " + "; ".join(cpu) + "."]
    loads = [v for s in results["sessions"] for v in s.get("extra", {}).get("loadavg_1min", [])]
    if loads:
        cores = results["meta"].get("machine", {}).get("cores", "?")
        rows += [f"Machine load (1-min load average at session start/end, {cores} cores): {min(loads):.1f} to {max(loads):.1f}."]
    notes = []
    for s in results["sessions"]:
        who = f"{s['broker']} {s['flush']} round {s['round'] + 1}"
        if s["unavailable"]:
            notes.append(f"- {who}: {s['unavailable']}")
        for text in s.get("extra", {}).get("warnings", []):
            notes.append(f"- {who}: {text[:300]}")
        for key, why in s["errors"].items():
            first_line = why.strip().splitlines()[0] if why.strip() else why
            notes.append(f"- {who}: {METRIC_BY_KEY[key].label if key in METRIC_BY_KEY else key} failed: {first_line[:300]}")
    if notes:
        rows += ["", "Missing figures and failed sends:", *notes]
    return "\n".join(rows)


def plot(results: dict, path: Path) -> Path:
    """Throughput and latency, both brokers side by side, one row of charts per flush mode."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = results["summary"]
    flushes = list(summary)
    colours = {"apache": "#d2691e", "ferrymq": "#1f77b4"}
    names = {"apache": "Apache RocketMQ", "ferrymq": "FerryMQ"}
    fig, axes = plt.subplots(len(flushes), 2, figsize=(13, 4.2 * len(flushes)), squeeze=False)
    for row, flush in enumerate(flushes):
        for col, (keys, unit, title) in enumerate((
            (THROUGHPUT_KEYS, "messages/s", "Throughput (higher is better)"),
            (LATENCY_KEYS, "ms (log scale)", "End-to-end latency, send to push receipt (lower is better)"),
        )):
            ax = axes[row][col]
            width = 0.38
            for i, broker in enumerate(("apache", "ferrymq")):
                values = [summary[flush][k].get(broker) for k in keys]
                xs = [j + (i - 0.5) * width for j in range(len(keys))]
                shown = [(x, v) for x, v in zip(xs, values) if v is not None]
                bars = ax.bar([x for x, _ in shown], [v for _, v in shown], width, color=colours[broker], label=names[broker])
                for bar, (_, v) in zip(bars, shown):
                    ax.annotate(f"{v:,.0f}" if col == 0 else f"{v:.1f}", (bar.get_x() + bar.get_width() / 2, bar.get_height()),
                                ha="center", va="bottom", fontsize=8, xytext=(0, 2), textcoords="offset points")
                for x, v in zip(xs, values):
                    if v is None:  # no bar (a log axis cannot show 0): say so at the foot of the axis
                        ax.text(x, 0.02, "n/a", transform=ax.get_xaxis_transform(), ha="center", va="bottom", fontsize=8,
                                color=colours[broker])
            ax.set_xticks(range(len(keys)))
            ax.set_xlim(-0.7, len(keys) - 0.3)
            if col == 0:
                ax.set_xticklabels([METRIC_BY_KEY[k].label.replace(", ", ",\n").replace(" (", "\n(") for k in keys], fontsize=8)
            else:
                ax.set_yscale("log")
                ax.set_xticklabels([METRIC_BY_KEY[k].label.rsplit(" ", 1)[-1] for k in keys], fontsize=9)
            ax.set_ylabel(unit)
            ax.set_title(f"{title} - {flush}", fontsize=10)
            ax.margins(y=0.15)
            ax.legend(fontsize=8)
    plan = results["meta"]["plan"]
    fig.suptitle(f"FerryMQ vs Apache RocketMQ {results['meta']['rocketmq_version']}: {plan['message_size']} B messages, "
                 f"medians of {plan['rounds']} round(s), latency at {plan['latency_rate']} msg/s offered", fontsize=11)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
