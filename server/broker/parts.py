"""The broker's services as its processors and its lifecycle see them (typing.Protocol).

:class:`~server.broker.context.BrokerContext` is typed with these, so a processor depends on what it
calls, not on the classes :func:`server.broker.wiring.build_broker` happens to plug in (and a test can
plug in its own). Each service is optional in the context: None switches the feature off.
"""

from __future__ import annotations

from typing import Any, Callable, Protocol

from twisted.internet import defer

from ferrymq.server.schedule.timer import TimerConfig
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.message import MessageExt

from .sql_subscriptions import ConsumerFilterData


class Service(Protocol):
    """Started and stopped with the broker (only on a master)."""

    running: bool

    def start(self) -> None: ...

    def stop(self) -> None: ...


class DelayLevels(Service, Protocol):
    """Delivers messages parked on a delay level (:class:`server.schedule.delay.ScheduleMessageService`)."""

    @property
    def max_level(self) -> int: ...


class TimerWheel(Service, Protocol):
    """Delivers timer messages (:class:`server.schedule.timer.TimerMessageService`); runtime info reads its figures."""

    config: TimerConfig
    clock: Callable[[], float]
    #: next timer-queue offset not yet taken into the wheel; timers pending; enqueued and delivered in total
    scanned: int
    pending: int
    enqueued: int
    delivered: int
    #: every timer due at or before this wall-clock ms has been delivered
    delivered_through: int

    def next_due_ms(self) -> int | None: ...


class Transactions(Protocol):
    """Half messages and their check-back (:class:`server.broker.transactions.TransactionProcessor`)."""

    def prepare_message(self, msg: MessageExt) -> Any:
        """Store ``msg`` as a half message: a PutMessageResult or a promise of one."""

    def check(self) -> int:
        """One check-back pass; how many producers were asked."""


class ConsumerFilters(Protocol):
    """SQL92 filters compiled per (group, topic) (:class:`.sql_subscriptions.ConsumerFilterManager`)."""

    def register(self, group: str, topic: str, expression: str, version: int) -> ConsumerFilterData | None: ...

    def get(self, group: str, topic: str) -> ConsumerFilterData | None: ...

    def unregister_group(self, group: str) -> None: ...


class PullHolder(Protocol):
    """Long polling (:class:`server.broker.longpoll.PullRequestHoldService`)."""

    def hold(self, cmd: RemotingCommand, channel: Any, topic: str, queue_id: int, offset: int, timeout_ms: int,
             matches: Callable[[int | None], bool] | None = None) -> defer.Deferred: ...

    def notify(self, topic: str, queue_id: int, max_offset: int, tags_code: int | None = None) -> None: ...

    def wake_channel(self, channel: Any, topics: set[str]) -> None: ...

    def wake_all(self) -> None: ...
