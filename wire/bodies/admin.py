"""Admin bodies: offsets and stats keyed by MessageQueue, offset resets, subscription groups, time spans.

MessageQueue-keyed maps are written in fastjson's object-key form (``{{"brokerName":…}:5}``): Java
mqadmin reads it, and Go's reset-offset parser splits exactly that compact text by hand.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .client import MessageQueue, SubscriptionData
from .model import body, wire
from .route import DataVersion


@body
@dataclass(slots=True)
class OffsetWrapper:
    broker_offset: int = 0
    consumer_offset: int = 0
    pull_offset: int = 0
    last_timestamp: int = 0


@body
@dataclass(slots=True)
class ConsumeStats:
    """GET_CONSUME_STATS answer; mqadmin's "Diff" is the sum of broker_offset - consumer_offset."""

    offset_table: dict[MessageQueue, OffsetWrapper] = field(default_factory=dict)
    consume_tps: float = 0.0


@body
@dataclass(slots=True)
class TopicOffset:
    min_offset: int = 0
    max_offset: int = 0
    last_update_timestamp: int = 0


@body
@dataclass(slots=True)
class TopicStatsTable:
    offset_table: dict[MessageQueue, TopicOffset] = field(default_factory=dict)
    topic_put_tps: float = 0.0


@body
@dataclass(slots=True)
class ResetOffsetBody:
    """INVOKE_BROKER_TO_RESET_OFFSET answer and RESET_CONSUMER_CLIENT_OFFSET body. Also reads Gson's
    ``[[mq, offset], …]`` form, which Go would produce."""

    offset_table: dict[MessageQueue, int] = field(default_factory=dict)


@body
@dataclass(slots=True)
class MessageQueueForC:
    topic: str | None = None
    broker_name: str | None = None
    queue_id: int = 0
    offset: int = 0


@body
@dataclass(slots=True)
class ResetOffsetBodyForC:
    """What a C++ (LanguageCode CPP) requester gets instead of ResetOffsetBody: a plain list."""

    offset_table: list[MessageQueueForC] = field(default_factory=list)

    @classmethod
    def from_reset(cls, reset: ResetOffsetBody) -> "ResetOffsetBodyForC":
        return cls([MessageQueueForC(mq.topic, mq.broker_name, mq.queue_id, off) for mq, off in reset.offset_table.items()])


@body
@dataclass(slots=True)
class GetConsumerStatusBody:
    """Client reply to GET_CONSUMER_STATUS_FROM_CLIENT; the broker's INVOKE_BROKER_TO_GET_CONSUMER_STATUS
    answer fills ``consumer_table`` (client id -> its queue offsets)."""

    message_queue_table: dict[MessageQueue, int] = field(default_factory=dict)
    consumer_table: dict[str, dict[MessageQueue, int]] = field(default_factory=dict)


@body
@dataclass(slots=True)
class SubscriptionGroupConfig:
    """Defaults are Apache's; the broker auto-creates one per unknown valid group.
    ``group_retry_policy`` and ``subscription_data_set`` are kept as raw JSON (5.x only, passed through)."""

    group_name: str | None = None
    consume_enable: bool = True
    consume_from_min_enable: bool = True
    consume_broadcast_enable: bool = True
    consume_message_orderly: bool = False
    retry_queue_nums: int = 1
    retry_max_times: int = 16
    group_retry_policy: Any = field(default_factory=lambda: {"type": "CUSTOMIZED"})
    broker_id: int = 0
    which_broker_when_consume_slowly: int = 1
    notify_consumer_ids_changed_enable: bool = True
    group_sys_flag: int = 0
    consume_timeout_minute: int = 15
    subscription_data_set: list[Any] | None = None
    attributes: dict[str, str] = field(default_factory=dict)


@body
@dataclass(slots=True)
class SubscriptionGroupWrapper:
    """GET_ALL_SUBSCRIPTIONGROUP_CONFIG answer (Go decodes it with encoding/json: keep it standard)."""

    subscription_group_table: dict[str, SubscriptionGroupConfig] = field(default_factory=dict)
    forbidden_table: dict[str, dict[str, int]] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


@body
@dataclass(slots=True)
class QueueTimeSpan:
    message_queue: MessageQueue | None = None
    min_time_stamp: int = 0
    max_time_stamp: int = 0
    consume_time_stamp: int = 0
    delay_time: int = 0


@body
@dataclass(slots=True)
class QueryConsumeTimeSpanBody:
    consume_time_span_set: list[QueueTimeSpan] = field(default_factory=list)


@body
@dataclass(slots=True)
class ConsumeByWho:
    consumed_group: list[str] = field(default_factory=list)
    not_consumed_group: list[str] = field(default_factory=list)
    topic: str | None = None
    queue_id: int = 0
    offset: int = 0


@body
@dataclass(slots=True)
class QuerySubscriptionResponseBody:
    subscription_data: SubscriptionData | None = None
    group: str | None = None
    topic: str | None = None


@body
@dataclass(slots=True)
class ConsumeStatsList:
    """GET_BROKER_CONSUME_STATS answer: per group, per topic, the ConsumeStats of that broker."""

    consume_stats_list: list[dict[str, list[ConsumeStats]]] = field(default_factory=list)
    broker_addr: str | None = None
    total_diff: int = 0
    total_inflight_diff: int = 0


@body
@dataclass(slots=True)
class ProcessQueueInfo:
    commit_offset: int = 0
    cached_msg_min_offset: int = 0
    cached_msg_max_offset: int = 0
    cached_msg_count: int = 0
    cached_msg_size_in_mi_b: int = wire("cachedMsgSizeInMiB", default=0)
    transaction_msg_min_offset: int = 0
    transaction_msg_max_offset: int = 0
    transaction_msg_count: int = 0
    locked: bool = False
    try_unlock_times: int = 0
    last_lock_timestamp: int = 0
    droped: bool = False  # sic: Apache's spelling
    last_pull_timestamp: int = 0
    last_consume_timestamp: int = 0


@body
@dataclass(slots=True)
class PopProcessQueueInfo:
    wait_ack_count: int = 0
    droped: bool = False
    last_pop_timestamp: int = 0


@body
@dataclass(slots=True)
class ConsumeStatus:
    pull_rt: float = wire("pullRT", default=0.0)
    pull_tps: float = wire("pullTPS", default=0.0)
    consume_rt: float = wire("consumeRT", default=0.0)
    consume_ok_tps: float = wire("consumeOKTPS", default=0.0)
    consume_failed_tps: float = wire("consumeFailedTPS", default=0.0)
    consume_failed_msgs: int = 0


@body
@dataclass(slots=True)
class ConsumerRunningInfo:
    """Client reply to GET_CONSUMER_RUNNING_INFO; the broker relays the client's bytes to mqadmin as they are."""

    properties: dict[str, str] = field(default_factory=dict)
    subscription_set: list[SubscriptionData] = field(default_factory=list)
    mq_table: dict[MessageQueue, ProcessQueueInfo] = field(default_factory=dict)
    status_table: dict[str, ConsumeStatus] = field(default_factory=dict)
    user_consumer_info: dict[str, str] = field(default_factory=dict)
    jstack: str | None = None
    mq_pop_table: dict[MessageQueue, PopProcessQueueInfo] = field(default_factory=dict)


@body
@dataclass(slots=True)
class ConsumeMessageDirectlyResult:
    """Client reply to CONSUME_MESSAGE_DIRECTLY; ``consume_result`` is a CMResult name such as CR_SUCCESS."""

    order: bool = False
    auto_commit: bool = True
    consume_result: str | None = None
    remark: str | None = None
    spent_time_mills: int = 0
