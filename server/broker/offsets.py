"""Committed consumer offsets, as Apache's ConsumerOffsetManager keeps them.

Keys are ``topic@group`` and each maps queue id -> next offset to consume; the table is persisted
to ``config/consumerOffset.json`` every ``flushConsumerOffsetInterval`` (5 s) and at shutdown.
"""

from __future__ import annotations

from typing import Iterable

TOPIC_GROUP_SEPARATOR = "@"


def offset_key(topic: str, group: str) -> str:
    return f"{topic}{TOPIC_GROUP_SEPARATOR}{group}"


class ConsumerOffsetManager:
    def __init__(self) -> None:
        self.offset_table: dict[str, dict[int, int]] = {}
        #: What each (group, queue) last pulled up to; ConsumeStats reports it as ``pullOffset``.
        self.pull_offset_table: dict[str, dict[int, int]] = {}
        self.changed = False

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offset_table.setdefault(offset_key(topic, group), {})[queue_id] = offset
        self.changed = True

    def query(self, group: str, topic: str, queue_id: int) -> int:
        """The committed offset, or -1 when the group never committed one for this queue."""
        return self.offset_table.get(offset_key(topic, group), {}).get(queue_id, -1)

    def commit_pull_offset(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.pull_offset_table.setdefault(offset_key(topic, group), {})[queue_id] = offset

    def query_pull_offset(self, group: str, topic: str, queue_id: int) -> int:
        return self.pull_offset_table.get(offset_key(topic, group), {}).get(queue_id, -1)

    def topics_of_group(self, group: str) -> set[str]:
        suffix = TOPIC_GROUP_SEPARATOR + group
        return {key[: -len(suffix)] for key in self.offset_table if key.endswith(suffix)}

    def groups_of_topic(self, topic: str) -> set[str]:
        prefix = topic + TOPIC_GROUP_SEPARATOR
        return {key[len(prefix) :] for key in self.offset_table if key.startswith(prefix)}

    def offsets_of(self, group: str, topic: str) -> dict[int, int]:
        return dict(self.offset_table.get(offset_key(topic, group), {}))

    def remove_group(self, group: str) -> None:
        suffix = TOPIC_GROUP_SEPARATOR + group
        for table in (self.offset_table, self.pull_offset_table):
            for key in [k for k in table if k.endswith(suffix)]:
                del table[key]
        self.changed = True

    def remove_topics(self, topics: Iterable[str]) -> None:
        prefixes = tuple(t + TOPIC_GROUP_SEPARATOR for t in topics)
        if not prefixes:
            return
        for table in (self.offset_table, self.pull_offset_table):
            for key in [k for k in table if k.startswith(prefixes)]:
                del table[key]
        self.changed = True

    def clone(self, src_group: str, dest_group: str, topic: str) -> None:
        offsets = self.offset_table.get(offset_key(topic, src_group))
        if offsets is not None:
            self.offset_table[offset_key(topic, dest_group)] = dict(offsets)
            self.changed = True

    # ------------------------------------------------------------------ persistence

    def to_json_obj(self) -> dict:
        """The shape of Apache's consumerOffset.json (queue ids written as string keys)."""
        return {
            "offsetTable": {
                key: {str(qid): off for qid, off in sorted(queues.items())}
                for key, queues in self.offset_table.items()
            }
        }

    def load_json_obj(self, obj: dict) -> None:
        table = obj.get("offsetTable") or {}
        self.offset_table = {
            key: {int(qid): int(off) for qid, off in queues.items()} for key, queues in table.items()
        }
        self.changed = False
