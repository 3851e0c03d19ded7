"""Subscription-group attributes: the ``+key=value`` / ``-key`` edits UPDATE_AND_CREATE_SUBSCRIPTIONGROUP
carries, checked and applied as Apache's ``AttributeUtil.alterCurrentAttributes`` does.

A refused edit is answered as Apache's broker answers it: SYSTEM_ERROR with the remark its remoting layer
builds from the exception (its text, then its first stack frame), which mqadmin prints to the operator.
"""

from __future__ import annotations

from collections.abc import Mapping

#: the attributes a 5.5 broker knows for a group (``SubscriptionGroupAttributes.ALL``); all changeable
GROUP_ATTRIBUTES = frozenset({
    "priority.factor", "lite.bind.topic", "lite.sub.model", "lite.sub.reset.offset.exclusive",
    "lite.sub.reset.offset.unsubscribe", "lite.sub.client.quota", "lite.sub.client.max.event.cnt",
    "lite.sub.wildcard",
})

#: where Apache's AttributeUtil throws each refusal (the frame its remark names)
_FRAMES = {
    "format": "validate(AttributeUtil.java:98)",
    "duplicate": "duplicationCheck(AttributeUtil.java:92)",
    "create": "alterCurrentAttributes(AttributeUtil.java:53)",
    "nonexistent": "alterCurrentAttributes(AttributeUtil.java:64)",
    "wrong": "alterCurrentAttributes(AttributeUtil.java:68)",
    "unsupported": "validateAlter(AttributeUtil.java:117)",
}


class AttributeRefused(Exception):
    """An edit the broker refuses; ``remark`` is the text Apache's broker answers with."""

    def __init__(self, frame: str, message: str):
        super().__init__(message)
        self.remark = (f"java.lang.RuntimeException: {message}, "
                       f"org.apache.rocketmq.common.attribute.AttributeUtil.{_FRAMES[frame]}")


def alter_attributes(create: bool, current: Mapping[str, str], edits: Mapping[str, str]) -> dict[str, str]:
    """The group's attributes after ``edits`` (``{"+key": value, "-key": ""}``) on ``current``; a new
    group (``create``) may only add. Raises :class:`AttributeRefused`."""
    init: dict[str, str] = {}
    add: dict[str, str] = {}
    update: dict[str, str] = {}
    delete: dict[str, str] = {}
    seen: set[str] = set()
    for key, value in edits.items():
        real = key[1:]
        if not real:
            raise AttributeRefused("format", "kv string format wrong.")
        if real in seen:
            raise AttributeRefused("duplicate", f"alter duplication key. key: {real}")
        seen.add(real)
        if create:
            if not key.startswith("+"):
                raise AttributeRefused("create", f"only add attribute is supported while creating topic. key: {real}")
            init[real] = value
        elif key.startswith("+"):
            (update if real in current else add)[real] = value
        elif key.startswith("-"):
            if real not in current:
                raise AttributeRefused("nonexistent", f"attempt to delete a nonexistent key: {real}")
            delete[real] = value
        else:
            raise AttributeRefused("wrong", f"wrong format key: {real}")
    for edited in (init, add, update, delete):
        for real in edited:
            if real not in GROUP_ATTRIBUTES:
                raise AttributeRefused("unsupported", f"unsupported key: {real}")
    final = {**current, **init, **add, **update}
    for real in delete:
        final.pop(real, None)
    return final
