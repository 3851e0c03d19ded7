"""The send-path hook of timer and delay-level messages (Apache's HookUtils.handleScheduleMessage).

The delivery services live in :mod:`server.schedule` (delay levels: ``ScheduleMessageService``; timer
wheel: ``TimerMessageService``); this module only decides, for a message about to be stored, whether
it is parked instead, and builds the two services for a broker. Timer properties are looked at
first, then the delay level, for plain and committed messages only (half and rollback records are
never delayed).
"""

from __future__ import annotations

from typing import Any

from ferrymq.server.config import BrokerConfig
from ferrymq.server.schedule.delay import ScheduleMessageService, park_delayed
from ferrymq.server.schedule.timer import _TIMER_KEYS, TimerConfig, TimerMessageError, TimerMessageService, park_timer
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.errors import Refusal
from ferrymq.wire.message import MessageConst, MessageExt, MessageSysFlag

from .store_port import SystemStore

_PLAIN_OR_COMMIT = (MessageSysFlag.TRANSACTION_NOT_TYPE, MessageSysFlag.TRANSACTION_COMMIT_TYPE)


def timer_config(config: BrokerConfig) -> TimerConfig:
    return TimerConfig(timerWheelEnable=config.timerWheelEnable, timerPrecisionMs=config.timerPrecisionMs,
                       timerMaxDelaySec=config.timerMaxDelaySec)


def build_services(store: SystemStore, reactor: Any, config: BrokerConfig,
                   clock=None) -> tuple[ScheduleMessageService, TimerMessageService]:
    """The delay-level and timer services of one broker (started and stopped by the broker)."""
    extra = {} if clock is None else {"clock": clock}
    return (ScheduleMessageService(store, reactor, **extra),
            TimerMessageService(store, reactor, timer_config(config), **extra))


def park(ctx: Any, msg: MessageExt, ext: dict[str, str] | None = None) -> None:
    """Rewrite ``msg`` in place to its parking topic/queue when it is a timer or delayed message.

    Without the services (``ctx.scheduler`` / ``ctx.timer`` None) a message goes straight to its topic:
    delivered at once rather than lost. A timer message that cannot be parked raises Refusal with
    extFields ``ext`` (never null, as the broker's answers).
    """
    try:
        where = park_props(ctx, msg.topic, msg.queue_id, msg.properties, msg.sys_flag)
    except Refusal as refused:
        raise Refusal(refused.code, refused.remark, ext if ext is not None else {}) from None
    if where is not None:
        msg.topic, msg.queue_id = where


#: Properties that can make a message wait (timer keys or a delay level); a message without any is never parked.
_PARK_KEYS = frozenset((*_TIMER_KEYS, MessageConst.DELAY_TIME_LEVEL))


def may_park(props: dict[str, str]) -> bool:
    """False when ``props`` hold none of the keys that park a message: the send path skips the services."""
    return not _PARK_KEYS.isdisjoint(props)


def park_props(ctx: Any, topic: str, queue_id: int, props: dict[str, str],
               sys_flag: int) -> tuple[str, int] | None:
    """The parking place (topic, queue) of a message bound to ``topic``/``queue_id``, or None; ``props``
    gains the real destination (and TIMER_OUT_MS) when parked. Raises Refusal (Apache's code and remark)
    for a timer message the wheel cannot take."""
    if MessageSysFlag.transaction_type(sys_flag) not in _PLAIN_OR_COMMIT:
        return None
    if ctx.timer is not None:
        cfg = ctx.timer.config
        try:
            where = park_timer(topic, queue_id, props, int(ctx.timer.clock() * 1000), cfg)
        except TimerMessageError as exc:
            if not cfg.timerWheelEnable:
                raise Refusal(ResponseCode.SYSTEM_ERROR, "accurate timer message is not enabled, "
                              f"timerWheelEnable is {str(cfg.timerWheelEnable).lower()}") from None
            raise Refusal(ResponseCode.MESSAGE_ILLEGAL, timer_illegal_remark(cfg.timerMaxDelaySec, str(exc))) from None
        if where is not None:
            return where
    if ctx.scheduler is not None:
        return park_delayed(topic, queue_id, props, sys_flag, ctx.scheduler.max_level)
    return None


def park_commit(ctx: Any, topic: str, queue_id: int, props: dict[str, str], sys_flag: int) -> tuple[str, int] | None:
    """Where a committed transactional message waits (its delay level or timer), or None. A timer the
    wheel refuses is delivered as it is: the producer was answered long ago."""
    try:
        return park_props(ctx, topic, queue_id, props, sys_flag)
    except Refusal:
        return None


def timer_illegal_remark(max_delay_sec: int, _why: str = "") -> str:
    """Apache's one remark for every WHEEL_TIMER_MSG_ILLEGAL case (the client shows it as is)."""
    return (f"timer message illegal, the delay time should not be bigger than the max delay {max_delay_sec * 1000}ms; "
            "or if set del msg, the delay time should be bigger than the current time")
