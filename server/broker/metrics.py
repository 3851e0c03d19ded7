"""The broker's figures as Prometheus metric families, named as rocketmq-exporter names them.

Nothing here runs per message: every figure is read at scrape time from what the broker keeps anyway
(:class:`~.stats.BrokerStats`, the consume queues' max offsets, the committed and pulled offsets, the
stall watch, the commit log's flush histogram). Figures rocketmq-exporter has keep its names and labels,
so dashboards built for it work; the others are ``ferrymq_*``. docs/metrics.md lists them.

:meth:`BrokerMetrics.collect` must run on the reactor thread, which owns the broker's tables: they are
plain dicts that the reactor changes between any two bytecodes, so another thread iterating them could
fail ("dictionary changed size during iteration") or read a half-made change. The HTTP listener's thread
asks the reactor for the families (:meth:`BrokerMetrics.collect_from_thread`) and renders them itself:
the reactor spends a walk over the topics' queues and the groups' offsets per scrape, the text rendering
is not its work.

The per-topic and per-group TPS gauges are the rate since the previous scrape (the exporter's are the
broker's one-minute average, which FerryMQ does not keep per topic: counting per topic would be work per
message). The first scrape reports 0. ``rate()`` over the ``*_offset`` gauges gives the same figure over
any window.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import enum
import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily, Metric

from ferrymq.remoting import RemotingServer
from ferrymq.remoting.latency import BOUNDS_MS, SAMPLE_EVERY_READS, RequestLatency
from ferrymq.wire import topics as names
from ferrymq.wire.codes import CURRENT_VERSION, CURRENT_VERSION_DESC, RequestCode, ResponseCode

from .context import BrokerContext
from .offsets import TOPIC_GROUP_SEPARATOR
from .stats import WINDOWS, disk_space

#: rocketmq-exporter's label sets
BROKER_LABELS = ("cluster", "brokerIP", "broker")
RUNTIME_LABELS = ("cluster", "brokerIP", "brokerHost", "des", "boottime", "broker_version")
TOPIC_LABELS = ("cluster", "broker", "topic")
DLQ_LABELS = ("cluster", "broker", "group")
GROUP_LABELS = ("cluster", "broker", "topic", "group")
DIFF_LABELS = ("group", "topic", "countOfOnlineConsumers", "msgModel")
QUEUE_LABELS = ("cluster", "broker", "topic", "group", "queueid")
#: ``caddr`` and ``localaddr``: the consumers' addresses and client ids, comma-separated
GROUP_COUNT_LABELS = ("caddr", "localaddr", "group")
PRODUCER_COUNT_LABELS = ("cluster", "broker", "group")
#: Apache's labels of ``rocketmq_rpc_latency``
RPC_LABELS = ("protocol_type", "request_code", "response_code", "is_long_polling")
#: MessageModel ordinals, as the exporter writes them in ``msgModel``
_MODEL_ORDINAL = {"BROADCASTING": "0", "CLUSTERING": "1"}


class Rates:
    """Totals per key between two scrapes: the rate since the previous one. On the first scrape every
    rate is 0, since the totals then may have grown before the broker started. A key new since the
    previous scrape counts from 0 with ``new_from_zero`` (a topic created meanwhile starts empty), else
    its rate is 0 until the next scrape (a group's pull offsets appear at its first pull, at the offset
    it had reached before)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, *, new_from_zero: bool):
        self._clock = clock
        self._new_from_zero = new_from_zero
        self._previous: tuple[float, dict[Any, int]] | None = None

    def update(self, totals: dict[Any, int]) -> dict[Any, float]:
        now, previous = self._clock(), self._previous
        self._previous = (now, totals)
        if previous is None or now <= previous[0]:
            return dict.fromkeys(totals, 0.0)
        then, before = previous
        rates = {}
        for key, total in totals.items():
            base = before.get(key, 0 if self._new_from_zero else total)
            rates[key] = max(0, total - base) / (now - then)
        return rates


class BrokerMetrics:
    """The figures of one broker. ``server`` and ``stall_watch`` are read when given: the broker's
    :class:`~ferrymq.remoting.RemotingServer` (its connections and what its limits refused) and the
    reactor's :class:`~ferrymq.server.stall_watch.StallWatch`."""

    def __init__(self, ctx: BrokerContext, server: RemotingServer | None = None,
                 stall_watch: Any = None, clock: Callable[[], float] = time.monotonic):
        self.ctx = ctx
        self.server = server
        self.stall_watch = stall_watch
        self._topic_rates = Rates(clock, new_from_zero=True)
        self._group_rates = Rates(clock, new_from_zero=False)

    async def collect_from_thread(self, timeout: float) -> list[Metric]:
        """The families, collected by the reactor for a caller on an asyncio loop in another thread;
        TimeoutError when the reactor does not get to it within ``timeout`` s (it is stalled)."""
        future: concurrent.futures.Future[list[Metric]] = concurrent.futures.Future()

        def run() -> None:
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(self.collect())
                except BaseException as exc:  # noqa: BLE001 - handed to the waiting thread
                    future.set_exception(exc)

        self.ctx.reactor.callFromThread(run)
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout)

    def collect(self) -> list[Metric]:
        """Every family, read now (on the reactor thread)."""
        return [*self._broker(), *self._topics(), *self._groups(), *self._clients(), *self._process()]

    # ------------------------------------------------------------------ broker-wide

    def _identity(self) -> tuple[str, str, str]:
        config = self.ctx.config
        return config.brokerClusterName, self.ctx.broker_addr, config.brokerName

    def _broker(self) -> Iterable[Metric]:
        ctx, stats, store = self.ctx, self.ctx.stats, self.ctx.store
        cluster, addr, broker = self._identity()
        labels = [cluster, addr, broker]
        yield _gauge("rocketmq_broker_tps", "Messages put per second (one-minute average).", BROKER_LABELS,
                     [(labels, stats.put.tps(60))])
        yield _gauge("rocketmq_broker_qps", "Messages got per second (one-minute average).", BROKER_LABELS,
                     [(labels, stats.get_transferred.tps(60))])

        runtime = [cluster, addr, broker, CURRENT_VERSION_DESC, str(stats.boot_ms), str(CURRENT_VERSION)]
        disk = disk_space(ctx.config.storePathRootDir)
        earliest = store.earliest_message_time()
        figures: dict[str, tuple[str, float]] = {
            "msg_put_total_today_now": ("Messages put since the broker started.", stats.put.total),
            "msg_gettotal_today_now": ("Messages got since the broker started.", stats.get_transferred.total),
            "msg_puttotal_todaymorning": ("Messages put as of this midnight.", stats.put_today_morning),
            "msg_puttotal_yesterdaymorning": ("Messages put as of last midnight.", stats.put_yesterday_morning),
            "msg_gettotal_todaymorning": ("Messages got as of this midnight.", stats.get_today_morning),
            "msg_gettotal_yesterdaymorning": ("Messages got as of last midnight.", stats.get_yesterday_morning),
            "commitlog_disk_ratio": ("Share of the store's disk in use.", disk.used_ratio),
            "consumequeue_disk_ratio": ("Share of the store's disk in use.", disk.used_ratio),
            "commitlogdir_capacity_total": ("Bytes of the store's disk.", disk.total),
            "commitlogdir_capacity_free": ("Bytes of the store's disk still free.", disk.free),
            "commitlog_maxoffset": ("Commit-log offset the next message is written at.",
                                    store.commitlog_max_offset()),
            "commitlog_minoffset": ("First commit-log offset still stored.", store.commitlog_min_offset()),
            "earliest_message_timestamp": ("Store time (ms) of the oldest message kept.", max(0, earliest)),
        }
        for window in WINDOWS:
            found, miss = stats.get_found.tps(window), stats.get_miss.tps(window)
            figures[f"put_tps{window}"] = (f"Messages put per second over {window} s.", stats.put.tps(window))
            figures[f"getfound_tps{window}"] = (f"Pulls that found messages per second over {window} s.", found)
            figures[f"getmiss_tps{window}"] = (f"Pulls that found none per second over {window} s.", miss)
            figures[f"gettotal_tps{window}"] = (f"Pulls per second over {window} s.", found + miss)
            figures[f"gettransfered_tps{window}"] = (f"Messages got per second over {window} s.",
                                                     stats.get_transferred.tps(window))
        for name, (doc, value) in figures.items():
            yield _gauge(f"rocketmq_brokeruntime_{name}", doc, RUNTIME_LABELS, [(runtime, value)])

        flush = store.commitlog_flush_times()
        family = HistogramMetricFamily("ferrymq_commitlog_flush_seconds",
                                       "How long the commit-log flushes (fsync) that wrote data took.",
                                       labels=BROKER_LABELS)
        family.add_metric(labels, flush.cumulative(), flush.total)
        yield family

    # ------------------------------------------------------------------ topics

    def _topics(self) -> Iterable[Metric]:
        """The sum of each topic's queues' max offsets: messages put to it while its queues last."""
        store = self.ctx.store
        cluster, _addr, broker = self._identity()
        totals: dict[str, int] = {}
        for topic, config in list(self.ctx.topics.table.items()):
            if names.is_system_topic(topic):
                continue
            queues = max(config.read_queue_nums, config.write_queue_nums)
            totals[topic] = sum(max(0, store.get_max_offset(topic, qid)) for qid in range(queues))
        rates = self._topic_rates.update(totals)
        offsets = _gauge("rocketmq_producer_offset", "Messages put to the topic (sum of its queues' max offsets).",
                         TOPIC_LABELS)
        retry = _gauge("rocketmq_topic_retry_offset", "Messages put to the retry topic.", TOPIC_LABELS)
        dlq = _gauge("rocketmq_topic_dlq_offset", "Messages put to the group's dead-letter topic.", DLQ_LABELS)
        tps = _gauge("rocketmq_producer_tps", "Messages put to the topic per second since the previous scrape.",
                     TOPIC_LABELS)
        for topic, total in totals.items():
            if topic.startswith(names.DLQ_GROUP_TOPIC_PREFIX):
                dlq.add_metric([cluster, broker, topic[len(names.DLQ_GROUP_TOPIC_PREFIX):]], total)
                continue
            (retry if topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX) else offsets).add_metric(
                [cluster, broker, topic], total)
            tps.add_metric([cluster, broker, topic], rates[topic])
        return [offsets, retry, dlq, tps]

    # ------------------------------------------------------------------ consumer groups

    def _groups(self) -> Iterable[Metric]:
        ctx, store = self.ctx, self.ctx.store
        cluster, _addr, broker = self._identity()
        committed = _gauge("rocketmq_consumer_offset", "Sum of the group's committed offsets on the topic's queues.",
                           GROUP_LABELS)
        tps = _gauge("rocketmq_consumer_tps", "Messages the group pulled from the topic per second since the "
                     "previous scrape.", GROUP_LABELS)
        diff = _gauge("rocketmq_group_diff", "Messages of the topic the group has not consumed (committed).",
                      DIFF_LABELS)
        retry_diff = _gauge("rocketmq_group_retrydiff", "Messages of the group's retry topic it has not consumed.",
                            DIFF_LABELS)
        dlq_diff = _gauge("rocketmq_group_dlqdiff", "Messages of the group's dead-letter topic it has not consumed.",
                          DIFF_LABELS)
        queue_diff = _gauge("ferrymq_group_queue_diff", "Messages of the queue the group has not consumed "
                            "(max offset - committed offset).", QUEUE_LABELS)
        for key, queues in list(ctx.offsets.offset_table.items()):
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            info = ctx.consumers.get(group)
            online = str(len(info.channels)) if info is not None else "0"
            model = _MODEL_ORDINAL.get(info.message_model, "1") if info is not None else "1"
            lag_sum = 0
            for qid, offset in sorted(queues.items()):
                lag = max(0, store.get_max_offset(topic, qid) - max(0, offset))
                lag_sum += lag
                queue_diff.add_metric([cluster, broker, topic, group, str(qid)], lag)
            family = (retry_diff if topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX)
                      else dlq_diff if topic.startswith(names.DLQ_GROUP_TOPIC_PREFIX) else diff)
            family.add_metric([group, topic, online, model], lag_sum)
            committed.add_metric([cluster, broker, topic, group], sum(max(0, o) for o in queues.values()))
        pulled = {}
        for key, queues in list(ctx.offsets.pull_offset_table.items()):
            pulled[key] = sum(max(0, o) for o in queues.values())
        for key, rate in self._group_rates.update(pulled).items():
            topic, _, group = key.partition(TOPIC_GROUP_SEPARATOR)
            tps.add_metric([cluster, broker, topic, group], rate)
        return [committed, tps, diff, retry_diff, dlq_diff, queue_diff]

    # ------------------------------------------------------------------ client connections

    def _clients(self) -> Iterable[Metric]:
        """Connections per producer and consumer group, as the broker's heartbeat tables hold them."""
        cluster, _addr, broker = self._identity()
        consumers = _gauge("rocketmq_group_count", "Consumers of the group connected to the broker.",
                           GROUP_COUNT_LABELS)
        for group, info in list(self.ctx.consumers.groups.items()):
            clients = list(info.channels.values())
            consumers.add_metric([",".join(c.client_addr for c in clients), ",".join(c.client_id for c in clients),
                                  group], len(clients))
        producers = _gauge("rocketmq_producer_count", "Producers of the group connected to the broker.",
                           PRODUCER_COUNT_LABELS)
        for group, channels in list(self.ctx.producers.groups.items()):
            producers.add_metric([cluster, broker, group], len(channels))
        return [consumers, producers]

    # ------------------------------------------------------------------ the process

    def _process(self) -> Iterable[Metric]:
        cluster, addr, broker = self._identity()
        labels = [cluster, addr, broker]
        server = self.server
        if server is not None:
            yield _gauge("ferrymq_connections", "Client connections open to the broker's remoting port.",
                         BROKER_LABELS, [(labels, len(server.connections))])
            refusals = CounterMetricFamily("ferrymq_refusals", "Connections closed and requests refused by the "
                                           "connection limits, by reason.", labels=[*BROKER_LABELS, "reason"])
            for reason, count in server.refusals.counts.items():
                refusals.add_metric([*labels, reason], count)
            yield refusals
            yield _rpc_latency(labels, server.latency)
        watch = self.stall_watch
        if watch is not None:
            stalls = CounterMetricFamily("ferrymq_reactor_stalls", "Times the reactor thread was stalled "
                                         "longer than the threshold by the process itself.", labels=BROKER_LABELS)
            stalls.add_metric(labels, watch.stalls)
            machine = CounterMetricFamily("ferrymq_reactor_machine_stalls", "Times the reactor was as late because "
                                          "the machine kept its thread waiting for a CPU.", labels=BROKER_LABELS)
            machine.add_metric(labels, watch.machine_stalls)
            seconds = CounterMetricFamily("ferrymq_reactor_stalled_seconds", "Seconds the process's own stalls "
                                          "lasted.", labels=BROKER_LABELS)
            seconds.add_metric(labels, watch.stalled_seconds)
            yield from (stalls, machine, seconds)


def _code_name(codes: type[enum.IntEnum], code: int) -> str:
    """The code's name as Apache's metrics label it (its constant's name), or the number if unknown."""
    try:
        return codes(code).name
    except ValueError:
        return str(code)


def _rpc_latency(labels: list[str], latency: RequestLatency) -> HistogramMetricFamily:
    family = HistogramMetricFamily("rocketmq_rpc_latency", "Time from a request's dispatch to its answer, in "
                                   "milliseconds, of sampled requests (the first of one read in "
                                   f"{SAMPLE_EVERY_READS}).", labels=[*BROKER_LABELS, *RPC_LABELS])
    bounds = [repr(b) for b in BOUNDS_MS] + ["+Inf"]
    for (code, response_code, long_polling), counts in list(latency.histograms.items()):
        running, buckets = 0.0, []
        for le, count in zip(bounds, counts[:-1]):
            running += count
            buckets.append((le, running))
        family.add_metric([*labels, "remoting", _code_name(RequestCode, code), _code_name(ResponseCode, response_code),
                           "true" if long_polling else "false"], buckets, counts[-1])
    return family


def _gauge(name: str, doc: str, labels: Iterable[str], samples: Iterable[tuple[list[str], float]] = ()
           ) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=list(labels))
    for values, value in samples:
        family.add_metric(values, value)
    return family
