"""Subscriptions as the broker filters with them: TAG expressions matched by tag hash code.

The consume queue keeps only each message's tag hash, so the broker filters by hash and may
over-deliver on a collision; clients re-check the tag string (Apache does the same). SQL92
subscriptions are :mod:`.sql_subscriptions`' job.
"""

from __future__ import annotations

from ferrymq.wire.bodies import SubscriptionData
from ferrymq.wire.message import java_string_hash

SUB_ALL = "*"
TAG = "TAG"
SQL92 = "SQL92"


def is_tag_type(expression_type: str | None) -> bool:
    return not expression_type or expression_type == TAG


def build_subscription(topic: str, sub_string: str | None, expression_type: str | None = None, sub_version: int = 0) -> SubscriptionData:
    """A SubscriptionData from an expression, as Apache's FilterAPI builds it (``a || b`` for TAG)."""
    if not is_tag_type(expression_type):
        return SubscriptionData(topic=topic, sub_string=sub_string, expression_type=expression_type, sub_version=sub_version)
    sub = SubscriptionData(topic=topic, expression_type=TAG, sub_version=sub_version)
    if not sub_string or sub_string.strip() == SUB_ALL or not sub_string.strip():
        sub.sub_string = SUB_ALL
        return sub
    sub.sub_string = sub_string
    for tag in sub_string.split("||"):
        tag = tag.strip()
        if tag:
            sub.tags_set.append(tag)
            sub.code_set.append(java_string_hash(tag))
    return sub


class TagFilter:
    """Matches consume-queue tag codes against one TAG subscription (None = everything)."""

    __slots__ = ("_all", "_codes")

    def __init__(self, sub: SubscriptionData | None):
        self._all = (
            sub is None
            or sub.class_filter_mode
            or not is_tag_type(sub.expression_type)
            or sub.sub_string in (None, "", SUB_ALL)
        )
        self._codes = frozenset(_int32(c) for c in (sub.code_set if sub is not None else ()))

    @property
    def matches_all(self) -> bool:
        return self._all

    def __call__(self, tags_code: int | None) -> bool:
        if self._all or tags_code is None:
            return True
        return _int32(tags_code) in self._codes

    # the store's MessageFilter protocol
    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return self(tags_code)

    def is_matched_by_commit_log(self, record) -> bool:
        return True


def _int32(value: int) -> int:
    """Java's ``(int) long``: the CQ stores the hash sign-extended in 8 bytes."""
    value &= 0xFFFFFFFF
    return value - 0x100000000 if value & 0x80000000 else value
