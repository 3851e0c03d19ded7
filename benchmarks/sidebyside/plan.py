"""What one benchmark run measures, and how big: the figures, their units, and the run sizes.

The figures are declared once here so the runner, the JSON file, the table and the plot agree on names,
units and which direction is better (a FerryMQ/Apache ratio above 1 is a win for throughput and a loss for
latency, RSS and time).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

BROKERS = ("apache", "ferrymq")
#: Apache's benchmark producers report the rate over their last ten one-second snapshots (9 s); every
#: throughput phase is judged over the same final window, and must be longer than it.
WINDOW_S = 9
MIN_DURATION_S = 12.0
#: ... and the fresh phase's client starts together with a just-launched broker: its first report can come later
MIN_FRESH_S = 20.0
FLUSH_TYPES = ("ASYNC_FLUSH", "SYNC_FLUSH")
#: What a session measures: "standard" is every figure but one, on a broker warmed up and writing segments
#: made ahead of it; "fresh" is sync sends on a broker just launched on an empty store, timed from the
#: first send (what a new user, and every test suite, meets first).
PHASES = ("standard", "fresh")


@dataclass(frozen=True)
class Metric:
    key: str
    label: str
    unit: str
    higher_is_better: bool
    phases: tuple[str, ...] = ("standard",)  # the phases that measure it


METRICS: tuple[Metric, ...] = (
    Metric("sync_send_32_tps", "sync send, 32 threads", "msg/s", True),
    Metric("sync_send_128_tps", "sync send, 128 threads", "msg/s", True),
    Metric("async_send_tps", "async send", "msg/s", True),
    Metric("batch_send_mps", "batch send (16/batch, 32 threads)", "msg/s", True),
    Metric("e2e_p50_ms", "end-to-end latency p50", "ms", False),
    Metric("e2e_p99_ms", "end-to-end latency p99", "ms", False),
    Metric("e2e_p999_ms", "end-to-end latency p99.9", "ms", False),
    Metric("drain_tps", "consume, draining the backlog", "msg/s", True),
    Metric("rss_rest_mib", "broker RSS at rest", "MiB", False),
    Metric("rss_load_mib", "broker RSS under load (peak)", "MiB", False),
    Metric("fresh_sync_send_32_tps", "sync send, 32 threads, fresh store (from the first send)", "msg/s", True, ("fresh",)),
    Metric("startup_s", "start-up (launch to first send)", "s", False, PHASES),
    Metric("recovery_s", "recovery after SIGKILL (launch to first send)", "s", False),
)
METRIC_BY_KEY = {m.key: m for m in METRICS}
THROUGHPUT_KEYS = ("sync_send_32_tps", "sync_send_128_tps", "async_send_tps", "batch_send_mps", "drain_tps",
                   "fresh_sync_send_32_tps")
LATENCY_KEYS = ("e2e_p50_ms", "e2e_p99_ms", "e2e_p999_ms")


@dataclass(frozen=True)
class Plan:
    """Run sizes. ``quick()`` finishes in a few minutes; ``full()`` is the run the docs table comes from."""

    rounds: int = 1
    duration_s: float = 12.0  # per send phase; the figure is the rate over its last WINDOW_S seconds
    warmup_s: float = 10.0  # untimed sync sends first, so JIT-compiled brokers are measured warm
    backlog: int = 100_000  # messages written, then drained
    recovery_mib: int = 100  # commitlog written before SIGKILL (the backlog counts towards it)
    latency_rate: int = 1000  # offered load for the latency phase, msg/s
    latency_warmup_s: float = 5.0
    message_size: int = 1024
    sync_threads: tuple[int, ...] = (32, 128)
    batch_threads: int = 32
    batch_size: int = 16
    async_inflight: int = 1024  # requests outstanding in the async phase
    consume_threads: int = 20  # Apache's benchmark Consumer default
    queues: int = 8
    boot_timeout_s: float = 60.0
    recovery_timeout_s: float = 600.0
    brokers: tuple[str, ...] = BROKERS
    flush_types: tuple[str, ...] = FLUSH_TYPES
    phases: tuple[str, ...] = PHASES
    fresh_s: float = 30.0  # the fresh phase: sync sends from the first one, on an empty store
    fresh_threads: int = 32

    @classmethod
    def quick(cls, **overrides) -> "Plan":
        return replace(cls(), **overrides)

    @classmethod
    def full(cls, **overrides) -> "Plan":
        return replace(cls(rounds=3, duration_s=30.0, warmup_s=30.0, backlog=1_000_000, recovery_mib=1024, fresh_s=60.0),
                       **overrides)

    def as_dict(self) -> dict:
        return asdict(self)

    def estimate_s(self, fill_tps: float = 30_000, drain_tps: float = 50_000, boot_s: float = 10.0) -> float:
        """Rough wall time at the given rates (a 1M backlog filled at 30-54k msg/s and drained at ~65k on 2 cores)."""
        fill = max(self.backlog, self.recovery_mib * 2**20 / (self.message_size + 180))
        session = boot_s
        if "standard" in self.phases:
            session += (
                boot_s + 8  # restart after SIGKILL, settling
                + fill / fill_tps + self.backlog / drain_tps + 10
                + self.warmup_s + (len(self.sync_threads) + 2) * (self.duration_s + 3)
                + self.latency_warmup_s + self.duration_s + 8
            )
        if "fresh" in self.phases:
            session += self.fresh_s + 3 + (boot_s if "standard" in self.phases else 0)  # relaunch on an empty store
        return self.rounds * len(self.brokers) * len(self.flush_types) * session


@dataclass
class Outcome:
    """One broker in one flush mode in one round: the figures it reached and why the others are missing."""

    round: int
    broker: str
    flush: str
    metrics: dict[str, float] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    unavailable: str | None = None  # "not available: <reason>" when the broker never served a send
    extra: dict[str, object] = field(default_factory=dict)  # raw tool figures, for the JSON file

    def as_dict(self) -> dict:
        return asdict(self)
