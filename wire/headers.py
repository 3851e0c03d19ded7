"""Typed custom headers: one dataclass per header the official clients, mqadmin and brokers send.

A header travels as ``extFields``, a flat ``dict[str, str]``. Each class here states its fields once, as
annotated dataclass fields: the Python name is snake_case, the wire name is its camelCase unless given
with :func:`wire` (``clientID``, ``bname``, ``MSG_REGION``...). A field without a default is required:
Java answers "the custom field <x> is null" when one is missing, and so do we (MissingField). A field
whose default is a value (Java primitives such as ``committed = true``) is always written; a field
defaulting to None is written only when set.

Decoding runs for every SEND_MESSAGE_V2 and PULL_MESSAGE, so :func:`header` compiles, once per class,
straight-line ``from_ext``/``to_ext`` functions (no per-call loop over fields, no isinstance checks).
The fast path catches any conversion failure in one ``try`` and hands the dict to a slow, exact checker
that raises MissingField/BadField naming the field; that path only runs for bad input.

Values: ``int`` is Java Integer/Long in decimal; ``bool`` is written ``"true"``/``"false"`` and read
as Java's ``Boolean.parseBoolean`` reads it ("true" in any case is true, anything else false: the C++
client writes ``0``); an empty string in an optional number or boolean counts as absent (Go writes
empty strings for unset optional fields).

SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and SEND_REPLY_MESSAGE_V2 carry :class:`SendMessageRequestHeader`
under one-letter keys ``a``..``n`` (``from_ext_v2``/``to_ext_v2``); which request code uses which header
(and which form) is declared once, in :mod:`.requests`.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from dataclasses import dataclass

from .errors import BadField, MissingField

__all__ = ["header", "wire"]

_MISSING = dataclasses.MISSING
class _JavaBooleans(dict):
    """Header booleans as Java's ``Boolean.parseBoolean`` reads them: "true" in any case is true,
    anything else false. The C++ client sends ``unitMode=0`` / ``batch=0``; Apache accepts those."""

    def __missing__(self, value: str) -> bool:
        return value.lower() == "true"


_BOOLS = _JavaBooleans({"true": True, "false": False, "True": True, "False": False, "TRUE": True, "FALSE": False})
_EMPTY: dict[str, str] = {}


def wire(name: str | None = None, *, default=_MISSING, v2: str | None = None):
    """A header field with an explicit wire name (and, for the send header, its one-letter V2 key)."""
    metadata = {}
    if name is not None:
        metadata["wire"] = name
    if v2 is not None:
        metadata["v2"] = v2
    return dataclasses.field(default=default, metadata=metadata)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class _Field(typing.NamedTuple):
    attr: str
    wire: str
    v2: str | None
    kind: type  # str, int or bool
    required: bool
    default: object  # for optional fields: None (omitted when None) or a value (always written)


def _fields_of(cls: type) -> list[_Field]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        if typing.get_origin(tp) in (typing.Union, types.UnionType):
            (tp,) = [a for a in typing.get_args(tp) if a is not type(None)]
        if tp not in (str, int, bool):
            raise TypeError(f"{cls.__name__}.{f.name}: header fields are str, int or bool, not {tp!r}")
        required = f.default is _MISSING and f.default_factory is _MISSING
        out.append(
            _Field(f.name, f.metadata.get("wire") or _camel(f.name), f.metadata.get("v2"), tp, required, None if required else f.default)
        )
    return out


_EXPECTED = {int: "a decimal integer", str: "a string"}


def _slow_decode(cls: type, fields: list[_Field], ext: dict[str, str], use_v2: bool) -> None:
    """Find and raise the exact problem the fast path tripped over."""
    for f in fields:
        key = f.v2 if use_v2 else f.wire
        value = ext.get(key)
        if value is None:
            if f.required:
                raise MissingField(cls.__name__, key)
            continue
        if not isinstance(value, str):
            raise BadField(cls.__name__, key, value, "a string value in extFields")
        if f.kind is str or (not f.required and value == ""):
            continue
        if f.kind is int:
            try:
                int(value)
            except ValueError:
                raise BadField(cls.__name__, key, value, _EXPECTED[int]) from None
    raise AssertionError(f"{cls.__name__}: fast decoder failed on input the exact checker accepts: {ext!r}")


def _compile_from_ext(cls: type, fields: list[_Field], use_v2: bool):
    lines = ["def from_ext(ext):", "    if not ext:", "        ext = _EMPTY", "    get = ext.get", "    try:"]
    args = []
    for i, f in enumerate(fields):
        key = repr(f.v2 if use_v2 else f.wire)
        var = f"v{i}"
        args.append(f"{f.attr}={var}")
        if f.required:
            conv = {str: f"ext[{key}]", int: f"int(ext[{key}])", bool: f"_BOOLS[ext[{key}]]"}[f.kind]
            lines.append(f"        {var} = {conv}")
        else:
            lines.append(f"        {var} = get({key})")
            if f.kind is int:
                lines.append(f"        {var} = int({var}) if {var} else _d{i}")
            elif f.kind is bool:
                lines.append(f"        {var} = _BOOLS[{var}] if {var} else _d{i}")
            else:
                lines.append(f"        if {var} is None: {var} = _d{i}")
    lines.append("        return _new(" + ", ".join(args) + ")")
    lines.append("    except (KeyError, ValueError, TypeError):")
    lines.append("        pass")
    lines.append("    _slow(_cls, _fields, ext, _use_v2)  # always raises, naming the field")
    namespace = {
        "_EMPTY": _EMPTY,
        "_BOOLS": _BOOLS,
        "_new": cls,
        "_slow": _slow_decode,
        "_cls": cls,
        "_fields": fields,
        "_use_v2": use_v2,
    }
    namespace.update({f"_d{i}": f.default for i, f in enumerate(fields)})
    exec("\n".join(lines), namespace)  # noqa: S102 - source built above from the class's own field list
    return namespace["from_ext"]


def _compile_to_ext(fields: list[_Field], use_v2: bool):
    fixed, optional = [], []
    for f in fields:
        key = repr(f.v2 if use_v2 else f.wire)
        value = f"self.{f.attr}"
        if f.kind is int:
            text = f"str({value})"
        elif f.kind is bool:
            text = f"('true' if {value} else 'false')"
        else:
            text = value
        if f.required or f.default is not None:
            fixed.append(f"{key}: {text}")
        else:
            optional.append((key, value, text))
    lines = ["def to_ext(self):", "    ext = {" + ", ".join(fixed) + "}"]
    for key, value, text in optional:
        lines.append(f"    if {value} is not None: ext[{key}] = {text}")
    lines.append("    return ext")
    namespace: dict = {}
    exec("\n".join(lines), namespace)  # noqa: S102
    return namespace["to_ext"]


def header(cls: type) -> type:
    """Compile ``from_ext`` (classmethod) and ``to_ext`` for a header dataclass (and the V2 pair when
    every field has a one-letter key)."""
    fields = _fields_of(cls)
    cls.FIELDS = tuple(fields)
    cls.from_ext = staticmethod(_compile_from_ext(cls, fields, False))
    cls.to_ext = _compile_to_ext(fields, False)
    if fields and all(f.v2 for f in fields):
        cls.from_ext_v2 = staticmethod(_compile_from_ext(cls, fields, True))
        cls.to_ext_v2 = _compile_to_ext(fields, True)
    return cls


# ====================================================================== send


@header
@dataclass(slots=True)
class SendMessageRequestHeader:
    """SEND_MESSAGE (long names) and SEND_MESSAGE_V2 / SEND_BATCH_MESSAGE (keys ``a``..``n``)."""

    producer_group: str = wire(v2="a")
    topic: str = wire(v2="b")
    default_topic: str = wire(v2="c")
    default_topic_queue_nums: int = wire(v2="d")
    queue_id: int = wire(v2="e")
    sys_flag: int = wire(v2="f")
    born_timestamp: int = wire(v2="g")
    flag: int = wire(v2="h")
    properties: str | None = wire(default=None, v2="i")
    reconsume_times: int | None = wire(default=None, v2="j")
    unit_mode: bool | None = wire(default=None, v2="k")
    max_reconsume_times: int | None = wire(default=None, v2="l")
    batch: bool | None = wire(default=None, v2="m")
    broker_name: str | None = wire("bname", default=None, v2="n")


@header
@dataclass(slots=True)
class SendMessageResponseHeader:
    """Answer to a send (codes 0/10/11/12). ``msg_id`` is the offset message id (comma-joined for batches)."""

    msg_id: str = wire("msgId")
    queue_id: int
    queue_offset: int
    transaction_id: str | None = None
    batch_uniq_id: str | None = None
    recall_handle: str | None = None
    msg_region: str | None = wire("MSG_REGION", default=None)
    trace_on: bool | None = wire("TRACE_ON", default=None)


@header
@dataclass(slots=True)
class ReplyMessageRequestHeader:
    """PUSH_REPLY_MESSAGE_TO_CLIENT (broker -> requesting client in request/reply)."""

    producer_group: str
    topic: str
    default_topic: str
    default_topic_queue_nums: int
    queue_id: int
    sys_flag: int
    born_timestamp: int
    flag: int
    born_host: str
    store_host: str
    store_timestamp: int
    properties: str | None = None
    reconsume_times: int | None = None
    unit_mode: bool = False


# ====================================================================== pull


@header
@dataclass(slots=True)
class PullMessageRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    queue_offset: int
    max_msg_nums: int
    sys_flag: int
    commit_offset: int
    suspend_timeout_millis: int
    sub_version: int
    subscription: str | None = None
    expression_type: str | None = None
    max_msg_bytes: int | None = None
    request_source: int | None = None
    proxy_froward_client_id: str | None = None  # sic: Apache's spelling
    broker_name: str | None = wire("bname", default=None)


@header
@dataclass(slots=True)
class PullMessageResponseHeader:
    """All four offsets are required on 0/19/20/21 answers: Java unboxes them. Leave offset_delta unset."""

    suggest_which_broker_id: int
    next_begin_offset: int
    min_offset: int
    max_offset: int
    offset_delta: int | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None
    forbidden_type: int | None = None


# ====================================================================== offsets


@header
@dataclass(slots=True)
class QueryConsumerOffsetRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    set_zero_if_not_found: bool | None = None
    broker_name: str | None = wire("bname", default=None)


@header
@dataclass(slots=True)
class QueryConsumerOffsetResponseHeader:
    offset: int


@header
@dataclass(slots=True)
class UpdateConsumerOffsetRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    commit_offset: int
    broker_name: str | None = wire("bname", default=None)


@header
@dataclass(slots=True)
class GetMaxOffsetRequestHeader:
    topic: str
    queue_id: int
    committed: bool = True
    broker_name: str | None = wire("bname", default=None)


@header
@dataclass(slots=True)
class GetMaxOffsetResponseHeader:
    offset: int


@header
@dataclass(slots=True)
class GetMinOffsetRequestHeader:
    topic: str
    queue_id: int
    broker_name: str | None = wire("bname", default=None)


@header
@dataclass(slots=True)
class GetMinOffsetResponseHeader:
    offset: int


@header
@dataclass(slots=True)
class GetEarliestMsgStoretimeRequestHeader:
    topic: str
    queue_id: int
    broker_name: str | None = wire("bname", default=None)


@header
@dataclass(slots=True)
class GetEarliestMsgStoretimeResponseHeader:
    timestamp: int


@header
@dataclass(slots=True)
class SearchOffsetRequestHeader:
    """``boundary_type`` is ``lower`` (default) or ``upper``."""

    topic: str
    queue_id: int
    timestamp: int
    boundary_type: str | None = None
    broker_name: str | None = wire("bname", default=None)


@header
@dataclass(slots=True)
class SearchOffsetResponseHeader:
    offset: int


# ====================================================================== client management


@header
@dataclass(slots=True)
class HeartbeatRequestHeader:
    """HEART_BEAT has no fields of its own (Java 5.x sends only the rpc keys); the data is the body."""


@header
@dataclass(slots=True)
class UnregisterClientRequestHeader:
    client_id: str = wire("clientID")
    producer_group: str | None = None
    consumer_group: str | None = None


@header
@dataclass(slots=True)
class GetConsumerListByGroupRequestHeader:
    consumer_group: str


@header
@dataclass(slots=True)
class ConsumerSendMsgBackRequestHeader:
    """``offset`` is the commit-log offset of the message that failed."""

    offset: int
    group: str
    delay_level: int
    origin_msg_id: str | None = None
    origin_topic: str | None = None
    unit_mode: bool = False
    max_reconsume_times: int | None = None
    broker_name: str | None = wire("bname", default=None)


@header
@dataclass(slots=True)
class LockBatchMqRequestHeader:
    """LOCK_BATCH_MQ: no fields; the request is the body."""


@header
@dataclass(slots=True)
class UnlockBatchMqRequestHeader:
    """UNLOCK_BATCH_MQ: no fields; the request is the body."""



@header
@dataclass(slots=True)
class PopMessageRequestHeader:
    """POP_MESSAGE: ``queue_id`` -1 pops any readable queue; ``poll_time`` ms of long polling."""

    consumer_group: str
    topic: str
    queue_id: int
    max_msg_nums: int
    invisible_time: int
    poll_time: int
    born_time: int
    init_mode: int
    exp_type: str | None = None
    exp: str | None = None
    order: bool | None = None
    attempt_id: str | None = None


@header
@dataclass(slots=True)
class PopMessageResponseHeader:
    pop_time: int
    invisible_time: int
    revive_qid: int
    rest_num: int
    start_offset_info: str | None = None
    msg_offset_info: str | None = None
    order_count_info: str | None = None


@header
@dataclass(slots=True)
class AckMessageRequestHeader:
    """ACK_MESSAGE: ``topic`` is where the message lives (the retry topic for a retried one)."""

    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int


@header
@dataclass(slots=True)
class ChangeInvisibleTimeRequestHeader:
    consumer_group: str
    topic: str
    queue_id: int
    extra_info: str
    offset: int
    invisible_time: int


@header
@dataclass(slots=True)
class ChangeInvisibleTimeResponseHeader:
    pop_time: int
    invisible_time: int
    revive_qid: int


# ====================================================================== name server


@header
@dataclass(slots=True)
class RegisterBrokerRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    ha_server_addr: str
    broker_id: int
    heartbeat_timeout_millis: int | None = None
    enable_acting_master: bool | None = None
    compressed: bool = False
    body_crc32: int = 0


@header
@dataclass(slots=True)
class RegisterBrokerResponseHeader:
    ha_server_addr: str | None = None
    master_addr: str | None = None


@header
@dataclass(slots=True)
class UnRegisterBrokerRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@header
@dataclass(slots=True)
class BrokerHeartbeatRequestHeader:
    """BROKER_HEARTBEAT (5.x lightweight keep-alive to the name server)."""

    cluster_name: str
    broker_addr: str
    broker_name: str
    broker_id: int | None = None
    epoch: int | None = None
    max_offset: int | None = None
    confirm_offset: int | None = None
    heartbeat_timeout_mills: int | None = None
    election_priority: int | None = None


# ---------------------------------------------------------------- Apache 5.x controller (broker <-> controller)


@header
@dataclass(slots=True)
class GetMetaDataResponseHeader:
    """CONTROLLER_GET_METADATA_INFO answer: which controller leads (brokers send everything else there)."""

    group: str | None = None
    controller_leader_id: str | None = None
    controller_leader_address: str | None = None
    is_leader: bool | None = None
    peers: str | None = None


@header
@dataclass(slots=True)
class GetNextBrokerIdRequestHeader:
    cluster_name: str
    broker_name: str


@header
@dataclass(slots=True)
class GetNextBrokerIdResponseHeader:
    cluster_name: str | None = None
    broker_name: str | None = None
    next_broker_id: int | None = None


@header
@dataclass(slots=True)
class ApplyBrokerIdRequestHeader:
    """CONTROLLER_APPLY_BROKER_ID: claims ``applied_broker_id``; the check code (``addr;millis``) lets the same
    broker claim it again after a crash."""

    cluster_name: str
    broker_name: str
    applied_broker_id: int
    register_check_code: str


@header
@dataclass(slots=True)
class RegisterBrokerToControllerRequestHeader:
    cluster_name: str
    broker_name: str
    broker_id: int
    broker_address: str
    invoke_time: int = 0


@header
@dataclass(slots=True)
class ReplicaRoleHeader:
    """Who is master of a broker group at which epoch: the answer header of REGISTER_BROKER_TO_CONTROLLER,
    ELECT_MASTER and GET_REPLICA_INFO, and the header of NOTIFY_BROKER_ROLE_CHANGED (each carries the fields
    it has; the master's fields are absent while the group has none)."""

    master_broker_id: int | None = None
    master_address: str | None = None
    master_epoch: int | None = None
    sync_state_set_epoch: int | None = None
    cluster_name: str | None = None
    broker_name: str | None = None


@header
@dataclass(slots=True)
class ElectMasterRequestHeader:
    """CONTROLLER_ELECT_MASTER as a broker sends it (``designate_elect`` false: elect whoever is best)."""

    cluster_name: str = ""
    broker_name: str = ""
    broker_id: int = -1
    designate_elect: bool = False
    invoke_time: int | None = None


@header
@dataclass(slots=True)
class GetReplicaInfoRequestHeader:
    broker_name: str


@header
@dataclass(slots=True)
class AlterSyncStateSetRequestHeader:
    """CONTROLLER_ALTER_SYNC_STATE_SET, sent by the master of ``master_epoch``; the body is the new set."""

    broker_name: str
    master_broker_id: int
    master_epoch: int
    invoke_time: int = 0


@header
@dataclass(slots=True)
class GetBrokerMemberGroupRequestHeader:
    cluster_name: str
    broker_name: str


@header
@dataclass(slots=True)
class GetRouteInfoRequestHeader:
    topic: str
    accept_standard_json_only: bool | None = None


@header
@dataclass(slots=True)
class RegisterTopicRequestHeader:
    """REGISTER_TOPIC_IN_NAMESRV; the route to register is the body."""

    topic: str


@header
@dataclass(slots=True)
class PutKVConfigRequestHeader:
    namespace: str
    key: str
    value: str


@header
@dataclass(slots=True)
class GetKVConfigRequestHeader:
    namespace: str
    key: str


@header
@dataclass(slots=True)
class GetKVConfigResponseHeader:
    value: str | None = None


@header
@dataclass(slots=True)
class DeleteKVConfigRequestHeader:
    namespace: str
    key: str


@header
@dataclass(slots=True)
class GetKVListByNamespaceRequestHeader:
    namespace: str


@header
@dataclass(slots=True)
class WipeWritePermOfBrokerRequestHeader:
    broker_name: str


@header
@dataclass(slots=True)
class WipeWritePermOfBrokerResponseHeader:
    wipe_topic_count: int


@header
@dataclass(slots=True)
class AddWritePermOfBrokerRequestHeader:
    broker_name: str


@header
@dataclass(slots=True)
class AddWritePermOfBrokerResponseHeader:
    add_topic_count: int


@header
@dataclass(slots=True)
class DeleteTopicFromNamesrvRequestHeader:
    topic: str
    cluster_name: str | None = None


@header
@dataclass(slots=True)
class GetTopicsByClusterRequestHeader:
    cluster: str


@header
@dataclass(slots=True)
class QueryDataVersionRequestHeader:
    broker_name: str
    broker_addr: str
    cluster_name: str
    broker_id: int


@header
@dataclass(slots=True)
class QueryDataVersionResponseHeader:
    changed: bool


# ====================================================================== transactions


@header
@dataclass(slots=True)
class EndTransactionRequestHeader:
    """``commit_or_rollback``: 0 unknown, 8 commit, 12 rollback (MessageSysFlag transaction types)."""

    producer_group: str
    tran_state_table_offset: int
    commit_log_offset: int
    commit_or_rollback: int
    msg_id: str
    from_transaction_check: bool = False
    transaction_id: str | None = None
    topic: str | None = None
    broker_name: str | None = wire("bname", default=None)


@header
@dataclass(slots=True)
class CheckTransactionStateRequestHeader:
    tran_state_table_offset: int
    commit_log_offset: int
    topic: str | None = None
    msg_id: str | None = None
    transaction_id: str | None = None
    offset_msg_id: str | None = None
    broker_name: str | None = wire("bname", default=None)


# ====================================================================== server -> client


@header
@dataclass(slots=True)
class NotifyConsumerIdsChangedRequestHeader:
    consumer_group: str


@header
@dataclass(slots=True)
class ResetOffsetRequestHeader:
    """RESET_CONSUMER_CLIENT_OFFSET (to clients) and INVOKE_BROKER_TO_RESET_OFFSET (from mqadmin)."""

    topic: str
    group: str
    timestamp: int
    is_force: bool = wire("isForce")
    queue_id: int = -1
    offset: int | None = None


@header
@dataclass(slots=True)
class GetConsumerStatusRequestHeader:
    """GET_CONSUMER_STATUS_FROM_CLIENT and INVOKE_BROKER_TO_GET_CONSUMER_STATUS."""

    topic: str
    group: str
    client_addr: str | None = None


@header
@dataclass(slots=True)
class GetConsumerRunningInfoRequestHeader:
    consumer_group: str
    client_id: str
    jstack_enable: bool = False


@header
@dataclass(slots=True)
class ConsumeMessageDirectlyResultRequestHeader:
    consumer_group: str
    client_id: str | None = None
    msg_id: str | None = None
    broker_name: str | None = None
    topic: str | None = None
    topic_sys_flag: int | None = None
    group_sys_flag: int | None = None


# ====================================================================== admin


@header
@dataclass(slots=True)
class CreateTopicRequestHeader:
    """UPDATE_AND_CREATE_TOPIC. ``attributes`` is comma-joined ``key=value`` (mqadmin adds +/- prefixes)."""

    topic: str
    default_topic: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_filter_type: str
    order: bool
    topic_sys_flag: int | None = None
    attributes: str | None = None
    force: bool = False


@header
@dataclass(slots=True)
class DeleteTopicRequestHeader:
    """DELETE_TOPIC_IN_BROKER."""

    topic: str


@header
@dataclass(slots=True)
class GetTopicStatsInfoRequestHeader:
    topic: str


@header
@dataclass(slots=True)
class GetTopicConfigRequestHeader:
    topic: str


@header
@dataclass(slots=True)
class GetConsumerConnectionListRequestHeader:
    consumer_group: str


@header
@dataclass(slots=True)
class GetProducerConnectionListRequestHeader:
    producer_group: str


@header
@dataclass(slots=True)
class GetConsumeStatsRequestHeader:
    """``topic_list`` (comma-separated) wins over ``topic`` when given."""

    consumer_group: str
    topic: str | None = None
    topic_list: str | None = None


@header
@dataclass(slots=True)
class GetConsumeStatsInBrokerHeader:
    """GET_BROKER_CONSUME_STATS."""

    is_order: bool = wire("isOrder")


@header
@dataclass(slots=True)
class DeleteSubscriptionGroupRequestHeader:
    group_name: str
    clean_offset: bool = False


@header
@dataclass(slots=True)
class GetSubscriptionGroupConfigRequestHeader:
    group: str


@header
@dataclass(slots=True)
class ViewMessageRequestHeader:
    """VIEW_MESSAGE_BY_ID: ``offset`` is the commit-log offset decoded from the offset message id."""

    offset: int
    topic: str | None = None


@header
@dataclass(slots=True)
class QueryMessageRequestHeader:
    """QUERY_MESSAGE; ext ``_UNIQUE_KEY_QUERY=true`` (not a field here) asks for a unique-key lookup.
    ``index_type`` (5.5: ``K`` keys, ``T`` tags) and ``last_key`` (paging) are sent by newer clients."""

    topic: str
    key: str
    max_num: int
    begin_timestamp: int
    end_timestamp: int
    index_type: str | None = None
    last_key: str | None = None


@header
@dataclass(slots=True)
class QueryMessageResponseHeader:
    index_last_update_timestamp: int
    index_last_update_phyoffset: int


@header
@dataclass(slots=True)
class GetBrokerConfigResponseHeader:
    """``version`` holds the broker config's DataVersion as JSON text."""

    version: str


@header
@dataclass(slots=True)
class QueryTopicConsumeByWhoRequestHeader:
    topic: str


@header
@dataclass(slots=True)
class QueryTopicsByConsumerRequestHeader:
    group: str


@header
@dataclass(slots=True)
class QuerySubscriptionByConsumerRequestHeader:
    group: str
    topic: str | None = None


@header
@dataclass(slots=True)
class QueryConsumeTimeSpanRequestHeader:
    topic: str
    group: str


@header
@dataclass(slots=True)
class QueryCorrectionOffsetHeader:
    compare_group: str
    topic: str
    filter_groups: str | None = None


@header
@dataclass(slots=True)
class QueryConsumeQueueRequestHeader:
    topic: str | None = None
    queue_id: int = 0
    index: int = 0
    count: int = 0
    consumer_group: str | None = None


@header
@dataclass(slots=True)
class CloneGroupOffsetRequestHeader:
    src_group: str
    dest_group: str
    topic: str | None = None
    offline: bool = False


@header
@dataclass(slots=True)
class ViewBrokerStatsDataRequestHeader:
    stats_name: str
    stats_key: str


@header
@dataclass(slots=True)
class ResumeCheckHalfMessageRequestHeader:
    topic: str | None = None
    msg_id: str | None = None


@header
@dataclass(slots=True)
class GetAllTopicConfigRequestHeader:
    """Paging fields of GET_ALL_TOPIC_CONFIG. Optional here although Java 5.x marks ``topicSeq`` required:
    4.x tools send this request with no header at all, and the clients are the specification."""

    topic_seq: int | None = None
    data_version: str | None = None
    max_topic_num: int | None = None


@header
@dataclass(slots=True)
class GetAllTopicConfigResponseHeader:
    total_topic_num: int


@header
@dataclass(slots=True)
class GetAllSubscriptionGroupRequestHeader:
    """Paging fields of GET_ALL_SUBSCRIPTIONGROUP_CONFIG (optional for the same reason as topics)."""

    group_seq: int | None = None
    data_version: str | None = None
    max_group_num: int | None = None


@header
@dataclass(slots=True)
class GetAllSubscriptionGroupResponseHeader:
    total_group_num: int


# ====================================================================== access control (ACL 2.0)


@header
@dataclass(slots=True)
class AuthUserRequestHeader:
    """AUTH_CREATE_USER, AUTH_UPDATE_USER, AUTH_DELETE_USER and AUTH_GET_USER (the user's fields in the body)."""

    username: str | None = None


@header
@dataclass(slots=True)
class ListUsersRequestHeader:
    filter: str | None = None


@header
@dataclass(slots=True)
class AuthAclRequestHeader:
    """AUTH_CREATE_ACL, AUTH_UPDATE_ACL and AUTH_GET_ACL: ``subject`` is ``User:<name>``."""

    subject: str | None = None


@header
@dataclass(slots=True)
class DeleteAclRequestHeader:
    subject: str | None = None
    policy_type: str | None = None
    resource: str | None = None


@header
@dataclass(slots=True)
class ListAclsRequestHeader:
    subject_filter: str | None = None
    resource_filter: str | None = None
