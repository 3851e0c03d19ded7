"""MQTT topics and messages as RocketMQ topics, tags and properties, the same both ways (docs/mqtt.md).

An MQTT topic ``first/rest...`` is RocketMQ topic ``first`` with tag ``rest...`` (the levels after the
first, ``/`` kept); the full MQTT topic also travels in the :data:`MQTT_TOPIC` property. So
``sensors/room1/temp`` is topic ``sensors``, tag ``room1/temp``: a Java consumer selects exact MQTT
topics with a tag expression (``room1/temp || room2/temp``), and a Java producer reaches the MQTT
subscribers of ``sensors/room1/temp`` by sending tag ``room1/temp`` to ``sensors``, no property needed.
An MQTT subscription becomes a RocketMQ subscription to its first level: an exact filter is an exact tag,
one with ``+`` or ``#`` below the first level is ``*``, and the gateway matches each message's MQTT
topic against the filter, which is always the final word (the tag only lets the broker skip messages).

MQTT 5 user properties are RocketMQ user properties of the same name (so SQL92 selects on them); the
other MQTT 5 message properties have a property each (:data:`GATEWAY_PROPERTIES`). Everything here is
a pure function of its arguments; the current time is passed in.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ferrymq.sdk.message import Message
from ferrymq.wire.message import SYSTEM_PROPERTIES, MessageConst
from ferrymq.wire.topics import is_retry_or_dlq, is_system_topic, validate_group, validate_topic

from ..properties import CONTENT_TYPE
from .packets import Publish
from .properties import NO_PROPERTIES, Properties
from .reason_codes import ReasonCode
from .topics import has_wildcard

#: the full MQTT topic of a message (authoritative when present: a trailing ``/`` has no tag to show it)
MQTT_TOPIC = "mqttTopic"
#: the QoS the message was published with (a message without it came from a RocketMQ client: QoS 1)
QOS = "mqttQos"
#: MQTT 5 Response Topic
RESPONSE_TOPIC = "mqttResponseTopic"
#: MQTT 5 Correlation Data, base64 (a property value is text)
CORRELATION_DATA = "mqttCorrelationData"
#: MQTT 5 Payload Format Indicator, ``1`` when the payload is UTF-8 text
PAYLOAD_FORMAT = "mqttPayloadFormat"
#: the end of the MQTT 5 Message Expiry Interval, epoch ms: the interval left is computed on delivery
EXPIRE_AT = "mqttExpireAt"
#: the client identifier of the device that published the message (MQTT 5 No Local needs it)
CLIENT_ID = "mqttClientId"
#: ``1`` when the device published the message with RETAIN (MQTT 5 Retain As Published shows it)
RETAIN = "mqttRetain"

#: the properties this mapping writes besides user properties; a device may not set them as user properties
GATEWAY_PROPERTIES = frozenset((MQTT_TOPIC, QOS, RESPONSE_TOPIC, CORRELATION_DATA, PAYLOAD_FORMAT, EXPIRE_AT,
                                CLIENT_ID, RETAIN, CONTENT_TYPE))
#: the QoS of a message a RocketMQ client sent: stored once by the broker, delivered at least once
ROCKETMQ_QOS = 1
#: property names and values cannot hold RocketMQ's separators (``name\x01value\x02``)
_SEPARATORS = ("\x01", "\x02")
_TAG_EXPRESSION_SEPARATOR = "||"


class MappingError(ValueError):
    """An MQTT topic, filter or message RocketMQ cannot hold; ``reason_code`` is the MQTT 5 answer."""

    def __init__(self, reason_code: ReasonCode, message: str):
        super().__init__(message)
        self.reason_code = reason_code


def rocketmq_topic(first_level: str) -> str:
    """``first_level`` if it names a topic a device may use: a legal RocketMQ name (``[a-zA-Z0-9_-]``, at
    most 127 characters; ``%`` and ``|`` are legal in RocketMQ only for its own retry and DLQ topics) that
    is not a system, retry or DLQ topic. ``$SYS``-style MQTT topics fail here too."""
    problem = validate_topic(first_level)
    if problem is None and ("%" in first_level or "|" in first_level or is_retry_or_dlq(first_level)
                            or is_system_topic(first_level)):
        problem = f"{first_level} is a RocketMQ system topic or uses its reserved characters '%' and '|'"
    if problem is not None:
        raise MappingError(ReasonCode.TOPIC_NAME_INVALID,
                           f"the first level of an MQTT topic is the RocketMQ topic: {problem}")
    return first_level


def split_topic(mqtt_topic: str) -> tuple[str, str | None]:
    """The RocketMQ topic and tag of an MQTT topic name; ``None`` for a one-level name (no tag)."""
    first, slash, rest = mqtt_topic.partition("/")
    return rocketmq_topic(first), (rest if slash and rest else None)


def mqtt_topic(topic: str, properties: Mapping[str, str]) -> str:
    """The MQTT topic of a RocketMQ message: its :data:`MQTT_TOPIC` when that is under ``topic``, else
    ``topic/tag`` (or ``topic`` without a tag), the inverse of :func:`split_topic`."""
    named = properties.get(MQTT_TOPIC)
    if named is not None and (named == topic or named.startswith(topic + "/")) and not has_wildcard(named):
        return named
    tag = properties.get(MessageConst.TAGS)
    return f"{topic}/{tag}" if tag else topic


@dataclass(frozen=True, slots=True)
class TopicSubscription:
    """What one MQTT topic filter (shared or not, the share removed) asks of RocketMQ: the topic, and
    the one tag that selects exactly the filter's messages, or ``None`` when every message of the topic
    must be fetched and matched in the gateway."""

    topic: str
    tag: str | None


def subscription(topic_filter: str) -> TopicSubscription:
    """The RocketMQ side of a (valid, non-shared) topic filter.

    A wildcard in the first level would subscribe to every RocketMQ topic: *Wildcard Subscriptions not
    supported* (0xA2), the nearest MQTT 5 code (wildcards below the first level are supported). A first
    level that is no device topic is *Topic Filter invalid* (SUBACK has no *Topic Name invalid*).
    """
    first, slash, rest = topic_filter.partition("/")
    if has_wildcard(first):
        raise MappingError(ReasonCode.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED,
                           "the first level of a topic filter names the RocketMQ topic and cannot be a wildcard")
    try:
        topic = rocketmq_topic(first)
    except MappingError as error:
        raise MappingError(ReasonCode.TOPIC_FILTER_INVALID, str(error)) from None
    exact = slash and rest and not has_wildcard(rest) and _is_tag_expressible(rest)
    return TopicSubscription(topic, rest if exact else None)


def share_group(share_name: str) -> str:
    """The RocketMQ consumer group of ``$share/{share_name}/...``: the share name itself, so that every
    gateway's members of a share split its messages as one clustering group does (and a RocketMQ consumer
    of that group takes its share too). It must be a legal group name: else *Topic Filter invalid*."""
    problem = validate_group(share_name)
    if problem is None and ("%" in share_name or "|" in share_name):
        problem = f"{share_name} uses RocketMQ's reserved characters '%' and '|'"
    if problem is not None:
        raise MappingError(ReasonCode.TOPIC_FILTER_INVALID, f"the share name is the RocketMQ group: {problem}")
    return share_name


def _is_tag_expressible(tag: str) -> bool:
    """Whether a tag expression can name ``tag`` alone: expressions split on ``||`` and trim each tag,
    and ``*`` means every tag."""
    return _TAG_EXPRESSION_SEPARATOR not in tag and tag == tag.strip() and tag != "*"


def tag_expression(tags: Iterable[str | None]) -> str:
    """The one tag expression for all of a client's subscriptions to a RocketMQ topic (a consumer has
    one subscription per topic): the tags joined with ``||``, or ``*`` if one of them needs every tag."""
    tags = set(tags)
    if not tags or None in tags:
        return "*"
    return " || ".join(sorted(tags))


def _check_user_properties(pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """MQTT 5 user properties as RocketMQ ones. A RocketMQ message holds one value per name and keeps
    its own names for itself, so a repeated name, a system or gateway name, or a separator character
    is refused (*Implementation specific error*) rather than silently changed."""
    props: dict[str, str] = {}
    for name, value in pairs:
        if name in SYSTEM_PROPERTIES or name in GATEWAY_PROPERTIES:
            raise MappingError(ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR,
                               f"user property {name!r} is a RocketMQ or gateway property name")
        if name in props:
            raise MappingError(ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR,
                               f"user property {name!r} is repeated; a RocketMQ message has one value per name")
        if not name or any(sep in name or sep in value for sep in _SEPARATORS):
            raise MappingError(ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR,
                               f"user property {name!r} is empty or holds a RocketMQ separator (0x01, 0x02)")
        props[name] = value
    return props


def to_rocketmq(publish: Publish, now_ms: int, client_id: str | None = None) -> Message:
    """The RocketMQ message a device's PUBLISH becomes (its topic name resolved from any alias);
    ``client_id`` is the publishing device's."""
    topic, tag = split_topic(publish.topic_name)
    p = publish.properties
    props = _check_user_properties(p.user_property)
    props[MQTT_TOPIC] = publish.topic_name
    props[QOS] = str(publish.qos)
    if client_id is not None:
        props[CLIENT_ID] = client_id
    if publish.retain:
        props[RETAIN] = "1"
    if p.content_type is not None:
        props[CONTENT_TYPE] = p.content_type
    if p.response_topic is not None:
        props[RESPONSE_TOPIC] = p.response_topic
    if p.correlation_data is not None:
        props[CORRELATION_DATA] = base64.b64encode(p.correlation_data).decode()
    if p.payload_format_indicator:
        props[PAYLOAD_FORMAT] = "1"
    if p.message_expiry_interval is not None:
        props[EXPIRE_AT] = str(now_ms + p.message_expiry_interval * 1000)
    return Message(topic, publish.payload, tags=tag, properties=props)


@dataclass(frozen=True, slots=True)
class Delivery:
    """A RocketMQ message as MQTT sends it, before a subscription fixes its QoS and packet identifier."""

    topic_name: str
    payload: bytes
    qos: int
    properties: Properties = NO_PROPERTIES
    #: the client identifier of the device that published it (``None``: a RocketMQ client did)
    publisher: str | None = None
    #: published with RETAIN
    retain: bool = False


def to_delivery(topic: str, properties: Mapping[str, str], body: bytes, now_ms: int) -> Delivery | None:
    """What MQTT subscribers receive of a RocketMQ message (from a device or any RocketMQ client);
    ``None`` once its MQTT 5 message expiry has passed (spec 3.3.2.3.3: it is not delivered), or when
    its tag holds ``+`` or ``#``, which no MQTT topic name may."""
    topic_name = mqtt_topic(topic, properties)
    if has_wildcard(topic_name):
        return None
    fields: dict[str, object] = {}
    expire_at = _int(properties.get(EXPIRE_AT))
    if expire_at is not None:
        left_ms = expire_at - now_ms
        if left_ms <= 0:
            return None
        fields["message_expiry_interval"] = math.ceil(left_ms / 1000)
    if CONTENT_TYPE in properties:
        fields["content_type"] = properties[CONTENT_TYPE]
    if RESPONSE_TOPIC in properties:
        fields["response_topic"] = properties[RESPONSE_TOPIC]
    if CORRELATION_DATA in properties:
        try:
            fields["correlation_data"] = base64.b64decode(properties[CORRELATION_DATA], validate=True)
        except ValueError:
            pass  # not one this mapping wrote: no correlation data rather than wrong bytes
    if properties.get(PAYLOAD_FORMAT) == "1":
        fields["payload_format_indicator"] = 1
    user = tuple((k, v) for k, v in properties.items() if k not in SYSTEM_PROPERTIES and k not in GATEWAY_PROPERTIES)
    if user:
        fields["user_property"] = user
    qos = _int(properties.get(QOS))
    return Delivery(topic_name, body, qos if qos in (0, 1, 2) else ROCKETMQ_QOS,
                    Properties(**fields) if fields else NO_PROPERTIES, properties.get(CLIENT_ID),
                    properties.get(RETAIN) == "1")


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


__all__ = ["MQTT_TOPIC", "QOS", "RESPONSE_TOPIC", "CORRELATION_DATA", "PAYLOAD_FORMAT", "EXPIRE_AT", "CLIENT_ID",
           "RETAIN", "GATEWAY_PROPERTIES", "ROCKETMQ_QOS", "MappingError", "rocketmq_topic", "split_topic",
           "mqtt_topic", "TopicSubscription", "subscription", "share_group", "tag_expression", "to_rocketmq",
           "Delivery", "to_delivery"]
