"""One broker's parts, built and connected in one place: for the running broker and for the tests.

:func:`build_broker` takes a started MessageStore and the reactor; it makes the store port, the tables,
the client registries, the delay/timer/transaction services, long polling and the processors' request
table. It opens no socket and starts no service: :class:`server.broker.service.Broker` does that.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from ferrymq.remoting.dispatch import Route
from ferrymq.server.config import BrokerConfig
from ferrymq.server.store.message_store import MessageStore
from ferrymq.wire.message import Host

from .clients import ConsumerManager, ProducerManager
from .context import BrokerContext
from .locks import QueueLockManager
from .longpoll import PullRequestHoldService
from .offsets import ConsumerOffsetManager
from .processors import build_table
from .processors.pull import PullProcessor
from .parking import build_services, park_commit
from .pop import PopService
from .sql_subscriptions import ConsumerFilterManager
from .stats import BrokerStats
from .store_adapter import StoreAdapter
from .subscriptions import SubscriptionGroupManager
from .topics import TopicConfigManager, TopicDefaults
from .processors.end_transaction import TransactionProcessor


@dataclass(frozen=True)
class BrokerParts:
    """What :func:`build_broker` returns: the shared state and the request table the transport serves."""

    ctx: BrokerContext
    table: dict[int, Route]


def topic_defaults(config: BrokerConfig) -> TopicDefaults:
    """The BrokerConfig keys that shape the initial topic table."""
    return TopicDefaults(
        brokerName=config.brokerName, brokerClusterName=config.brokerClusterName,
        autoCreateTopicEnable=config.autoCreateTopicEnable, defaultTopicQueueNums=config.defaultTopicQueueNums,
        clusterTopicEnable=config.clusterTopicEnable, brokerTopicEnable=config.brokerTopicEnable,
        traceTopicEnable=config.traceTopicEnable, msgTraceTopicName=config.msgTraceTopicName,
    )


def build_broker(
    config: BrokerConfig,
    store: MessageStore,
    clock: Any,
    *,
    store_host: Host,
    wall: Callable[[], float] = time.time,
    on_ids_changed: Callable[[str, list[Hashable]], None] | None = None,
    on_config_change: Callable[[], None] | None = None,
) -> BrokerParts:
    """Wire one broker over ``store``. ``clock`` is the reactor (``callLater``/``seconds``; a
    ``task.Clock`` in tests); ``wall`` is the wall clock of the delay, timer and transaction services,
    which compare it with store and born timestamps."""
    port = StoreAdapter(store, clock)
    seconds = clock.seconds
    topics = TopicConfigManager(topic_defaults(config))
    offsets = ConsumerOffsetManager()
    producers = ProducerManager(clock=seconds)
    filters = ConsumerFilterManager()
    scheduler, timer = build_services(port, clock, config, clock=wall)
    # Two services call back into what is built after them: the hold service re-runs a pull through the
    # pull processor, and a committed transaction parks on the context's delay and timer services.
    pull: PullProcessor
    ctx: BrokerContext
    holder = PullRequestHoldService(clock, lambda cmd, channel: pull.repull(cmd, channel))
    transactions = TransactionProcessor(config, port, offsets, topics, producers,
                                        park=lambda *where: park_commit(ctx, *where), clock=wall)
    ctx = BrokerContext(
        config=config, store=port, topics=topics,
        groups=SubscriptionGroupManager(auto_create=config.autoCreateSubscriptionGroup),
        consumers=ConsumerManager(on_ids_changed, clock=seconds, on_group_emptied=filters.unregister_group),
        producers=producers, offsets=offsets, locks=QueueLockManager(clock=seconds),
        stats=BrokerStats(clock=seconds), store_host=store_host, reactor=clock, holder=holder,
        on_config_change=on_config_change, scheduler=scheduler, timer=timer, filters=filters,
        transactions=transactions,
    )
    pull = PullProcessor(ctx)
    port.add_arrival_listener(holder.notify)
    ctx.pop = PopService(ctx)
    return BrokerParts(ctx, build_table(ctx, pull, extra=(transactions,)))
