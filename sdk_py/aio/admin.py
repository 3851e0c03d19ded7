"""The asyncio admin client: :class:`ferrymq.sdk.MQAdmin` (topics, routes, queue offsets, the cluster's
figures, messages by id and key) with ``await``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Self

from ferrymq.wire.bodies import ClusterInfo, ConsumeStats, TopicRouteData, TopicStatsTable
from ferrymq.wire.message import MessageExt

from .. import mq_admin as core
from .. import reactor_thread
from ..message import MessageQueue
from .bridge import call

if TYPE_CHECKING:
    from ..admin_cli.message import MessageTrack


class MQAdmin:
    """``async with MQAdmin("127.0.0.1:9876") as admin: await admin.create_topic("T")``."""

    def __init__(self, namesrv_addr: str, **kwargs: Any):
        reactor_thread.ensure_running()
        self._core: core.MQAdmin = reactor_thread.call(lambda: core.MQAdmin(namesrv_addr, **kwargs))

    async def close(self) -> None:
        await call(self._core.close)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def master_addrs(self, cluster: str | None = None) -> list[str]:
        """Master addresses of ``cluster`` (all clusters when None), sorted by broker name."""
        return await call(self._core.master_addrs, cluster)

    async def list_topics(self) -> list[str]:
        """The names of every topic the name server has a route for (system topics included), sorted."""
        return await call(self._core.list_topics)

    async def create_topic(self, topic: str, queue_nums: int = 4, *, cluster: str | None = None,
                           broker_addr: str | None = None, perm: int = 6, order: bool = False) -> list[str]:
        """Create ``topic`` with ``queue_nums`` queues on one broker or every master of ``cluster`` (of all
        clusters when neither is given); returns the addresses used."""
        return await call(self._core.create_topic, topic, queue_nums, cluster=cluster, broker_addr=broker_addr,
                          perm=perm, order=order)

    async def wait_for_route(self, topic: str, timeout: float = 30.0, interval: float = 0.2) -> TopicRouteData:
        """Poll the name server until it has a route for ``topic`` with readable queues."""
        return await call(self._core.wait_for_route, topic, timeout, interval)

    async def fetch_route(self, topic: str) -> TopicRouteData:
        return await call(self._core.fetch_route, topic)

    async def fetch_subscribe_queues(self, topic: str) -> list[MessageQueue]:
        return await call(self._core.fetch_subscribe_queues, topic)

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return await call(self._core.fetch_publish_queues, topic)

    async def max_offset(self, mq: MessageQueue) -> int:
        return await call(self._core.max_offset, mq)

    async def min_offset(self, mq: MessageQueue) -> int:
        return await call(self._core.min_offset, mq)

    async def earliest_msg_store_time(self, mq: MessageQueue) -> int:
        return await call(self._core.earliest_msg_store_time, mq)

    async def search_offset(self, mq: MessageQueue, timestamp_ms: int, boundary: str | None = None) -> int:
        """Offset of the first message stored at or after ``timestamp_ms``."""
        return await call(self._core.search_offset, mq, timestamp_ms, boundary)

    async def query_consumer_offset(self, group: str, mq: MessageQueue) -> int:
        """The group's committed offset of ``mq``, -1 when it has none."""
        return await call(self._core.query_consumer_offset, group, mq)

    async def subscription_groups(self) -> list[str]:
        """The names of every subscription group the masters keep settings for, sorted."""
        return await call(self._core.subscription_groups)

    async def consume_stats(self, group: str, topic: str | None = None) -> ConsumeStats:
        """The group's broker and committed offsets per queue, as ``mqadmin consumerProgress -g``."""
        return await call(self._core.consume_stats, group, topic)

    async def cluster_info(self) -> ClusterInfo:
        """The name server's clusters and brokers."""
        return await call(self._core.cluster_info)

    async def runtime_info(self, addr: str) -> dict[str, str]:
        """The broker's runtime figures, as ``mqadmin clusterList`` reads them."""
        return await call(self._core.runtime_info, addr)

    async def topic_stats(self, topic: str) -> TopicStatsTable:
        """The topic's queues' min/max offsets and put TPS on every broker of its route (``topicStatus``)."""
        return await call(self._core.topic_stats, topic)

    async def message_by_id(self, topic: str, msg_id: str) -> MessageExt:
        """The message an offset message id or a unique key (UNIQ_KEY) names, as ``queryMsgById``."""
        return await call(self._core.message_by_id, topic, msg_id)

    async def messages_by_key(self, topic: str, key: str, max_num: int = 64) -> list[MessageExt]:
        """The messages of ``topic`` carrying ``key``, as ``queryMsgByKey``."""
        return await call(self._core.messages_by_key, topic, key, max_num)

    async def message_tracks(self, msg: MessageExt) -> list[MessageTrack]:
        """What each consumer group of the message's topic did with it."""
        return await call(self._core.message_tracks, msg)
