"""Subscription expressions: what a consumer registers in its heartbeat and filters on once more itself.

A TAG expression is ``*`` (everything) or tags joined by ``||`` (``TagA || TagB``); the broker filters by
the tags' hash codes, which can collide, so the client checks the tag string again (Java
``PullAPIWrapper.processPullResult``). SQL92 expressions go to the broker as they are.
"""

from __future__ import annotations

import time

from ferrymq.wire.bodies import SubscriptionData
from ferrymq.wire.message import MessageExt, java_string_hash

SUB_ALL = "*"
TAG = "TAG"
SQL92 = "SQL92"


def build_subscription(topic: str, expression: str | None = SUB_ALL, expression_type: str = TAG,
                       sub_version: int | None = None) -> SubscriptionData:
    """The SubscriptionData for ``expression``; ``sub_version`` defaults to now in ms, as Java stamps it."""
    version = sub_version if sub_version is not None else int(time.time() * 1000)
    expression_type = (expression_type or TAG).upper()
    if expression_type not in (TAG, SQL92):
        raise ValueError(f"expression type {expression_type!r} is neither TAG nor SQL92")
    if expression_type == SQL92:
        if not expression or not expression.strip():
            raise ValueError(f"an SQL92 subscription to {topic} needs an expression")
        return SubscriptionData(topic=topic, sub_string=expression.strip(), sub_version=version,
                                expression_type=SQL92)
    text = (expression or "").strip()
    if not text or text == SUB_ALL:
        return SubscriptionData(topic=topic, sub_string=SUB_ALL, sub_version=version, expression_type=TAG)
    tags: list[str] = []
    for part in text.split("||"):
        tag = part.strip()
        if tag and tag not in tags:
            tags.append(tag)
    if not tags:
        raise ValueError(f"tag expression {expression!r} names no tag; use '*' or 'TagA || TagB'")
    return SubscriptionData(
        topic=topic,
        sub_string=text,
        tags_set=tags,
        code_set=[java_string_hash(t) for t in tags],
        sub_version=version,
        expression_type=TAG,
    )


def matches(sub: SubscriptionData, msg: MessageExt) -> bool:
    """The client-side re-check: a TAG subscription with tags keeps only messages whose tag is listed."""
    if sub.expression_type not in (None, "", TAG) or sub.class_filter_mode or not sub.tags_set:
        return True
    return msg.tags is not None and msg.tags in sub.tags_set
