# cython: annotation_typing=False
# (an IntEnum is passed where an int is annotated: Cython would refuse it as not an int)
"""A v2 ``Message`` as the broker stores it: the RocketMQ properties and system flag a send carries.

The mapping is the proxy's (SendMessageActivity): tag -> TAGS, keys -> KEYS, message id -> UNIQ_KEY,
message group -> __SHARDINGKEY (FIFO), delivery timestamp -> TIMER_DELIVER_MS, a transactional message
-> TRAN_MSG and its recovery duration -> CHECK_IMMUNITY_TIME_IN_SECONDS, the producer group being the
topic's name (so a check-back finds the gRPC producers of that topic). Each check refuses with the
proxy's ``Code``; the limits are :class:`Limits`, the proxy's defaults.
"""

from __future__ import annotations

import re
import time
import zlib
from dataclasses import dataclass

from google.protobuf.timestamp_pb2 import Timestamp

from ferrymq.wire.message import RESERVED_PROPERTIES, MessageConst, MessageExt, MessageSysFlag

from .protocol import Code, pb
from .status import Refused


@dataclass(frozen=True, slots=True)
class Limits:
    """The proxy's message checks (ProxyConfig's names and defaults)."""

    maxMessageSize: int = 4 * 1024 * 1024
    maxUserPropertySize: int = 16 * 1024
    userPropertyMaxNum: int = 128
    maxMessageGroupSize: int = 64
    maxDelayTimeMills: int = 24 * 3600 * 1000
    maxTransactionRecoverySecond: int = 3600


@dataclass(slots=True)
class Outgoing:
    """What SEND_MESSAGE_V2 carries for one v2 message (not frozen: a frozen dataclass's fields are set
    through ``object.__setattr__``, a cost every send would pay)."""

    body: bytes
    properties: dict[str, str]
    sys_flag: int
    born_timestamp: int
    message_group: str


#: an ISO control character (U+0000 to U+001F, tab, CR and LF among them, and U+007F to U+009F), which the
#: proxy refuses in a tag, a key, a message group and a property (Java's ``Character.isISOControl``); a
#: regular expression, searched in C, as every send checks them
_CONTROL_CHARACTER = re.compile("[\x00-\x1f\x7f-\x9f]")


def _has_control_character(text: str) -> bool:
    return _CONTROL_CHARACTER.search(text) is not None


def _check_tag(tag: str) -> None:
    if not tag:
        return
    if not tag.strip():
        raise Refused(Code.ILLEGAL_MESSAGE_TAG, "tag cannot be the char sequence of whitespace")
    if "|" in tag:
        raise Refused(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain '|'")
    if _has_control_character(tag):
        raise Refused(Code.ILLEGAL_MESSAGE_TAG, "tag cannot contain control character")


def _check_key(key: str) -> None:
    if key and not key.strip():
        raise Refused(Code.ILLEGAL_MESSAGE_KEY, "key cannot be the char sequence of whitespace")
    if _has_control_character(key):
        raise Refused(Code.ILLEGAL_MESSAGE_KEY, "key cannot contain control character")


def _check_group(group: str, limits: Limits) -> None:
    if not group.strip():
        raise Refused(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot be the char sequence of whitespace")
    if 0 < limits.maxMessageGroupSize <= len(group.encode()):
        raise Refused(Code.ILLEGAL_MESSAGE_GROUP, f"message group exceed the max size {limits.maxMessageGroupSize}")
    if _has_control_character(group):
        raise Refused(Code.ILLEGAL_MESSAGE_GROUP, "message group cannot contain control character")


def check_body(body: bytes, limits: Limits) -> None:
    if not body:
        raise Refused(Code.MESSAGE_BODY_EMPTY, "message body cannot be empty")
    if 0 < limits.maxMessageSize < len(body):
        raise Refused(Code.MESSAGE_BODY_TOO_LARGE, f"message body cannot exceed the max {limits.maxMessageSize}")


def _user_properties(message: pb.Message, limits: Limits) -> tuple[dict[str, str], int]:
    mapping = message.user_properties  # read key by key: dict() of a protobuf map goes through Python's Mapping
    users = {key: mapping[key] for key in mapping}
    if len(users) > limits.userPropertyMaxNum:
        raise Refused(Code.MESSAGE_PROPERTIES_TOO_LARGE, f"too many user properties, max is {limits.userPropertyMaxNum}")
    size = 0
    for key, value in users.items():
        if key in RESERVED_PROPERTIES:
            raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, f"property is used by system: {key}")
        if _has_control_character(key):
            raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the key of property cannot contain control character")
        if _has_control_character(value):
            raise Refused(Code.ILLEGAL_MESSAGE_PROPERTY_KEY, "the value of property cannot contain control character")
        size += len(key.encode()) + len(value.encode())
    return users, size


def _millis(ts) -> int:
    return ts.seconds * 1000 + ts.nanos // 1_000_000


def to_outgoing(message: pb.Message, producer_group: str, born_host: str, limits: Limits) -> Outgoing:
    """The message as the broker stores it, or :class:`Refused` with the proxy's code."""
    check_body(message.body, limits)
    sp = message.system_properties
    props, user_size = _user_properties(message, limits)
    tag = sp.tag
    _check_tag(tag)
    if tag:
        props[MessageConst.TAGS] = tag
    user_size += len(tag.encode())
    for key in sp.keys:
        _check_key(key)
        user_size += len(key.encode())
    if sp.keys:
        props[MessageConst.KEYS] = MessageConst.KEY_SEPARATOR.join(sp.keys)
    if user_size > limits.maxUserPropertySize:
        raise Refused(Code.MESSAGE_PROPERTIES_TOO_LARGE,
                      f"the total size of user property is too large, max is {limits.maxUserPropertySize}")
    if not sp.message_id.strip():
        raise Refused(Code.ILLEGAL_MESSAGE_ID, "message id cannot be empty")
    props[MessageConst.UNIQ_KEY] = sp.message_id

    sys_flag = 0
    if sp.body_encoding == pb.GZIP:
        sys_flag |= MessageSysFlag.COMPRESSED_FLAG
    if sp.message_type == pb.TRANSACTION:
        sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        props[MessageConst.TRANSACTION_PREPARED] = "true"
        if sp.HasField("orphaned_transaction_recovery_duration"):
            seconds = sp.orphaned_transaction_recovery_duration.seconds
            if 0 < limits.maxTransactionRecoverySecond < seconds:
                raise Refused(Code.BAD_REQUEST, "the max transaction recovery time of message is too large, max is "
                                                f"{limits.maxTransactionRecoverySecond}")
            props[MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS] = str(seconds)
    if sp.HasField("delivery_timestamp"):
        deliver = _millis(sp.delivery_timestamp)
        if 0 < limits.maxDelayTimeMills < deliver - int(time.time() * 1000):
            raise Refused(Code.ILLEGAL_DELIVERY_TIME,
                          f"the max delay time of message is too large, max is {limits.maxDelayTimeMills}")
        props[MessageConst.TIMER_DELIVER_MS] = str(deliver)
    props[MessageConst.RECONSUME_TIME] = str(sp.delivery_attempt)
    props[MessageConst.PRODUCER_GROUP] = producer_group
    group = sp.message_group
    if group:
        _check_group(group, limits)
        props[MessageConst.SHARDING_KEY] = group
    if sp.trace_context:
        props[MessageConst.TRACE_CONTEXT] = sp.trace_context
    host = sp.born_host if sp.born_host.strip() else born_host
    if host:
        props[MessageConst.BORN_HOST] = host
    born = _millis(sp.born_timestamp) if sp.HasField("born_timestamp") else 0
    if born > 0:
        props[MessageConst.BORN_TIMESTAMP] = str(born)
    return Outgoing(message.body, props, sys_flag, born or int(time.time() * 1000), group)


def timestamp(millis: int) -> Timestamp:
    """``millis`` as a Timestamp (built whole: ``FromMilliseconds`` is Python code, run twice a received message)."""
    return Timestamp(seconds=millis // 1000, nanos=millis % 1000 * 1_000_000)


def _message_type(props: dict[str, str]) -> int:
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return pb.TRANSACTION
    if any(key in props for key in (MessageConst.DELAY_TIME_LEVEL, MessageConst.TIMER_DELIVER_MS,
                                    MessageConst.TIMER_DELAY_SEC)):
        return pb.DELAY
    if MessageConst.SHARDING_KEY in props:
        return pb.FIFO
    return pb.NORMAL


def to_message(msg: MessageExt, receipt_handle: str = "", delivery_attempt: int | None = None) -> pb.Message:
    """A stored message as a v2 ``Message`` (a received one, or a transaction check-back's): see
    :func:`fill_message`."""
    message = pb.Message()
    fill_message(message, msg, receipt_handle, delivery_attempt)
    return message


def fill_message(target: pb.Message, msg: MessageExt, receipt_handle: str = "",
                 delivery_attempt: int | None = None) -> None:
    """Writes a stored message into ``target``, an empty v2 ``Message`` (a response's own, so that it is not
    built apart and copied in: every received message would pay the copy): the properties the proxy maps
    back (its GrpcConverter), the others but :data:`RESERVED_PROPERTIES` as user properties (a message
    group's ``__SHARDINGKEY`` too, as the proxy's), and the body's CRC32 digest the SDKs verify.
    ``delivery_attempt`` defaults to reconsumeTimes + 1."""
    props = msg.properties
    target.topic.name = msg.topic
    system = target.system_properties
    keys = [key for key in props.get(MessageConst.KEYS, "").split(MessageConst.KEY_SEPARATOR) if key]
    if keys:
        system.keys.extend(keys)
    system.message_id = props.get(MessageConst.UNIQ_KEY, "")
    system.body_digest.type = pb.CRC32
    system.body_digest.checksum = f"{zlib.crc32(msg.body):X}"
    system.body_encoding = pb.GZIP if msg.sys_flag & MessageSysFlag.COMPRESSED_FLAG else pb.IDENTITY
    system.message_type = _message_type(props)
    system.born_timestamp.CopyFrom(timestamp(msg.born_timestamp))
    system.born_host = props.get(MessageConst.BORN_HOST, msg.born_host[0])
    system.store_timestamp.CopyFrom(timestamp(msg.store_timestamp))
    system.store_host = f"{msg.store_host[0]}:{msg.store_host[1]}"
    system.queue_id = msg.queue_id
    system.queue_offset = msg.queue_offset
    system.delivery_attempt = msg.reconsume_times + 1 if delivery_attempt is None else delivery_attempt
    if MessageConst.TAGS in props:
        system.tag = props[MessageConst.TAGS]
    if MessageConst.SHARDING_KEY in props:
        system.message_group = props[MessageConst.SHARDING_KEY]
    if MessageConst.TRACE_CONTEXT in props:
        system.trace_context = props[MessageConst.TRACE_CONTEXT]
    if MessageConst.TIMER_DELIVER_MS in props:
        system.delivery_timestamp.CopyFrom(timestamp(int(props[MessageConst.TIMER_DELIVER_MS])))
    if receipt_handle:
        system.receipt_handle = receipt_handle
    if MessageConst.DLQ_ORIGIN_TOPIC in props and MessageConst.DLQ_ORIGIN_MESSAGE_ID in props:
        system.dead_letter_queue.topic = props[MessageConst.DLQ_ORIGIN_TOPIC]
        system.dead_letter_queue.message_id = props[MessageConst.DLQ_ORIGIN_MESSAGE_ID]
    target.user_properties.update({key: value for key, value in props.items() if key not in RESERVED_PROPERTIES})
    target.body = msg.body
