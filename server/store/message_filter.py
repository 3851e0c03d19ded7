"""What ``get_message`` asks of a subscription filter (Apache ``MessageFilter``).

The broker supplies the filter (tag set, SQL92); the store only calls it: first with the consume
queue's tag code (cheap, no commit-log read), then, for units that pass, with the record bytes.
"""

from __future__ import annotations

from typing import Iterable, Protocol


class MessageFilter(Protocol):
    def is_matched_by_consume_queue(self, tags_code: int) -> bool: ...

    def is_matched_by_commit_log(self, record: memoryview) -> bool: ...


class TagsCodeFilter:
    """TAG subscriptions: match when the unit's tag code is in ``codes`` (None or empty = ``*``)."""

    __slots__ = ("codes",)

    def __init__(self, codes: Iterable[int] | None):
        self.codes = frozenset(codes) if codes else None

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        if self.codes is None:
            return True
        # the unit stores the code sign-extended in 8 bytes; compare as Java's (int) cast does
        code = ((tags_code + 0x80000000) & 0xFFFFFFFF) - 0x80000000
        return code in self.codes

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        return True
