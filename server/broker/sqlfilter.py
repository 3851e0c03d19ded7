"""SQL92 subscriptions on the broker: compiled once per (group, topic, subVersion), evaluated at pull time.

HEART_BEAT registers each SQL92 subscription here (Apache's ConsumerFilterManager); a pull without
the subscription bit uses what was registered, so a failed compilation shows up as
FILTER_DATA_NOT_EXIST on pull, as in Apache. The store calls :class:`SqlMessageFilter` with each
candidate record; the consume queue holds no property data, so every unit passes the first stage and
the record's properties (TAGS included) decide.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from server.filter.sql92 import FilterSyntaxError, Selector, compile_expression
from wire import topics as names
from wire.message import MessageConst, decode_properties, peek_record

log = logging.getLogger("ferrymq.broker.sqlfilter")


@dataclass(frozen=True, slots=True)
class ConsumerFilterData:
    group: str
    topic: str
    expression: str
    version: int
    selector: Selector


class ConsumerFilterManager:
    def __init__(self) -> None:
        self._table: dict[tuple[str, str], ConsumerFilterData] = {}

    def register(self, group: str, topic: str, expression: str, version: int) -> ConsumerFilterData | None:
        """Compile ``expression`` for a newer version (older or equal versions are ignored, as Apache);
        None when it does not compile, and then the old filter is dropped so pulls report it (27)."""
        held = self._table.get((group, topic))
        if held is not None and version <= held.version:
            return held
        if held is not None and held.expression == expression:
            data = self._table[(group, topic)] = ConsumerFilterData(group, topic, expression, version, held.selector)
            return data
        try:
            selector = compile_expression(expression)
        except FilterSyntaxError as exc:
            log.warning("group %s topic %s: SQL92 expression %r does not compile (%s); pulls answer 27",
                        group, topic, expression, exc)
            self._table.pop((group, topic), None)
            return None
        data = self._table[(group, topic)] = ConsumerFilterData(group, topic, expression, version, selector)
        return data

    def get(self, group: str, topic: str) -> ConsumerFilterData | None:
        return self._table.get((group, topic))

    def unregister_group(self, group: str) -> None:
        for key in [k for k in self._table if k[0] == group]:
            del self._table[key]


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
