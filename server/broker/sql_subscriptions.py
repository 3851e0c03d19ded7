"""SQL92 subscriptions on the broker: compiled once per (group, topic, subVersion), evaluated at pull time.

HEART_BEAT registers each SQL92 subscription here (Apache's ConsumerFilterManager); a pull without
the subscription bit uses what was registered, so a failed compilation shows up as
FILTER_DATA_NOT_EXIST on pull, as in Apache. The store calls :class:`SqlMessageFilter` with each
candidate record; the consume queue holds no property data, so every unit passes the first stage and
the record's properties (TAGS included) decide.

Filters of groups that went away are not dropped at once (a consumer restarting keeps its filter) but
kept "dead" for ``filterDataCleanTimeSpan`` (24 h) and then removed, as Apache's ConsumerFilterManager
does in its 10-second persistence round. Apache learns of a death from the group's last channel closing
or from a heartbeat no longer listing the topic; this manager sees only heartbeats, so a filter also dies
when its (group, topic) has not been re-registered for the consumer channel expiry (120 s, the time the
broker takes to drop a silent consumer). A new heartbeat brings a dead filter back.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from ferrymq.server.sql92 import FilterSyntaxError, Selector, compile_expression
from ferrymq.wire import topics as names
from ferrymq.wire.message import MessageConst, decode_properties, peek_record

from .clients import CHANNEL_EXPIRED_TIMEOUT_MS

log = logging.getLogger("ferrymq.broker.sql_subscriptions")

#: Apache's filterDataCleanTimeSpan default: how long a dead filter is kept.
FILTER_DATA_CLEAN_TIME_SPAN_MS = 24 * 3600 * 1000
#: Apache cleans when it persists consumerFilter.json, every 10 s.
CLEAN_INTERVAL_MS = 10_000


@dataclass(frozen=True, slots=True)
class ConsumerFilterData:
    group: str
    topic: str
    expression: str
    version: int
    selector: Selector


class ConsumerFilterManager:
    def __init__(self, clock: Callable[[], float] = time.time,
                 clean_time_span_ms: int = FILTER_DATA_CLEAN_TIME_SPAN_MS,
                 expiry_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS) -> None:
        self._table: dict[tuple[str, str], ConsumerFilterData] = {}
        #: (group, topic) -> when a heartbeat last registered it (ms)
        self._seen: dict[tuple[str, str], int] = {}
        #: (group, topic) -> when its group was unregistered (ms)
        self._unregistered: dict[tuple[str, str], int] = {}
        self._clock = clock
        self.clean_time_span_ms = clean_time_span_ms
        self.expiry_ms = expiry_ms
        self._next_clean_ms = 0

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def register(self, group: str, topic: str, expression: str, version: int) -> ConsumerFilterData | None:
        """Compile ``expression`` for a newer version (older or equal versions are ignored, as Apache);
        None when it does not compile, and then the old filter is dropped so pulls report it (27).
        Every call (each heartbeat) keeps the filter alive."""
        now = self._now()
        self._maybe_clean(now)
        key = (group, topic)
        self._seen[key] = now
        self._unregistered.pop(key, None)
        held = self._table.get(key)
        if held is not None and version <= held.version:
            return held
        if held is not None and held.expression == expression:
            data = self._table[key] = ConsumerFilterData(group, topic, expression, version, held.selector)
            return data
        try:
            selector = compile_expression(expression)
        except FilterSyntaxError as exc:
            log.warning("group %s topic %s: SQL92 expression %r does not compile (%s); pulls answer 27",
                        group, topic, expression, exc)
            self._forget(key)
            return None
        data = self._table[key] = ConsumerFilterData(group, topic, expression, version, selector)
        return data

    def get(self, group: str, topic: str) -> ConsumerFilterData | None:
        """The group's filter for the topic, dead or alive (Apache serves pulls from a dead one too)."""
        return self._table.get((group, topic))

    def unregister_group(self, group: str) -> None:
        """The group's last consumer left: its filters die now (kept until cleaned)."""
        now = self._now()
        for key in [k for k in self._table if k[0] == group]:
            self._unregistered.setdefault(key, now)
        self._maybe_clean(now)

    def dead_since(self, group: str, topic: str) -> int | None:
        """When the filter died (ms), or None while it is alive (or unknown)."""
        key = (group, topic)
        if key not in self._table:
            return None
        if key in self._unregistered:
            return self._unregistered[key]
        seen = self._seen.get(key, 0)
        return seen + self.expiry_ms if self._now() - seen > self.expiry_ms else None

    def clean(self) -> list[tuple[str, str]]:
        """Remove the filters dead for at least ``clean_time_span_ms``; returns their (group, topic)."""
        now = self._now()
        gone = []
        for group, topic in list(self._table):
            died = self.dead_since(group, topic)
            if died is not None and now - died >= self.clean_time_span_ms:
                log.info("removing the SQL92 filter of group %s on %s: dead since %d ms", group, topic, now - died)
                self._forget((group, topic))
                gone.append((group, topic))
        return gone

    def _maybe_clean(self, now: int) -> None:
        if now >= self._next_clean_ms:
            self._next_clean_ms = now + CLEAN_INTERVAL_MS
            self.clean()

    def _forget(self, key: tuple[str, str]) -> None:
        self._table.pop(key, None)
        self._seen.pop(key, None)
        self._unregistered.pop(key, None)

    def __len__(self) -> int:
        return len(self._table)


def record_properties(record: memoryview | bytes) -> dict[str, str]:
    return decode_properties(peek_record(record).properties)


class SqlMessageFilter:
    """The store's MessageFilter for one SQL92 selector."""

    __slots__ = ("selector",)

    def __init__(self, selector: Selector):
        self.selector = selector

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        return self.selector.matches(record_properties(record))


class RetrySqlFilter:
    """``filterSupportRetry`` on ``%RETRY%<group>``: a retried message meets its original topic's expression.

    ``lookup(topic)`` gives that topic's selector for the group (None: no SQL92 subscription, deliver).
    """

    __slots__ = ("lookup",)

    def __init__(self, lookup: Callable[[str], Selector | None]):
        self.lookup = lookup

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        props = record_properties(record)
        selector = self.lookup(props.get(MessageConst.RETRY_TOPIC, ""))
        return selector is None or selector.matches(props)


def is_retry_topic(topic: str) -> bool:
    return topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX)
