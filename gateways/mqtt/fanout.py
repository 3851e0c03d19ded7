"""The gateway's non-shared subscriptions indexed by RocketMQ topic: which sessions a message may be for.

The fan-out consumer gets every message of every RocketMQ topic a session subscribes to. Trying each
message against every session would make its cost grow with the devices connected, most of them
subscribed to other topics or to nothing. The index keeps, for each RocketMQ topic (a filter's first
level), the exact filters by the topic name they match and the wildcard filters apart, each with the
sessions that hold it: a message costs one lookup for the exact filters plus one match per distinct
wildcard filter of its own RocketMQ topic, and nothing for the sessions of other topics.
:meth:`.Session.matching` then applies what depends on the session (No Local, subscribed before the
message was stored).

It also keeps each RocketMQ topic's tag expression (:func:`.mapping.tag_expression`), which the fan-out
consumer subscribes with, so a SUBSCRIBE costs what its own filters change, not a pass over all sessions.
Past :data:`MAX_TAGS` distinct tags the expression is ``*``: a fleet subscribed to ``commands/{device}``
would otherwise make it grow with the fleet (and every heartbeat carry it), while the gateway matches
each message against the filters anyway.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from . import mapping, topics
from .session import Session

#: distinct tags a topic's tag expression names at most; beyond, it is ``*``
MAX_TAGS = 64


@dataclass
class _Topic:
    """One RocketMQ topic's filters; sessions are kept in dicts (insertion-ordered sets)."""

    exact: dict[str, dict[Session, None]] = field(default_factory=dict)
    wildcard: dict[str, dict[Session, None]] = field(default_factory=dict)
    #: filters (distinct) by the tag each needs (``None``: every tag)
    tags: Counter = field(default_factory=Counter)
    expression: str | None = None

    def holders(self, topic_filter: str) -> dict[str, dict[Session, None]]:
        return self.wildcard if topics.has_wildcard(topic_filter) else self.exact


class FanOutIndex:
    """Sessions by the non-shared filters they subscribe, by RocketMQ topic."""

    def __init__(self) -> None:
        self._topics: dict[str, _Topic] = {}
        #: the filters each session is indexed under, to find what changed
        self._indexed: dict[Session, frozenset[str]] = {}

    def update(self, session: Session, current: bool = True) -> None:
        """Index ``session``'s non-shared filters as they are now; a session no longer ``current`` (ended,
        or replaced under its client identifier) is taken out."""
        wanted = frozenset(f for f in session.subscriptions if not f.startswith(topics.SHARE_PREFIX)) \
            if current else frozenset()
        had = self._indexed.get(session, frozenset())
        for topic_filter in had - wanted:
            self._remove(session, topic_filter)
        for topic_filter in wanted - had:
            self._add(session, topic_filter)
        if wanted:
            self._indexed[session] = wanted
        else:
            self._indexed.pop(session, None)

    def rebuild(self, sessions: Iterable[Session]) -> None:
        """Index exactly ``sessions`` (all of the gateway's), from scratch."""
        self._topics.clear()
        self._indexed.clear()
        for session in sessions:
            self.update(session)

    def sessions_for(self, rocketmq_topic: str, topic_name: str) -> list[Session]:
        """The sessions with a filter matching ``topic_name`` (an MQTT topic of ``rocketmq_topic``), each
        once: those of its exact filter first, then those of the wildcard filters."""
        entry = self._topics.get(rocketmq_topic)
        if entry is None:
            return []
        found: dict[Session, None] = dict(entry.exact.get(topic_name, ()))
        for topic_filter, sessions in entry.wildcard.items():
            if topics.matches(topic_filter, topic_name):
                found.update(sessions)
        return list(found)

    def expressions(self) -> dict[str, str]:
        """The tag expression of every RocketMQ topic some session subscribes to."""
        out = {}
        for name, entry in self._topics.items():
            if entry.expression is None:
                entry.expression = "*" if len(entry.tags) > MAX_TAGS else mapping.tag_expression(entry.tags)
            out[name] = entry.expression
        return out

    def __len__(self) -> int:
        """Sessions indexed (those with a non-shared filter)."""
        return len(self._indexed)

    def _add(self, session: Session, topic_filter: str) -> None:
        sub = mapping.subscription(topic_filter)
        entry = self._topics.get(sub.topic)
        if entry is None:
            entry = self._topics[sub.topic] = _Topic()
        holders = entry.holders(topic_filter)
        sessions = holders.get(topic_filter)
        if sessions is None:
            sessions = holders[topic_filter] = {}
            entry.tags[sub.tag] += 1
            entry.expression = None
        sessions[session] = None

    def _remove(self, session: Session, topic_filter: str) -> None:
        sub = mapping.subscription(topic_filter)
        entry = self._topics[sub.topic]
        holders = entry.holders(topic_filter)
        sessions = holders[topic_filter]
        del sessions[session]
        if sessions:
            return
        del holders[topic_filter]
        entry.tags[sub.tag] -= 1
        if not entry.tags[sub.tag]:
            del entry.tags[sub.tag]
        entry.expression = None
        if not entry.exact and not entry.wildcard:
            del self._topics[sub.topic]


__all__ = ["MAX_TAGS", "FanOutIndex"]
