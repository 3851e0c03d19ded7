"""The broker's shared state, handed to every processor (one object instead of a dozen arguments).

:func:`server.broker.wiring.build_broker` builds it, for the running broker and for the tests alike.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any, Callable

from ferrymq.server.config import BrokerConfig
from ferrymq.wire.codes import Perm
from ferrymq.wire.message import Host

from .clients import ConsumerManager, ProducerManager
from .locks import QueueLockManager
from .offsets import ConsumerOffsetManager
from .parts import ConsumerFilters, DelayLevels, PullHolder, TimerWheel, Transactions
from .request_modes import MessageRequestModes
from .stats import BrokerStats
from .store_port import StorePort
from .subscriptions import SubscriptionGroupManager
from .topics import TopicConfigManager

#: Plain ints: IntFlag arithmetic costs microseconds on every send and pull.
PERM_READ, PERM_WRITE = int(Perm.READ), int(Perm.WRITE)

#: Apache's FAQ links appended to some remarks (clients print them).
FAQ_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"


def suggest_todo(url: str = FAQ_URL) -> str:
    return f"\nSee {url} for further details."


@dataclass
class BrokerContext:
    config: BrokerConfig
    store: StorePort
    topics: TopicConfigManager
    groups: SubscriptionGroupManager
    consumers: ConsumerManager
    producers: ProducerManager
    offsets: ConsumerOffsetManager
    locks: QueueLockManager
    stats: BrokerStats
    #: ``(ip, port)`` written into STOREHOST and offset message ids.
    store_host: Host
    #: The reactor (``callLater``, ``seconds``): a ``task.Clock`` in tests.
    reactor: Any
    #: Long polling; None: a pull that finds nothing is answered at once.
    holder: PullHolder | None = None
    #: Called after a broker config change through UPDATE_BROKER_CONFIG (persist, re-register).
    on_config_change: Callable[[], None] | None = None
    #: Delay levels; None: DELAY is ignored.
    scheduler: DelayLevels | None = None
    #: Timer wheel; None: timer properties are ignored.
    timer: TimerWheel | None = None
    #: SQL92 filters; None: SQL92 subscriptions find no filter data.
    filters: ConsumerFilters | None = None
    #: Transactions; None: half messages are refused as with rejectTransactionMessage.
    transactions: Transactions | None = None
    #: ``(timeout s) -> Deferred`` firing once a pending name-server registration answered (None: no name server).
    registration_pending: Callable[[float], Any] | None = None
    #: POP consumption (:class:`server.broker.pop.PopService`); None: POP requests are not served.
    pop: Any = None
    #: The replication report GET_BROKER_HA_STATUS answers; None: this broker runs no HA service.
    ha_runtime_info: Callable[[], Any] | None = None
    #: setConsumeMode's choices, which QUERY_ASSIGNMENT answers.
    request_modes: MessageRequestModes = field(default_factory=MessageRequestModes)
    rng: random.Random = field(default_factory=random.Random)

    @property
    def broker_addr(self) -> str:
        return f"{self.store_host[0]}:{self.store_host[1]}"

    def broker_writable(self) -> bool:
        return bool(self.config.brokerPermission & PERM_WRITE)

    def broker_readable(self) -> bool:
        return bool(self.config.brokerPermission & PERM_READ)

    def now_ms(self) -> int:
        return int(self.reactor.seconds() * 1000)
