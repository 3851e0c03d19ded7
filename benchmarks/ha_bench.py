"""Master/slave replication side by side: an Apache RocketMQ pair and a FerryMQ pair, one run (issue 24).

Run: ``.venv/bin/python -m benchmarks.ha_bench [--quick | --full] [--rounds N] [--brokers apache,ferrymq]
[--roles ASYNC_MASTER,SYNC_MASTER] [--out FILE]``.

Per master role, each side runs a name server, a master and one slave (ASYNC_FLUSH, temp stores, loopback,
otherwise each broker's defaults): Apache 5.5.0 from the Maven Central jars, FerryMQ as ``ferrymq
standalone`` (name server and master) plus ``ferrymq broker`` (slave). SYNC_MASTER runs with
``inSyncReplicas=2``: with Apache 5.x's default of 1 a SYNC_MASTER does not wait for its slave at all.
Each round drives both pairs, in an order that flips every round, with LoadProbe's ``sync`` mode (the
official Java 5.5.0 client, ``sidebyside/java``): ``threads`` senders each sending the next 1 KiB message
once the last is answered; the rate and round-trip percentiles cover the last ``seconds`` of the run.
While it runs, the master's GET_BROKER_HA_STATUS (``mqadmin haStatus``) is sampled every ``lag_every_s``:
the replication lag is the master's commit-log max offset minus what its slave acknowledged.

Figures are medians over the rounds with their range; the FerryMQ/Apache ratio is taken within each round
first. Target (issue 24): SYNC_MASTER throughput >= 1.0x Apache's.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks.rounds import run_rounds, spread
from benchmarks.sidebyside import javatools, parse
from benchmarks.sidebyside.brokers import ferrymq_executable
from compat_tests import apache, toolchain
from compat_tests.processes import LOOPBACK, Child, free_port
from ferrymq.testing import admin
from ferrymq.wire.bodies import HARuntimeInfo, SyncStateSet
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request
from ferrymq.wire.message import iter_records
from tests.ha.helpers import BrokerProcess, commitlog_bytes, commitlog_range, send

TARGET_SYNC_RATIO = 1.0
ROLES = ("ASYNC_MASTER", "SYNC_MASTER")
BROKERS = ("apache", "ferrymq")
CLUSTER = "HaBenchCluster"
BROKER_NAME = "ha-bench"


@dataclass(frozen=True)
class Plan:
    rounds: int = 3
    seconds: float = 10.0  # measured seconds of each run
    warmup_s: float = 4.0  # untimed sends before them, in the same JVM run
    threads: int = 32
    message_size: int = 1024
    roles: tuple[str, ...] = ROLES
    brokers: tuple[str, ...] = BROKERS
    lag_every_s: float = 0.2
    slave_timeout_ms: int = 3000

    @classmethod
    def quick(cls, **overrides) -> Plan:
        return replace(cls(), **overrides)

    @classmethod
    def full(cls, **overrides) -> Plan:
        return replace(cls(rounds=5, seconds=30.0, warmup_s=10.0), **overrides)


def role_settings(role: str, slave_timeout_ms: int) -> dict[str, object]:
    if role == "SYNC_MASTER":
        return {"brokerRole": role, "inSyncReplicas": 2, "slaveTimeout": slave_timeout_ms}
    return {"brokerRole": role}


# -- the figures (no I/O) ----------------------------------------------------------------------------

@dataclass
class Round:
    index: int
    role: str
    order: list[str]
    #: broker -> {"tps", "ok", "failed", "p50_ms", "p99_ms", "max_ms", "lag_median_kib", "lag_max_kib", "lag_samples"}
    figures: dict[str, dict[str, float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def lag_figures(lags: list[int]) -> dict[str, float]:
    """Median and maximum of the sampled lags (bytes), in KiB."""
    if not lags:
        return {"lag_samples": 0}
    return {"lag_median_kib": statistics.median(lags) / 1024, "lag_max_kib": max(lags) / 1024,
            "lag_samples": len(lags)}


def summarize(rounds: list[Round]) -> dict[str, dict]:
    """Per role: per broker the spread of each figure over the rounds, and the FerryMQ/Apache throughput
    ratio and p99 difference taken within each round."""
    out: dict[str, dict] = {}
    for role in dict.fromkeys(r.role for r in rounds):
        mine = [r for r in rounds if r.role == role]
        entry: dict[str, dict | None] = {}
        for broker in BROKERS:
            for name in ("tps", "p99_ms", "lag_median_kib", "lag_max_kib"):
                entry[f"{broker}_{name}"] = spread([r.figures[broker][name] for r in mine
                                                    if name in r.figures.get(broker, {})])
        both = [r.figures for r in mine if all(r.figures.get(b, {}).get("tps") for b in BROKERS)]
        entry["tps_ratio"] = spread([f["ferrymq"]["tps"] / f["apache"]["tps"] for f in both])
        entry["p99_added_ms"] = spread([f["ferrymq"]["p99_ms"] - f["apache"]["p99_ms"] for f in both])
        out[role] = entry
    return out


def verdict(summary: dict) -> dict[str, bool | None]:
    ratio = (summary.get("SYNC_MASTER") or {}).get("tps_ratio")
    return {"sync_master_throughput": None if ratio is None else ratio["median"] >= TARGET_SYNC_RATIO}


def _fmt(s: dict | None, unit: str = "", digits: int = 0) -> str:
    if s is None:
        return "-"
    return f"{s['median']:.{digits}f}{unit} ({s['min']:.{digits}f}-{s['max']:.{digits}f})"


def table(summary: dict) -> str:
    lines = ["| role | figure | Apache 5.5.0 | FerryMQ | FerryMQ / Apache |", "|---|---|---|---|---|"]
    for role, e in summary.items():
        lines.append(f"| {role} | sync sends/s | {_fmt(e['apache_tps'])} | {_fmt(e['ferrymq_tps'])} | "
                     f"{_fmt(e['tps_ratio'], 'x', 2)} |")
        lines.append(f"| {role} | p99 ms | {_fmt(e['apache_p99_ms'], '', 1)} | {_fmt(e['ferrymq_p99_ms'], '', 1)} | "
                     f"{_fmt(e['p99_added_ms'], ' ms', 1)} |")
        lines.append(f"| {role} | lag KiB, median | {_fmt(e['apache_lag_median_kib'], '', 1)} | "
                     f"{_fmt(e['ferrymq_lag_median_kib'], '', 1)} | |")
        lines.append(f"| {role} | lag KiB, max | {_fmt(e['apache_lag_max_kib'], '', 1)} | "
                     f"{_fmt(e['ferrymq_lag_max_kib'], '', 1)} | |")
    v = verdict(summary)["sync_master_throughput"]
    if v is not None:
        lines.append(f"\nSYNC_MASTER throughput target >= {TARGET_SYNC_RATIO:.1f}x Apache: {'met' if v else 'missed'}")
    return "\n".join(lines)


# -- the pairs ---------------------------------------------------------------------------------------

def ha_status(master_addr: str) -> HARuntimeInfo | None:
    try:
        answer = admin.call(master_addr, request(RequestCode.GET_BROKER_HA_STATUS), timeout=2.0)
    except OSError:
        return None
    return HARuntimeInfo.decode(answer.body) if answer.code == ResponseCode.SUCCESS else None


def wait_for_slave(master_addr: str, what: str, timeout: float = 90.0) -> None:
    """Until the master's one slave connected and reported (both implementations answer haStatus)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = ha_status(master_addr)
        if info is not None and any(c.slave_ack_offset >= 0 for c in info.ha_connection_info):
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what}: no slave connected to master {master_addr} after {timeout:.0f}s")


class LagSampler:
    """Samples the master's commit-log max offset minus its slave's acknowledged offset on a thread."""

    def __init__(self, master_addr: str, every_s: float):
        self.master_addr = master_addr
        self.every_s = every_s
        self.lags: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="lag-sampler", daemon=True)

    def __enter__(self) -> LagSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        while not self._stop.wait(self.every_s):
            info = ha_status(self.master_addr)
            if info is not None and info.ha_connection_info:
                self.lags.append(max(0, min(c.diff for c in info.ha_connection_info)))


class Pair:
    name: str
    namesrv_addr: str
    master_addr: str

    def start(self) -> None: ...

    def stop(self) -> None: ...


class ApachePair(Pair):
    name = "apache"

    def __init__(self, home: Path, settings: dict[str, object]):
        self.home = home
        self.settings = settings
        self.namesrv: apache.ApacheNamesrv | None = None
        self.brokers: list[apache.ApacheBroker] = []

    def start(self) -> None:
        self.namesrv = apache.ApacheNamesrv.start(self.home / "namesrv")
        self.namesrv_addr = self.namesrv.addr
        for broker_id, extra in ((0, self.settings), (1, {"brokerId": 1, "brokerRole": "SLAVE"})):
            self.brokers.append(apache.ApacheBroker.launch(self.home / f"broker-{broker_id}", self.namesrv_addr,
                                                           cluster=CLUSTER, name=BROKER_NAME, extra=extra))
        for broker in self.brokers:
            broker.wait_ready()
        self.master_addr = self.brokers[0].addr
        wait_for_slave(self.master_addr, "Apache pair")

    def stop(self) -> None:
        for broker in self.brokers:
            broker.stop()
        if self.namesrv is not None:
            self.namesrv.stop()


class FerryPair(Pair):
    name = "ferrymq"

    def __init__(self, home: Path, settings: dict[str, object]):
        self.home = home
        self.settings = settings
        self.children: list[Child] = []

    def _conf(self, name: str, port: int, keys: dict[str, object]) -> Path:
        store = self.home / name / "store"
        store.mkdir(parents=True, exist_ok=True)
        return apache.write_conf(self.home / name / "broker.conf", {
            "brokerClusterName": CLUSTER, "brokerName": BROKER_NAME, "brokerIP1": LOOPBACK, "bindAddress": LOOPBACK,
            "listenPort": port, "haListenPort": port + 1, "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog", "flushDiskType": "ASYNC_FLUSH",
            "autoCreateTopicEnable": "true", "autoCreateSubscriptionGroup": "true",
            "httpListenPort": 0, "mqttListenPort": 0, "grpcListenPort": 0, **keys})

    def start(self) -> None:
        ns_port, port, slave_port = free_port(), free_port(also_free=(1,)), free_port(also_free=(1,))
        self.namesrv_addr = f"{LOOPBACK}:{ns_port}"
        self.master_addr = f"{LOOPBACK}:{port}"
        master = self._conf("master", port, {"namesrvListenPort": ns_port, "namesrvAddr": self.namesrv_addr,
                                             "kvConfigPath": self.home / "namesrv" / "kvConfig.json",
                                             "configStorePath": self.home / "namesrv" / "namesrv.properties",
                                             **self.settings})
        slave = self._conf("slave", slave_port, {"namesrvAddr": self.namesrv_addr, "brokerId": 1,
                                                 "brokerRole": "SLAVE"})
        exe = ferrymq_executable()
        self.children.append(Child("FerryMQ master", [exe, "standalone", "-c", str(master)],
                                   self.home / "master.out").start())
        self.children[0].wait_until(lambda: ha_status(self.master_addr) is not None, "serving", apache.BOOT_TIMEOUT)
        self.children.append(Child("FerryMQ slave", [exe, "broker", "-c", str(slave)], self.home / "slave.out").start())
        wait_for_slave(self.master_addr, "FerryMQ pair")

    def stop(self) -> None:
        for child in self.children:
            child.kill()


def make_pair(broker: str, home: Path, settings: dict[str, object]) -> Pair:
    return (ApachePair if broker == "apache" else FerryPair)(home, settings)


class Bench:
    """Runs every role's rounds: ``round(r)`` picks the role (the rounds of a role run together, both pairs
    up), starting the role's pairs on its first round and stopping the previous role's."""

    def __init__(self, plan: Plan, home: Path, progress=print):
        self.plan = plan
        self.home = home
        self.progress = progress
        self.tools: javatools.LoadTools | None = None
        self.pairs: dict[str, Pair] = {}
        self.role: str | None = None

    def start(self) -> None:
        self.tools = javatools.load_tools()

    def _start_role(self, role: str) -> None:
        self._stop_pairs()
        self.role = role
        settings = role_settings(role, self.plan.slave_timeout_ms)
        for broker in self.plan.brokers:
            self.progress(f"starting the {broker} pair ({role})", flush=True)
            pair = make_pair(broker, self.home / f"{role.lower()}-{broker}", settings)
            self.pairs[broker] = pair
            try:
                pair.start()
            except BaseException:
                self._stop_pairs()
                raise

    def _stop_pairs(self) -> None:
        for pair in self.pairs.values():
            pair.stop()
        self.pairs = {}

    def stop(self) -> None:
        self._stop_pairs()

    def run_load(self, pair: Pair, label: str) -> dict[str, float]:
        p = self.plan
        seconds = int(p.warmup_s + p.seconds)
        argv = self.tools.probe(self.home, "sync", namesrv=pair.namesrv_addr, topic=f"ha_bench_{label}",
                                seconds=seconds, measure=int(p.seconds), threads=p.threads, size=p.message_size)
        with LagSampler(pair.master_addr, p.lag_every_s) as lag:
            text = javatools.run_to_end("sync", argv, self.home / f"sync-{pair.name}-{label}.log", seconds + 60)
        res = parse.result(text, f"{pair.name} sync")
        figures = {k: float(res[k]) for k in ("tps", "ok", "failed", "p50_ms", "p99_ms", "max_ms")}
        return {**figures, **lag_figures(lag.lags)}

    def round(self, r: int) -> Round:
        per_role = self.plan.rounds
        role = self.plan.roles[r // per_role]
        if role != self.role:
            self._start_role(role)
        order = list(self.plan.brokers) if r % 2 == 0 else list(reversed(self.plan.brokers))
        done = Round(r, role, order)
        for broker in order:
            try:
                done.figures[broker] = self.run_load(self.pairs[broker], f"{role.lower()}_r{r}")
            except (RuntimeError, ValueError, OSError) as exc:
                done.errors[broker] = f"{type(exc).__name__}: {exc}"
        return done


def describe(done: Round) -> str:
    parts = [f"{done.role}"]
    for broker in done.order:
        f = done.figures.get(broker)
        if f is None:
            parts.append(f"{broker} failed ({done.errors.get(broker, '?')[:200]})")
        else:
            parts.append(f"{broker} {f['tps']:.0f}/s p99 {f['p99_ms']:.1f} ms lag {f.get('lag_median_kib', 0):.1f} KiB")
    return ", ".join(parts)


# -- failover under Apache's controller -------------------------------------------------------------

#: the brokers' controller timings (compat_tests/test_ha_controller.py's): a master silent for 3 s is counted dead
#: (a killed one at once: the controller sees its connection close)
CONTROLLER_TIMING = {"brokerHeartbeatInterval": 500, "syncBrokerMetadataPeriod": 1000,
                     "controllerHeartBeatTimeoutMills": 3000, "checkSyncStateSetPeriod": 1000}
FAILOVER_GROUPS = {"apache": "fo-apache", "ferrymq": "fo-ferry"}
FAILOVER_TOPIC = "HaFailover"
TARGET_FAILOVER_RATIO = 1.0


@dataclass(frozen=True)
class FailoverPlan:
    rounds: int = 20
    #: seconds of load before each kill
    load_s: float = 1.0
    #: acknowledged sends through the new master before a round's messages are counted
    after_sends: int = 20
    brokers: tuple[str, ...] = BROKERS


@dataclass
class FailoverRound:
    index: int
    order: list[str]
    #: broker -> {"failover_s", "acked", "lost", "duplicated"}
    figures: dict[str, dict[str, float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summarize_failover(rounds: list[FailoverRound]) -> dict[str, dict]:
    """Per broker the failover time's median and p90 and the acknowledged messages lost and duplicated
    over every round; the FerryMQ/Apache ratio of the medians."""
    out: dict[str, dict] = {}
    for broker in BROKERS:
        mine = [r.figures[broker] for r in rounds if broker in r.figures]
        times = [f["failover_s"] for f in mine]
        out[broker] = None if not mine else {
            "rounds": len(mine), "failover_median_s": statistics.median(times),
            "failover_p90_s": percentile(times, 0.9), "failover_max_s": max(times),
            "acked": sum(f["acked"] for f in mine), "lost": sum(f["lost"] for f in mine),
            "duplicated": sum(f["duplicated"] for f in mine),
            "failed_rounds": sum(broker in r.errors for r in rounds)}
    a, f = out.get("apache"), out.get("ferrymq")
    out["ratio"] = None if not (a and f) else {
        "failover_median": f["failover_median_s"] / a["failover_median_s"],
        "failover_p90": f["failover_p90_s"] / a["failover_p90_s"]}
    return out


def failover_verdict(summary: dict) -> dict[str, bool | None]:
    ferry, ratio = summary.get("ferrymq"), summary.get("ratio")
    return {"failover_time": None if ratio is None else ratio["failover_median"] <= TARGET_FAILOVER_RATIO,
            "no_acked_message_lost": None if ferry is None else ferry["lost"] == 0 and ferry["duplicated"] == 0
            and not ferry["failed_rounds"]}


def failover_table(summary: dict) -> str:
    def cell(broker: str, key: str, fmt: str) -> str:
        entry = summary.get(broker)
        return "-" if entry is None else format(entry[key], fmt)

    ratio = summary.get("ratio") or {}
    lines = ["| figure | Apache 5.5.0 | FerryMQ | FerryMQ / Apache |", "|---|---:|---:|---:|",
             f"| kill rounds | {cell('apache', 'rounds', 'd')} | {cell('ferrymq', 'rounds', 'd')} | |"]
    for label, key, rkey in (("failover s, median", "failover_median_s", "failover_median"),
                             ("failover s, p90", "failover_p90_s", "failover_p90"),
                             ("failover s, max", "failover_max_s", None)):
        r = ratio.get(rkey) if rkey else None
        lines.append(f"| {label} | {cell('apache', key, '.2f')} | {cell('ferrymq', key, '.2f')} | "
                     f"{'' if r is None else f'{r:.2f}x'} |")
    for label, key in (("acknowledged sends", "acked"), ("acknowledged, lost", "lost"),
                       ("acknowledged, stored twice", "duplicated"), ("rounds failed", "failed_rounds")):
        lines.append(f"| {label} | {cell('apache', key, 'd')} | {cell('ferrymq', key, 'd')} | |")
    v = failover_verdict(summary)
    if v["failover_time"] is not None:
        lines.append(f"\nfailover <= Apache's: {'met' if v['failover_time'] else 'missed'}; "
                     f"0 acknowledged lost or stored twice: {'met' if v['no_acked_message_lost'] else 'missed'}")
    return "\n".join(lines)


def describe_failover(done: FailoverRound) -> str:
    parts = []
    for broker in done.order:
        f = done.figures.get(broker)
        parts.append(f"{broker} failed ({done.errors.get(broker, '?')[:300]})" if f is None else
                     f"{broker} failover {f['failover_s']:.2f} s, {f['acked']:.0f} acked, {f['lost']:.0f} lost, "
                     f"{f['duplicated']:.0f} twice")
    return ", ".join(parts)


class FerryControllerBroker(BrokerProcess):
    """``ferrymq broker`` in controller mode: ready once the name server lists it in its group."""

    ready_timeout = 90.0

    def _registered(self, _broker_id: int) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log[-3000:]}")
        return self.addr in group_route(self.namesrv_addr, str(self.conf["brokerName"])).values()


def group_route(namesrv_addr: str, name: str) -> dict[int, str]:
    try:
        data = admin.cluster_info(namesrv_addr).broker_addr_table.get(name)
    except OSError:
        return {}
    return dict(data.broker_addrs) if data is not None else {}


def sync_state_set(controller_addr: str, name: str) -> set[int]:
    reply = admin.call(controller_addr, request(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": name}))
    return set(SyncStateSet.decode(reply.body).sync_state_set) if reply.code == ResponseCode.SUCCESS else set()


class Sender(threading.Thread):
    """Sends numbered bodies one at a time (SEND_MESSAGE_V2, as a producer) to the group's master as the
    name server routes it, asking the route again after any failure. A failed send is not repeated: the
    next one has the next number, so a body stored twice is the brokers' doing."""

    def __init__(self, namesrv_addr: str, name: str, prefix: str):
        super().__init__(name=f"sender-{prefix}", daemon=True)
        self.namesrv_addr, self.group, self.prefix = namesrv_addr, name, prefix
        self.acked: set[str] = set()
        #: (monotonic time, broker address) of each acknowledged send
        self.acked_at: list[tuple[float, str]] = []
        self.halt = threading.Event()

    def run(self) -> None:
        addr, number = None, 0
        while not self.halt.is_set():
            if addr is None:
                addr = group_route(self.namesrv_addr, self.group).get(0)
                if addr is None:
                    time.sleep(0.02)
                    continue
            body = f"{self.prefix} #{number}"
            number += 1
            try:
                ok = send(addr, FAILOVER_TOPIC, body.encode()).code == ResponseCode.SUCCESS
            except OSError:
                ok = False
            if ok:
                self.acked.add(body)
                self.acked_at.append((time.monotonic(), addr))
            else:
                addr = None
                time.sleep(0.02)

    def stop(self) -> None:
        self.halt.set()
        self.join(10)


def stored_bodies(store: Path, end: int, prefix: str) -> Counter[str]:
    found: Counter[str] = Counter()
    for msg in iter_records(commitlog_bytes(store / "commitlog", 0, end)):
        if msg.topic == FAILOVER_TOPIC and msg.body.startswith(prefix.encode()):
            found[msg.body.decode()] += 1
    return found


class FailoverBench:
    """One Apache name server with its embedded controller; per broker kind a group of two brokers in
    controller mode (allAckInSyncStateSet, SYNC_FLUSH). Each round kills each group's master in turn."""

    def __init__(self, plan: FailoverPlan, home: Path, progress=print):
        self.plan = plan
        self.home = home
        self.progress = progress
        self.controller: apache.ApacheNamesrv | None = None
        self.controller_addr = ""
        self.brokers: dict[str, list] = {}

    def settings(self, broker: str) -> dict[str, object]:
        return {"brokerClusterName": CLUSTER, "brokerName": FAILOVER_GROUPS[broker], "enableControllerMode": "true",
                "controllerAddr": self.controller_addr, "allAckInSyncStateSet": "true", "flushDiskType": "SYNC_FLUSH",
                "mappedFileSizeCommitLog": 64 * 1024 * 1024, **CONTROLLER_TIMING}

    def launch(self, broker: str, home: Path):
        if broker == "apache":
            return apache.ApacheBroker.launch(home, self.controller.addr, cluster=CLUSTER, name=FAILOVER_GROUPS[broker],
                                              extra=self.settings(broker))
        return FerryControllerBroker(home, self.controller.addr, self.settings(broker)).start()

    def start(self) -> None:
        self.controller = apache.ApacheNamesrv.launch_with_controller(self.home / "controller", "ferrymq-bench")
        self.controller.wait_ready()
        self.controller_addr = self.controller.controller_addr
        for broker in self.plan.brokers:
            self.progress(f"starting the {broker} group", flush=True)
            self.brokers[broker] = [self.launch(broker, self.home / f"{broker}-{i}") for i in range(2)]
        for broker, members in self.brokers.items():
            for member in members:
                if isinstance(member, apache.ApacheBroker):
                    member.wait_ready()
            route = self.steady(broker)
            for member in members:
                admin.create_topic(member.addr, FAILOVER_TOPIC, 4)
            self.progress(f"{broker} group: {route}", flush=True)

    def steady(self, broker: str, timeout: float = 300.0) -> dict[int, str]:
        """The group's route once it has a master and a slave both in the sync state set; an Apache
        broker whose JVM died on the way (a boot that timed out) is launched again."""
        name = FAILOVER_GROUPS[broker]
        members = self.brokers[broker]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for i, member in enumerate(members):
                if isinstance(member, apache.ApacheBroker) and not member.child.alive():
                    self.progress(f"{broker}: {member.addr} died before joining; launching it again", flush=True)
                    members[i] = self.launch(broker, member.home)
            route = group_route(self.controller.addr, name)
            if 0 in route and len(route) == 2 and len(sync_state_set(self.controller_addr, name)) == 2:
                return route
            time.sleep(0.1)
        raise RuntimeError(f"{broker}: no master and in-sync slave after {timeout:.0f} s")

    def kill_round(self, broker: str, r: int) -> dict[str, float]:
        """SIGKILL the master under load; the time to the first send the new master acknowledges; then count
        the round's acknowledged bodies in the new master's log, and start the old master again."""
        route = self.steady(broker)
        members = self.brokers[broker]
        master = next(m for m in members if m.addr == route[0])
        promoted_addr = next(a for i, a in route.items() if i)
        prefix = f"{broker} r{r}"
        sender = Sender(self.controller.addr, FAILOVER_GROUPS[broker], prefix)
        sender.start()
        try:
            time.sleep(self.plan.load_s)
            killed_at = time.monotonic()
            master.child.kill() if isinstance(master, apache.ApacheBroker) else master.kill()
            deadline = killed_at + 60

            def through_new_master() -> list[float]:
                return [t for t, addr in sender.acked_at if addr == promoted_addr]

            while not through_new_master():
                if time.monotonic() > deadline:
                    raise RuntimeError("no acknowledged send through the new master within 60 s of the kill")
                time.sleep(0.005)
            first = through_new_master()[0]
            while len(through_new_master()) < self.plan.after_sends:
                if time.monotonic() > deadline:
                    raise RuntimeError("the new master stopped taking sends")
                time.sleep(0.01)
        finally:
            sender.stop()
        promoted = next(m for m in members if m.addr == promoted_addr)
        stored = stored_bodies(promoted.store, commitlog_range(promoted_addr)[1], prefix)
        # an Apache JVM boots while the other group runs its round; the next round waits for it (steady)
        members[members.index(master)] = self.launch(broker, master.home)
        return {"failover_s": first - killed_at, "acked": len(sender.acked),
                "lost": len(sender.acked - set(stored)), "duplicated": sum(1 for n in stored.values() if n > 1)}

    def round(self, r: int) -> FailoverRound:
        order = list(self.plan.brokers) if r % 2 == 0 else list(reversed(self.plan.brokers))
        done = FailoverRound(r, order)
        for broker in order:
            try:
                done.figures[broker] = self.kill_round(broker, r)
            except (RuntimeError, ValueError, OSError, TimeoutError) as exc:
                done.errors[broker] = f"{type(exc).__name__}: {exc}"
        return done

    def stop(self) -> None:
        for members in self.brokers.values():
            for member in members:
                member.stop() if isinstance(member, apache.ApacheBroker) else member.kill()
        if self.controller is not None:
            self.controller.stop()


def main_failover(args: argparse.Namespace, argv: list[str] | None) -> dict:
    overrides: dict[str, object] = {}
    if args.rounds is not None:
        overrides["rounds"] = args.rounds
    elif args.quick:
        overrides["rounds"] = 3
    if args.brokers:
        overrides["brokers"] = tuple(b.strip() for b in args.brokers.split(",") if b.strip())
    plan = replace(FailoverPlan(), **overrides)
    return run_rounds("ha_bench", lambda p, home: FailoverBench(p, home), plan, describe_failover, args, argv,
                      summarize_failover, failover_table, failover_verdict,
                      meta=lambda _bench: {"apache_version": toolchain.ROCKETMQ_5, "mode": "failover"})


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ha_bench", description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="3 rounds of 10 s per role (the default)")
    size.add_argument("--full", action="store_true", help="5 rounds of 30 s per role")
    parser.add_argument("--rounds", type=int, help="rounds per role")
    parser.add_argument("--seconds", type=float, help="measured seconds per run")
    parser.add_argument("--warmup", type=float, help="untimed seconds before them")
    parser.add_argument("--threads", type=int, help="sync senders")
    parser.add_argument("--brokers", help="comma-separated: apache,ferrymq")
    parser.add_argument("--roles", help="comma-separated: ASYNC_MASTER,SYNC_MASTER")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (stores, logs)")
    parser.add_argument("--failover", action="store_true",
                        help="kill rounds under Apache's controller instead (20 rounds; --quick: 3)")
    args = parser.parse_args([] if argv is None else argv)
    if args.failover:
        return main_failover(args, argv)
    overrides: dict[str, object] = {}
    for name, value in (("rounds", args.rounds), ("seconds", args.seconds), ("warmup_s", args.warmup),
                        ("threads", args.threads)):
        if value is not None:
            overrides[name] = value
    if args.brokers:
        overrides["brokers"] = tuple(b.strip() for b in args.brokers.split(",") if b.strip())
    if args.roles:
        overrides["roles"] = tuple(r.strip().upper() for r in args.roles.split(",") if r.strip())
    plan = (Plan.full if args.full else Plan.quick)(**overrides)
    for broker in plan.brokers:
        if broker not in BROKERS:
            parser.error(f"unknown broker {broker!r}; choose from {', '.join(BROKERS)}")
    for role in plan.roles:
        if role not in ROLES:
            parser.error(f"unknown role {role!r}; choose from {', '.join(ROLES)}")
    all_rounds = replace(plan, rounds=plan.rounds * len(plan.roles))
    per_role = plan

    def make_bench(_plan: Plan, home: Path) -> Bench:
        return Bench(per_role, home)

    return run_rounds("ha_bench", make_bench, all_rounds, describe, args, argv, summarize, table, verdict,
                      meta=lambda _bench: {"apache_version": toolchain.ROCKETMQ_5})


if __name__ == "__main__":
    main(sys.argv[1:])
