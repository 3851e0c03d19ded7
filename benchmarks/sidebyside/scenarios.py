"""The measurements of one broker in one flush mode, in the order a session runs them.

start-up → RSS at rest → backlog fill (at least the crash-test size) → SIGKILL → recovery → warm-up →
sync/batch (Apache's tools) and async send → latency at a fixed offered load → draining the backlog
(the "standard" phases), then the "fresh" phase: the broker killed, its store removed, launched again and
sent to at once (Apache's Producer, no warm-up), the figure taken over every report from the first.
The crash comes before the send phases so that both brokers recover the same commitlog (the send phases
write as much as each broker can take). RSS under load is the peak over the standard load phases. A phase
that fails records its reason and the session goes on; a broker that never serves a first send makes the
whole session "not available".
"""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from compat_tests.processes import Child

from . import parse
from .brokers import Side
from .javatools import LoadTools, run_for, run_to_end
from .plan import WINDOW_S, Outcome, Plan
from .procstat import PeakRss, allocated_mib, tree_cpu_s, tree_rss_mib

PROBE_TOPIC = "bench_probe"
BACKLOG_TOPIC = "bench_backlog"
LATENCY_TOPIC = "bench_latency"
WARMUP_TOPIC = "bench_warmup"
FRESH_TOPIC = "bench_fresh"
#: Bytes a stored message takes beyond its body (Apache's commitlog record: fixed fields, topic, and the
#: properties the client adds), to size the crash-test commitlog in MiB.
STORED_OVERHEAD = 180


def send_topic(key: str) -> str:
    return f"bench_{key}"


class Unavailable(RuntimeError):
    """The broker never served a send: the session reports "not available: <reason>"."""


@dataclass
class Session:
    side: Side
    tools: LoadTools
    plan: Plan
    outcome: Outcome
    log_dir: Path
    _stalls_key = "reactor_stalls_ms"  # where _note_stalls files what the broker's log holds now

    def run(self) -> Outcome:
        try:
            self.side.start_support()
            self.outcome.metrics["startup_s"] = self._launch_and_probe(
                PROBE_TOPIC, self.plan.boot_timeout_s, create_topics=self._topics(), what="start-up")
            if "standard" in self.plan.phases:
                self._standard()
            if "fresh" in self.plan.phases:
                self._record("fresh_sync_send_32_tps", self._fresh)
        except Unavailable as e:
            self.outcome.unavailable = f"not available: {e}"
        finally:
            self._note_stalls()
            self.side.stop()
        return self.outcome

    def _standard(self) -> None:
        time.sleep(3)  # let start-up work (JIT, route registration) settle before "at rest"
        self.outcome.metrics["rss_rest_mib"] = tree_rss_mib(self.side.broker_pid)
        self.outcome.extra["rss_anon_rest_mib"] = round(tree_rss_mib(self.side.broker_pid, "RssAnon"), 1)
        with PeakRss(self.side.broker_pid) as before_crash:
            self._record("drain_tps", self._fill_backlog)
        recovered = self._recovery()
        with PeakRss(self.side.broker_pid) as after_crash:
            self._record("warmup", self._warm_up)
            self._send_phases()
            self._latency()
            if recovered:
                self._record("drain_tps", self._drain)
        self.outcome.metrics["rss_load_mib"] = max(before_crash.peak, after_crash.peak)
        self.outcome.extra["rss_anon_load_mib"] = round(max(before_crash.peak_anon, after_crash.peak_anon), 1)
        self._note_stalls()

    def _note_stalls(self) -> None:
        """Event-loop stalls since the broker's last launch (its log starts over at each): the standard
        phases after the crash test, or the fresh phase."""
        stalls = self.side.reactor_stalls_ms()
        if stalls is not None:
            self.outcome.extra.setdefault(self._stalls_key, stalls)

    # -- helpers -------------------------------------------------------------------------------------

    def _topics(self) -> list[str]:
        keys = [f"sync{t}" for t in self.plan.sync_threads] + ["async", "batch"]
        return [send_topic(k) for k in keys] + [WARMUP_TOPIC, LATENCY_TOPIC, BACKLOG_TOPIC, FRESH_TOPIC]

    def _log(self, name: str) -> Path:
        return self.log_dir / f"{name}.out"

    def _home(self) -> Path:
        return self.log_dir / "client"

    def _warn(self, text: str) -> None:
        self.outcome.extra.setdefault("warnings", []).append(text)

    def _record(self, key: str, fn) -> None:
        """Run one phase; keep its figure, or the reason it has none."""
        if not self.side.broker.alive():
            self.outcome.errors[key] = f"broker died earlier: {self.side.describe_failure()}"
            return
        try:
            fn()
        except Exception as e:  # one phase failing must not cost the others
            self.outcome.errors[key] = f"{type(e).__name__}: {e}"[:2000]

    def _launch_and_probe(self, topic: str, timeout_s: float, *, create_topics: list[str] | None, what: str) -> float:
        """Launch the broker with a warmed-up prober waiting; seconds from launch to the first successful send."""
        options: dict[str, object] = {"namesrv": self.side.namesrv_addr, "topic": topic, "timeout_ms": int(timeout_s * 1000)}
        if create_topics:
            options.update(create_topics=",".join(create_topics), broker_addr=self.side.broker_addr, queues=self.plan.queues)
        log = self._log(f"probe-{what}")
        prober = Child(f"{what} prober", self.tools.probe(self._home(), "probe", **options), log).start()
        try:
            prober.wait_until(lambda: "READY" in prober.log_tail(200000), "ready to probe", 60)
            launched = time.time()
            self.side.launch()
            deadline = time.monotonic() + timeout_s + 45
            while prober.alive() and time.monotonic() < deadline:
                if not self.side.broker.alive():
                    raise Unavailable(f"{what}: {self.side.describe_failure()}")
                time.sleep(0.05)
            text = log.read_text(errors="replace")
            try:
                first = parse.result(text, f"{what} probe")
            except ValueError as e:
                raise Unavailable(f"{what}: no successful send ({e}); broker says: {self.side.describe_failure()}") from None
            if create_topics and "TOPICS_READY" not in text:
                raise Unavailable(f"{what}: sends work but creating the benchmark topics failed; see {log}")
            return first["first_send_epoch_ms"] / 1000 - launched
        finally:
            prober.kill()

    # -- phases ----------------------------------------------------------------------------------------

    def _warm_up(self) -> None:
        """Untimed sync sends, so a JIT-compiled broker is not measured while still compiling its hot paths."""
        p = self.plan
        if p.warmup_s <= 0:
            return
        argv = self.tools.producer(self._home(), self.side.namesrv_addr, WARMUP_TOPIC, threads=p.sync_threads[0], size=p.message_size)
        text = run_for("warmup", argv, self._log("warmup"), p.warmup_s)
        lines = parse.stats_lines(text)
        self.outcome.extra["warmup_last_tps"] = lines[-1].tps if lines else None

    def _send_phases(self) -> None:
        p, ns, home = self.plan, self.side.namesrv_addr, self._home()
        phases = [(f"sync_send_{t}_tps", f"sync{t}", self.tools.producer(home, ns, send_topic(f"sync{t}"), threads=t, size=p.message_size))
                  for t in p.sync_threads]
        phases.append(("batch_send_mps", "batch", self.tools.batch_producer(home, ns, send_topic("batch"), threads=p.batch_threads,
                                                                             size=p.message_size, batch=p.batch_size)))
        for key, name, argv in phases:
            def phase(key=key, name=name, argv=argv):
                text = run_for(name, argv, self._log(name), p.duration_s)
                line = parse.steady_rate(text, name)
                self.outcome.metrics[key] = line.mps
                self.outcome.extra[name] = {"tps": line.tps, "mps": line.mps, "avg_rt_ms": line.avg_rt_ms,
                                            "max_rt_ms": line.max_rt_ms, "failed": line.failed}
                if line.failed:
                    self._warn(f"{name}: {line.failed} sends failed (the figure counts successes only; see {self._log(name)})")
            self._record(key, phase)

        def async_phase():
            argv = self.tools.probe(home, "async", namesrv=ns, topic=send_topic("async"), seconds=int(p.duration_s),
                                    measure=WINDOW_S, size=p.message_size, inflight=p.async_inflight)
            res = parse.result(run_to_end("async", argv, self._log("async"), p.duration_s + 60), "async")
            self.outcome.extra["async"] = res
            self.outcome.metrics["async_send_tps"] = res["tps"]
            if res["failed"]:
                self._warn(f"async: {res['failed']} of {res['ok'] + res['failed']} sends failed ({res['failures']})")
        self._record("async_send_tps", async_phase)

    def _fresh(self) -> None:
        """Sync sends from the first one into an empty store: no warm-up, every report counts.

        After the standard phases the broker is killed and its store removed first, so both brokers start
        this phase the same way: just launched, nothing written but the start-up probe's message.
        """
        p = self.plan
        self._stalls_key = "fresh_reactor_stalls_ms"
        if "standard" in p.phases:
            self.side.kill_broker()
            self.side.remove_store()
            self._launch_and_probe(PROBE_TOPIC, p.boot_timeout_s, create_topics=[FRESH_TOPIC], what="fresh start")
        argv = self.tools.producer(self._home(), self.side.namesrv_addr, FRESH_TOPIC, threads=p.fresh_threads,
                                   size=p.message_size)
        pid = self.side.broker_pid
        window: list[float] = []  # the broker's CPU when the last report's window opens
        timer = threading.Timer(p.fresh_s - WINDOW_S, lambda: window.append(tree_cpu_s(pid)))
        timer.start()
        try:
            text = run_for("fresh", argv, self._log("fresh"), p.fresh_s)
        finally:
            timer.cancel()
        cpu_end = tree_cpu_s(pid)
        figure, extra = parse.rate_from_start(text, "fresh")
        last_tps = extra["tps_per_report"][-1]
        if window and last_tps:
            extra["broker_cpu_us_per_msg_last_window"] = round(1e6 * (cpu_end - window[0]) / (last_tps * WINDOW_S), 1)
        self.outcome.extra["fresh_sync32"] = extra
        self.outcome.metrics["fresh_sync_send_32_tps"] = figure
        if extra["failed"]:
            self._warn(f"fresh: {extra['failed']} sends failed (the figure counts successes only; see {self._log('fresh')})")

    def _latency(self) -> None:
        p = self.plan

        def phase():
            argv = self.tools.probe(self._home(), "latency", namesrv=self.side.namesrv_addr, topic=LATENCY_TOPIC,
                                    group="bench_latency_group", rate=p.latency_rate, seconds=int(p.duration_s),
                                    warmup=int(p.latency_warmup_s), size=p.message_size, threads=p.consume_threads)
            res = parse.result(run_to_end("latency", argv, self._log("latency"), p.latency_warmup_s + p.duration_s + 120), "latency")
            self.outcome.extra["latency"] = res
            if res["send_errors"]:
                self._warn(f"latency: {res['send_errors']} sends failed ({res.get('failures', '')})")
            if res["received"] < 0.99 * res["sent"]:
                raise RuntimeError(f"only {res['received']} of {res['sent']} measured messages arrived within 15 s")
            for q in ("p50", "p99", "p999"):
                self.outcome.metrics[f"e2e_{q}_ms"] = res[f"{q}_ms"]
        self._record("e2e_p50_ms", phase)

    def _fill(self, name: str, count: int) -> dict:
        p = self.plan
        argv = self.tools.probe(self._home(), "fill", namesrv=self.side.namesrv_addr, topic=BACKLOG_TOPIC, count=count,
                                size=p.message_size, threads=16, batch=p.batch_size)
        return parse.result(run_to_end(name, argv, self._log(name), 120 + count / 500), name)

    def _fill_backlog(self) -> None:
        """The backlog, and as many more messages as the recovery size asks for: the same bytes for both brokers."""
        p = self.plan
        count = max(p.backlog, math.ceil(p.recovery_mib * 1024 * 1024 / (p.message_size + STORED_OVERHEAD)))
        self.outcome.extra["fill"] = self._fill("fill", count)
        self.outcome.extra["commitlog_messages_at_kill"] = count
        self.outcome.extra["commitlog_mib_at_kill"] = round(count * (p.message_size + STORED_OVERHEAD) / 2**20, 1)

    def _drain(self) -> None:
        p = self.plan
        argv = self.tools.probe(self._home(), "drain", namesrv=self.side.namesrv_addr, topic=BACKLOG_TOPIC,
                                group="bench_drain_group", count=p.backlog, threads=p.consume_threads,
                                timeout_ms=int((120 + p.backlog / 500) * 1000))
        res = parse.result(run_to_end("drain", argv, self._log("drain"), 180 + p.backlog / 500), "drain")
        self.outcome.extra["drain"] = res
        if not res["complete"]:
            raise RuntimeError(f"drained only {res['consumed']} of {p.backlog} messages before the time limit")
        self.outcome.metrics["drain_tps"] = res["tps"]

    def _recovery(self) -> bool:
        """SIGKILL the broker holding the backlog and time its restart. True if it came back with the backlog.

        If it did not, a fresh broker takes its place so the remaining figures are still measured.
        """
        if "drain_tps" in self.outcome.errors:
            self.outcome.errors["recovery_s"] = f"not measured: the backlog fill failed ({self.outcome.errors['drain_tps'][:200]})"
        else:
            self.outcome.extra["commitlog_allocated_mib_at_kill"] = round(allocated_mib(self.side.store / "commitlog"), 1)
            self.side.kill_broker()
            try:
                self.outcome.metrics["recovery_s"] = self._launch_and_probe(
                    BACKLOG_TOPIC, self.plan.recovery_timeout_s, create_topics=None, what="recovery")
                return True
            except Exception as e:  # the broker served before; only this figure (and the drain) is lost
                self.outcome.errors["recovery_s"] = f"{type(e).__name__}: {e}"[:2000]
        self.side.kill_broker()
        self.side.remove_store()
        self._launch_and_probe(PROBE_TOPIC, self.plan.boot_timeout_s, create_topics=self._topics(), what="restart")
        self.outcome.errors.setdefault("drain_tps", "not measured: the backlog did not survive the crash test")
        return False
