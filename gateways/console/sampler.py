"""The TPS the console plots: a ring of the cluster's put and get totals, and each topic's stored
messages, sampled every ``consoleSampleInterval``.

Rates are differences between samples, so they are the same whatever the brokers report as their own
rates, and a topic's put TPS comes from its queues' max offsets (Apache reports one per topic, older
brokers and FerryMQ do not). The totals cost a request per broker; the topics' offsets a request per
topic, so they are sampled only while the console is looked at (a page was shown in the last
:data:`TOPICS_SAMPLED_AFTER_VIEW` seconds).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from ferrymq.sdk.aio import MQAdmin
from ferrymq.wire.bodies import ClusterInfo
from ferrymq.wire.topics import REPLY_TOPIC_POSTFIX, is_retry_or_dlq, is_system_topic

log = logging.getLogger("ferrymq.gateway.console")

#: samples kept: half an hour at the default interval of 5 s
SAMPLES_KEPT = 360
MASTER_ID = 0
#: how long after a page view the topics' offsets are still sampled
TOPICS_SAMPLED_AFTER_VIEW = 600.0


@dataclass(frozen=True, slots=True)
class Sample:
    time: float
    #: messages put into and read from every master since it started (GET_BROKER_RUNTIME_INFO)
    put_total: int
    get_total: int
    #: per user topic, the sum of its queues' max offsets
    topic_offsets: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Rate:
    """The rates between two samples, stamped with the later one's time."""

    time: float
    put_tps: float
    get_tps: float


def masters(info: ClusterInfo) -> list[str]:
    """The master addresses of every cluster, by broker name."""
    return [b.broker_addrs[MASTER_ID] for _, b in sorted(info.broker_addr_table.items())
            if MASTER_ID in b.broker_addrs]


def user_topics(topics: list[str], info: ClusterInfo) -> list[str]:
    """The topics applications use: not the system's, not a group's retry or dead-letter topic, not the
    topics named after each cluster and broker, nor a cluster's reply topic."""
    reserved = (set(info.cluster_addr_table) | set(info.broker_addr_table)
                | {f"{cluster}_{REPLY_TOPIC_POSTFIX}" for cluster in info.cluster_addr_table})
    return [t for t in topics if not is_system_topic(t) and not is_retry_or_dlq(t) and t not in reserved]


async def take(admin: MQAdmin, with_topics: bool) -> Sample:
    info = await admin.cluster_info()
    addrs = masters(info)
    stats = await asyncio.gather(*(admin.runtime_info(addr) for addr in addrs), return_exceptions=True)
    runtimes = [s for s in stats if isinstance(s, dict)]
    put = sum(int(s.get("msgPutTotalTodayNow", 0)) for s in runtimes)
    got = sum(int(s.get("msgGetTotalTodayNow", 0)) for s in runtimes)
    if not with_topics:
        return Sample(time.time(), put, got)
    topics = user_topics(await admin.list_topics(), info)
    tables = await asyncio.gather(*(admin.topic_stats(t) for t in topics), return_exceptions=True)
    offsets = {t: sum(o.max_offset for o in table.offset_table.values())
               for t, table in zip(topics, tables) if not isinstance(table, BaseException)}
    return Sample(time.time(), put, got, offsets)


def _rate(newer: int, older: int, seconds: float) -> float:
    # a total that went down is a broker that restarted: no rate can be told for that interval
    return max(0, newer - older) / seconds if seconds > 0 else 0.0


class Sampler:
    """Samples every ``interval`` seconds while :meth:`run` runs, through the admin ``admin()`` returns
    (None while the gateway's client is not started: that tick is skipped)."""

    def __init__(self, admin: Callable[[], MQAdmin | None], interval: float, kept: int = SAMPLES_KEPT):
        self.admin = admin
        self.interval = interval
        self.samples: deque[Sample] = deque(maxlen=kept)
        #: when a console page was last shown (monotonic seconds)
        self.viewed_at = float("-inf")

    def viewed(self) -> None:
        self.viewed_at = time.monotonic()

    async def run(self) -> None:
        while True:
            admin = self.admin()
            if admin is not None:
                try:
                    looked_at = time.monotonic() - self.viewed_at < TOPICS_SAMPLED_AFTER_VIEW
                    self.samples.append(await take(admin, looked_at))
                except Exception as exc:  # noqa: BLE001 - a cluster that does not answer leaves a gap, no more
                    log.debug("console sample skipped: %s", exc)
            await asyncio.sleep(self.interval)

    def rates(self) -> list[Rate]:
        pairs = zip(self.samples, list(self.samples)[1:])
        return [Rate(b.time, _rate(b.put_total, a.put_total, b.time - a.time),
                     _rate(b.get_total, a.get_total, b.time - a.time)) for a, b in pairs]

    def topic_tps(self, topic: str) -> float | None:
        """The topic's put TPS between the two newest samples; None unless both hold the topic (it is
        sampled from the first page view on)."""
        if len(self.samples) < 2:
            return None
        older, newer = self.samples[-2], self.samples[-1]
        if topic not in older.topic_offsets or topic not in newer.topic_offsets:
            return None
        return _rate(newer.topic_offsets[topic], older.topic_offsets[topic], newer.time - older.time)
