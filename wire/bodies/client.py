"""Client-facing bodies: message queues, heartbeats, connections, queue locks, consumer lists."""

from __future__ import annotations

import base64
from dataclasses import dataclass, field

from .model import body, wire


@body
@dataclass(slots=True, frozen=True)
class MessageQueue:
    """(topic, broker, queue id): frozen so it can key the offset tables, as it does in Java."""

    topic: str | None = None
    broker_name: str | None = None
    queue_id: int = 0


@body
@dataclass(slots=True)
class SubscriptionData:
    """One subscription. ``code_set`` holds tag hash codes (Go sends them as strings; read as ints).
    ``expression_type`` None or empty means TAG."""

    topic: str | None = None
    sub_string: str | None = None
    tags_set: list[str] = field(default_factory=list)
    code_set: list[int] = field(default_factory=list)
    sub_version: int = 0
    expression_type: str = "TAG"
    class_filter_mode: bool = False


@body
@dataclass(slots=True)
class ConsumerData:
    group_name: str | None = None
    consume_type: str | None = None  # CONSUME_ACTIVELY | CONSUME_PASSIVELY | CONSUME_POP
    message_model: str | None = None  # CLUSTERING | BROADCASTING
    consume_from_where: str | None = None
    subscription_data_set: list[SubscriptionData] = field(default_factory=list)
    unit_mode: bool = False


@body
@dataclass(slots=True)
class ProducerData:
    group_name: str | None = None


@body
@dataclass(slots=True)
class HeartbeatData:
    """HEART_BEAT body (Java and Go shapes). ``heartbeat_fingerprint`` != 0 marks a 5.x V2 heartbeat, where
    ``without_sub`` true means "subscriptions unchanged since the last full heartbeat"."""

    client_id: str | None = wire("clientID", default=None)
    producer_data_set: list[ProducerData] = field(default_factory=list)
    consumer_data_set: list[ConsumerData] = field(default_factory=list)
    heartbeat_fingerprint: int = 0
    without_sub: bool = False


@body
@dataclass(slots=True)
class Connection:
    """One client connection as mqadmin shows it: ``language``/``version`` from its heartbeat header."""

    client_id: str | None = None
    client_addr: str | None = None
    language: str | None = None
    version: int = 0


@body
@dataclass(slots=True)
class ConsumerConnection:
    connection_set: list[Connection] = field(default_factory=list)
    subscription_table: dict[str, SubscriptionData] = field(default_factory=dict)
    consume_type: str | None = None
    message_model: str | None = None
    consume_from_where: str | None = None


@body
@dataclass(slots=True)
class ProducerConnection:
    connection_set: list[Connection] = field(default_factory=list)


@body
@dataclass(slots=True)
class LockBatchRequestBody:
    consumer_group: str | None = None
    client_id: str | None = None
    only_this_broker: bool = False
    mq_set: list[MessageQueue] = field(default_factory=list)


@body
@dataclass(slots=True)
class LockBatchResponseBody:
    lock_ok_mq_set: list[MessageQueue] = wire("lockOKMQSet", default_factory=list)


@body
@dataclass(slots=True)
class UnlockBatchRequestBody:
    consumer_group: str | None = None
    client_id: str | None = None
    only_this_broker: bool = False
    mq_set: list[MessageQueue] = field(default_factory=list)


@body
@dataclass(slots=True)
class GetConsumerListByGroupResponseBody:
    consumer_id_list: list[str] = field(default_factory=list)


@body
@dataclass(slots=True)
class CheckClientRequestBody:
    """CHECK_CLIENT_CONFIG: a consumer asks whether the broker accepts its (SQL92) subscription."""

    client_id: str | None = None
    group: str | None = None
    subscription_data: SubscriptionData | None = None
    namespace: str | None = None


@body
@dataclass(slots=True)
class GroupList:
    group_list: list[str] = field(default_factory=list)


@body
@dataclass(slots=True)
class QueryAssignmentRequestBody:
    topic: str | None = None
    consumer_group: str | None = None
    client_id: str | None = None
    strategy_name: str | None = None
    message_model: str | None = None


@body
@dataclass(slots=True)
class MessageQueueAssignment:
    message_queue: MessageQueue | None = None
    #: MessageRequestMode: PULL or POP
    mode: str = "PULL"
    attachments: dict[str, str] | None = None


@body
@dataclass(slots=True)
class QueryAssignmentResponseBody:
    message_queue_assignments: list[MessageQueueAssignment] = field(default_factory=list)


@body
@dataclass(slots=True)
class SetMessageRequestModeRequestBody:
    """SET_MESSAGE_REQUEST_MODE (``mqadmin setConsumeMode``); also one entry of messageRequestMode.json."""

    topic: str | None = None
    consumer_group: str | None = None
    mode: str = "PULL"
    pop_share_queue_num: int = 0


@body
@dataclass(slots=True)
class BatchAck:
    """The acks of one pop of one queue: bit i of ``bit_set`` acks queue offset ``start_offset + i``. The
    bit set travels as Java's ``BitSet.toByteArray()`` in base64 (fastjson's byte[])."""

    consumer_group: str | None = wire("c", default=None)
    topic: str | None = wire("t", default=None)
    #: the ExtraInfo retry mark: 0, 1 or 2
    retry: str | None = wire("r", default=None)
    start_offset: int = wire("so", default=0)
    queue_id: int = wire("q", default=0)
    revive_queue_id: int = wire("rq", default=0)
    pop_time: int = wire("pt", default=0)
    invisible_time: int = wire("it", default=0)
    bit_set: str | None = wire("b", default=None)

    def offsets(self) -> list[int]:
        raw = base64.b64decode(self.bit_set or "")
        return [self.start_offset + i * 8 + bit for i, byte in enumerate(raw) for bit in range(8) if byte >> bit & 1]


@body
@dataclass(slots=True)
class BatchAckMessageRequestBody:
    """BATCH_ACK_MESSAGE."""

    broker_name: str | None = None
    acks: list[BatchAck] = field(default_factory=list)
