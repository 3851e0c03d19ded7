"""Topic names, topic filters and matching (spec 4.7, 4.8.2).

A filter is split on ``/`` into levels: ``+`` matches exactly one level (possibly empty), ``#`` matches
the parent level and any number of levels below, and both must fill a whole level, ``#`` only the last.
Topics starting with ``$`` (``$SYS/...``) are not matched by a wildcard in the first level
(MQTT-4.7.2-1), so ``#`` does not deliver server internals. ``$share/{group}/{filter}`` is a shared
subscription: :func:`parse_shared` separates the group from the filter it applies to.
"""

from __future__ import annotations

from dataclasses import dataclass

SHARE_PREFIX = "$share/"


def has_wildcard(topic: str) -> bool:
    return "+" in topic or "#" in topic


def is_valid_topic_name(name: str) -> bool:
    """A topic name for PUBLISH: at least one character and no wildcard (MQTT-4.7.3-1, 3.3.2-2)."""
    return bool(name) and not has_wildcard(name)


def is_valid_filter(topic_filter: str) -> bool:
    """A well-formed topic filter, shared (``$share/...``) or not."""
    if topic_filter.startswith(SHARE_PREFIX):
        try:
            parse_shared(topic_filter)
        except ValueError:
            return False
        return True
    return _is_valid_plain_filter(topic_filter)


def _is_valid_plain_filter(topic_filter: str) -> bool:
    if not topic_filter:
        return False
    levels = topic_filter.split("/")
    for index, level in enumerate(levels):
        if level == "#":
            if index != len(levels) - 1:
                return False
        elif level != "+" and has_wildcard(level):
            return False
    return True


@dataclass(frozen=True, slots=True)
class SharedFilter:
    """``$share/{group}/{filter}``: the messages matching ``topic_filter`` go to one member of ``group``."""

    group: str
    topic_filter: str


def parse_shared(topic_filter: str) -> SharedFilter | None:
    """The group and filter of a shared subscription; ``None`` for an ordinary filter.

    ``ValueError`` if it starts with ``$share/`` but the group is empty or holds a wildcard, or the
    filter after it is missing or malformed (MQTT 5 spec 4.8.2).
    """
    if not topic_filter.startswith(SHARE_PREFIX):
        return None
    group, slash, rest = topic_filter[len(SHARE_PREFIX):].partition("/")
    if not group or has_wildcard(group):
        raise ValueError(f"share name of {topic_filter!r} is empty or holds a wildcard")
    if not slash or not _is_valid_plain_filter(rest):
        raise ValueError(f"{topic_filter!r} lacks a valid topic filter after the share name")
    return SharedFilter(group, rest)


def matches(topic_filter: str, topic_name: str) -> bool:
    """Whether ``topic_name`` matches the (valid, non-shared) ``topic_filter``."""
    if topic_name.startswith("$") and topic_filter[:1] in ("+", "#"):
        return False
    filter_levels = topic_filter.split("/")
    name_levels = topic_name.split("/")
    for index, level in enumerate(filter_levels):
        if level == "#":
            return True
        if index >= len(name_levels):
            return False
        if level != "+" and level != name_levels[index]:
            return False
    return len(filter_levels) == len(name_levels)


__all__ = ["SHARE_PREFIX", "SharedFilter", "has_wildcard", "is_valid_topic_name", "is_valid_filter",
           "parse_shared", "matches"]
