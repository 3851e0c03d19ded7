"""Cluster commands: ``clusterList``, and the lookups of a cluster's brokers that other commands share
(mqadmin's ``CommandUtil``)."""

from __future__ import annotations

import argparse
import time

from twisted.internet import defer, task

from ferrymq.wire.bodies import BrokerData, ClusterInfo

from .command import CommandError, Context, Opt, command, int_option
from .java_text import NO_CLUSTER, java_bool

MASTER_ID = 0


def select_addr(broker: BrokerData) -> str | None:
    """The broker's master, else any of its slaves (mqadmin's ``BrokerData.selectBrokerAddr``)."""
    return broker.broker_addrs.get(MASTER_ID) or next(iter(broker.broker_addrs.values()), None)


def master_addrs(info: ClusterInfo, cluster: str) -> list[str] | None:
    """Master addresses of the cluster's brokers (by broker name), or None for an unknown cluster."""
    if cluster not in info.cluster_addr_table:
        return None
    brokers = (info.broker_addr_table.get(name) for name in sorted(info.cluster_addr_table[cluster]))
    return [b.broker_addrs[MASTER_ID] for b in brokers if b is not None and MASTER_ID in b.broker_addrs]


def all_addrs(info: ClusterInfo, cluster: str) -> list[str] | None:
    """Every address (masters and slaves) of the cluster's brokers, or None for an unknown cluster."""
    if cluster not in info.cluster_addr_table:
        return None
    addrs: list[str] = []
    for name in sorted(info.cluster_addr_table[cluster]):
        broker = info.broker_addr_table.get(name)
        if broker is not None:
            addrs.extend(addr for _, addr in sorted(broker.broker_addrs.items()))
    return addrs


@defer.inlineCallbacks
def cluster_addrs(ctx: Context, cluster: str, *, slaves: bool = False):
    """The cluster's master addresses (with ``slaves``, every address); for an unknown cluster none,
    after mqadmin's error line."""
    info = yield ctx.admin.namesrv.get_cluster_info()
    addrs = (all_addrs if slaves else master_addrs)(info, cluster)
    if addrs is None:
        ctx.printf("%s", NO_CLUSTER)
    return addrs or []


@defer.inlineCallbacks
def on_each(ctx: Context, addrs, call, done: str):
    """``call(addr)`` on each broker address, printing ``done % addr`` after each success; one broker
    refusing does not stop the others (its error goes to stderr)."""
    for addr in addrs:
        try:
            yield call(addr)
        except Exception as exc:
            ctx.err.write(f"{addr}: {exc}\n")
            continue
        ctx.printf(done, addr)


def masters_and_slaves(info: ClusterInfo, cluster: str) -> dict[str | None, list[str]] | None:
    """Each master address of the cluster with its slaves' (key None: slaves without a master), or None
    for an unknown cluster."""
    if cluster not in info.cluster_addr_table:
        return None
    table: dict[str | None, list[str]] = {}
    for name in sorted(info.cluster_addr_table[cluster]):
        broker = info.broker_addr_table.get(name)
        if broker is None:
            continue
        master = broker.broker_addrs.get(MASTER_ID)
        slaves = table.setdefault(master, [])
        slaves.extend(addr for bid, addr in sorted(broker.broker_addrs.items()) if bid != MASTER_ID)
    return table


def broker_name_of(info: ClusterInfo, addr: str) -> str:
    for name, broker in info.broker_addr_table.items():
        if addr in broker.broker_addrs.values():
            return name
    raise CommandError(f"no broker at {addr} is registered with the name server")


# ---------------------------------------------------------------- clusterList

BASE_HEADER = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %-11s  %-12s  %-8s  %-10s\n"
BASE_ROW = "%-22s  %-22s  %-4s  %-22s %-16s  %16s  %30s  %-22s  %11s  %-12s  %-8s  %10s\n"
MORE_HEADER = "%-16s  %-32s %14s %14s %14s %14s\n"
MORE_ROW = "%-16s  %-32s %14d %14d %14d %14d\n"


@command("clusterList", "List cluster infos.",
         Opt("m", "moreStats", "Print more stats", arg=False),
         Opt("i", "interval", "specify intervals numbers, it is in seconds"),
         Opt("c", "clusterName", "which cluster"))
@defer.inlineCallbacks
def cluster_list(ctx: Context, opts: argparse.Namespace):
    from twisted.internet import reactor

    interval = int_option(opts, "interval", 0)
    first = True
    while first or interval:
        if not first:
            yield task.deferLater(reactor, interval, lambda: None)
        first = False
        info = yield ctx.admin.namesrv.get_cluster_info()
        clusters = [opts.clusterName] if opts.clusterName else sorted(info.cluster_addr_table)
        print_rows = _more_stats if opts.moreStats else _base_info
        yield print_rows(ctx, info, clusters)


def _brokers(info: ClusterInfo, clusters: list[str]):
    """(cluster, broker name, broker id, address) in mqadmin's order: brokers by name, then by id."""
    for cluster in clusters:
        for name in sorted(info.cluster_addr_table.get(cluster, ())):
            broker = info.broker_addr_table.get(name)
            if broker is not None:
                for bid, addr in sorted(broker.broker_addrs.items()):
                    yield cluster, name, bid, addr


@defer.inlineCallbacks
def _runtime_stats(ctx: Context, addr: str):
    """The broker's runtime info, or None when it does not answer (the row then shows defaults)."""
    try:
        return (yield ctx.admin.api.get_runtime_info(addr))
    except Exception as exc:  # one broker down must not hide the others
        ctx.err.write(f"{addr}: {exc}\n")
        return None


@defer.inlineCallbacks
def _base_info(ctx: Context, info: ClusterInfo, clusters: list[str]):
    ctx.printf(BASE_HEADER, "#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)",
               "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED")
    for cluster, name, bid, addr in _brokers(info, clusters):
        stats = yield _runtime_stats(ctx, addr)
        ctx.printf(BASE_ROW, cluster, name, bid, addr, *base_columns(stats, time.time()))


def base_columns(stats: dict[str, str] | None, now: float) -> tuple[str, ...]:
    """clusterList's columns from #Version on, from a broker's runtime info (None: it did not answer)."""
    def get(key: str, default: str = "null") -> str:
        return "" if stats is None else stats.get(key, default)

    def first_number(key: str) -> float:
        value = get(key, "").strip()
        return float(value.split(" ")[0]) if value else 0.0

    timer = (0, 0, 0, 0.0, 0.0)
    try:
        timer = (int(get("timerReadBehind")), int(get("timerOffsetBehind")), int(get("timerCongestNum")),
                 float(get("timerEnqueueTps")), float(get("timerDequeueTps")))
    except ValueError:
        pass
    earliest = get("earliestMessageTimeStamp")
    hours = (now * 1000 - int(earliest)) / 3_600_000 if earliest and earliest != "null" else 0.0
    ratio = get("commitLogDiskRatio")
    space = float(ratio) if ratio and ratio != "null" else 0.0
    return (
        get("brokerVersionDesc"),
        "%9.2f(%s,%sms)" % (first_number("putTps"), get("sendThreadPoolQueueSize"),
                            get("sendThreadPoolQueueHeadWaitTimeMills")),
        "%9.2f(%s,%sms|%s,%sms)" % (first_number("getTransferredTps"), get("pullThreadPoolQueueSize"),
                                    get("pullThreadPoolQueueHeadWaitTimeMills"), get("ackThreadPoolQueueSize", "N"),
                                    get("ackThreadPoolQueueHeadWaitTimeMills", "N")),
        "%d-%d(%.1fw, %.1f, %.1f)" % (timer[0], timer[1], timer[2] / 10000.0, timer[3], timer[4]),
        get("pageCacheLockTimeMills"),
        "%2.2f" % hours,
        "%.4f" % space,
        java_bool(stats is not None and get("brokerActive").lower() == "true"),
    )


@defer.inlineCallbacks
def _more_stats(ctx: Context, info: ClusterInfo, clusters: list[str]):
    ctx.printf(MORE_HEADER, "#Cluster Name", "#Broker Name", "#InTotalYest", "#OutTotalYest", "#InTotalToday",
               "#OutTotalToday")
    for cluster, name, _, addr in _brokers(info, clusters):
        stats = yield _runtime_stats(ctx, addr)
        ctx.printf(MORE_ROW, cluster, name, *more_columns(stats))


def more_columns(stats: dict[str, str] | None) -> tuple[int, int, int, int]:
    """Messages in and out yesterday and today (zeros when the broker did not report them)."""
    try:
        put = [int(stats[f"msgPutTotal{when}"]) for when in ("YesterdayMorning", "TodayMorning", "TodayNow")]
        got = [int(stats[f"msgGetTotal{when}"]) for when in ("YesterdayMorning", "TodayMorning", "TodayNow")]
    except (TypeError, KeyError, ValueError):
        return 0, 0, 0, 0
    return put[1] - put[0], got[1] - got[0], put[2] - put[1], got[2] - got[1]


def print_unknown_cluster(ctx: Context) -> None:
    ctx.printf("%s", NO_CLUSTER)
