"""Messages between their HTTP form and RocketMQ's: an envelope or a raw body becomes a
:class:`~ferrymq.sdk.message.Message`, a consumed :class:`~ferrymq.wire.message.MessageExt` a JSON object.

Nothing is invented on the way: a tag is the TAGS property, keys are KEYS (space-separated), a delay
level is DELAY, a delivery time is the 5.x timer property TIMER_DELIVER_MS, and user properties are
user properties, so a Java or Go consumer sees the same message an HTTP consumer does.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from ferrymq.sdk.message import Message, SendResult
from ferrymq.wire.message import SYSTEM_PROPERTIES, MessageConst, MessageExt

from ..properties import CONTENT_TYPE
from .problems import Problem

#: properties the broker and clients use themselves: an envelope may not set them as user properties
_SYSTEM = SYSTEM_PROPERTIES


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def from_envelope(topic: str, env: Mapping[str, Any], where: str = "") -> tuple[Message, str | None]:
    """An envelope (already checked against the schema) as a Message, and its sharding key.
    ``where`` is the envelope's JSON pointer in the request, for the problems it raises."""
    body_text = env["body"]
    if env.get("bodyEncoding") == "base64":
        try:
            body = base64.b64decode(body_text, validate=True)
        except ValueError:  # binascii.Error, or text that is not ASCII at all
            raise Problem(400, "body is not valid base64", f"{where}/body") from None
    else:
        body = body_text.encode()
    if not body:
        raise Problem(400, "the message body is empty; RocketMQ does not store empty messages", f"{where}/body")
    properties: dict[str, str] = {}
    for name, value in env.get("properties", {}).items():
        if name in _SYSTEM:
            raise Problem(400, f"property {name!r} is one RocketMQ sets itself; use another name "
                               f"(or the envelope's own member for tags, keys and delays)",
                          f"{where}/properties/{name}")
        properties[name] = _text(value)
    if "contentType" in env:
        properties[CONTENT_TYPE] = env["contentType"]
    keys = env.get("keys")
    msg = Message(topic, body, tags=env.get("tag"), keys=keys.split() if isinstance(keys, str) else keys,
                  properties=properties, delay_level=env.get("delayLevel", 0))
    if "deliverAt" in env:
        msg.properties[MessageConst.TIMER_DELIVER_MS] = str(env["deliverAt"])
    return msg, env.get("shardingKey")


def from_raw(topic: str, body: bytes, content_type: str | None, query: Mapping[str, Any]) -> tuple[Message, str | None]:
    """A raw body, its media type and the query's tag/keys/delay as a Message, and its sharding key."""
    if not body:
        raise Problem(400, "the message body is empty; RocketMQ does not store empty messages", "/")
    properties = {CONTENT_TYPE: content_type} if content_type else {}
    keys = query.get("keys")
    msg = Message(topic, body, tags=query.get("tag"), keys=keys.split() if keys else None,
                  properties=properties, delay_level=query.get("delayLevel", 0))
    if "deliverAt" in query:
        msg.properties[MessageConst.TIMER_DELIVER_MS] = str(query["deliverAt"])
    return msg, query.get("shardingKey")


def send_result(result: SendResult, msg_id: str | None = None, queue_offset: int | None = None,
                offset_msg_id: str | None = None) -> dict[str, Any]:
    mq = result.message_queue
    return {
        "msgId": msg_id or result.msg_id or result.offset_msg_id,
        "offsetMsgId": offset_msg_id or result.offset_msg_id,
        "topic": mq.topic,
        "brokerName": mq.broker_name,
        "queueId": mq.queue_id,
        "queueOffset": result.queue_offset if queue_offset is None else queue_offset,
        "status": result.status.value,
    }


def batch_results(result: SendResult) -> list[dict[str, Any]]:
    """One SendResult for a batch (its ids comma-joined, stored consecutively from queueOffset) as one
    result per message."""
    ids = (result.msg_id or "").split(",")
    offset_ids = result.offset_msg_id.split(",")
    return [send_result(result, msg_id, result.queue_offset + i, offset_ids[i] if i < len(offset_ids) else None)
            for i, msg_id in enumerate(ids)]


def is_text(body: bytes) -> bool:
    try:
        body.decode()
    except UnicodeDecodeError:
        return False
    return True


def to_json(msg: MessageExt, receipt_handle: str, broker_name: str, invisible_until: int) -> dict[str, Any]:
    """A consumed message as the HTTP consumer gets it: text bodies as text, anything else base64."""
    props = msg.properties
    text = is_text(msg.body)
    keys = props.get(MessageConst.KEYS)
    return {
        "receiptHandle": receipt_handle,
        "msgId": props.get(MessageConst.UNIQ_KEY) or msg.msg_id,
        "topic": msg.topic,
        "tag": props.get(MessageConst.TAGS),
        "keys": keys.split(MessageConst.KEY_SEPARATOR) if keys else [],
        "properties": user_properties(props),
        "body": msg.body.decode() if text else base64.b64encode(msg.body).decode(),
        "bodyEncoding": "text" if text else "base64",
        "brokerName": broker_name,
        "queueId": msg.queue_id,
        "queueOffset": msg.queue_offset,
        "bornTimestamp": msg.born_timestamp,
        "storeTimestamp": msg.store_timestamp,
        "reconsumeTimes": msg.reconsume_times,
        "invisibleUntil": invisible_until,
    }


def user_properties(props: Mapping[str, str]) -> dict[str, str]:
    """The properties an HTTP client sees: its own and CONTENT_TYPE, not the broker's and clients' own."""
    return {k: v for k, v in props.items() if k not in _SYSTEM or k == CONTENT_TYPE}
