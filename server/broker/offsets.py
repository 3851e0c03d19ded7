"""Committed consumer offsets, as Apache's ConsumerOffsetManager keeps them.

Keys are ``topic@group`` and each maps queue id -> next offset to consume; the table is persisted
to ``config/consumerOffset.json`` every ``flushConsumerOffsetInterval`` (5 s) and at shutdown.

Server-side reset (``useServerSideResetOffset``, Apache's default): an admin reset is held in a
separate in-memory table until the group's next pull of that queue takes it (the broker answers that
pull with PULL_OFFSET_MOVED to the reset offset). While it is pending, queries report it and commits
from the consumer are ignored, so a live consumer cannot overwrite it with its older offset. Apache
does not persist this table either: after a restart only the committed offset (also set) remains.
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
        #: Resets assigned by INVOKE_BROKER_TO_RESET_OFFSET that no pull has taken yet.
        self.reset_offset_table: dict[str, dict[int, int]] = {}
        self.changed = False

    def commit(self, group: str, topic: str, queue_id: int, offset: int) -> None:
        self.offset_table.setdefault(offset_key(topic, group), {})[queue_id] = offset
        self.changed = True

    def query(self, group: str, topic: str, queue_id: int, with_reset: bool = True) -> int:
        """The pending reset offset (if ``with_reset``), else the committed offset, else -1."""
        key = offset_key(topic, group)
        if with_reset:
            reset = self.reset_offset_table.get(key)
            if reset is not None and queue_id in reset:
                return reset[queue_id]
        return self.offset_table.get(key, {}).get(queue_id, -1)

    def assign_reset(self, group: str, topic: str, queue_id: int, offset: int) -> bool:
        """Hold ``offset`` for the group's next pull of the queue and commit it too (for a group that is
        offline, the commit is what it finds when it comes back). Negative ids/offsets are ignored."""
        if not topic or not group or queue_id < 0 or offset < 0:
            return False
        key = offset_key(topic, group)
        self.reset_offset_table.setdefault(key, {})[queue_id] = offset
        self.offset_table.setdefault(key, {})[queue_id] = offset
        self.changed = True
        return True

    def has_reset(self, group: str, topic: str, queue_id: int) -> bool:
        return queue_id in self.reset_offset_table.get(offset_key(topic, group), {})

    def take_reset(self, group: str, topic: str, queue_id: int) -> int | None:
        """The pending reset offset of the queue, removed (a pull delivers it once), or None."""
        key = offset_key(topic, group)
        reset = self.reset_offset_table.get(key)
        if reset is None:
            return None
        offset = reset.pop(queue_id, None)
        if not reset:
            del self.reset_offset_table[key]
        return offset

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
        for table in (self.offset_table, self.pull_offset_table, self.reset_offset_table):
            for key in [k for k in table if k.endswith(suffix)]:
                del table[key]
        self.changed = True

    def remove_topics(self, topics: Iterable[str]) -> None:
        prefixes = tuple(t + TOPIC_GROUP_SEPARATOR for t in topics)
        if not prefixes:
            return
        for table in (self.offset_table, self.pull_offset_table, self.reset_offset_table):
            for key in [k for k in table if k.startswith(prefixes)]:
                del table[key]
        self.changed = True

    def clone(self, src_group: str, dest_group: str, topic: str) -> None:
        offsets = self.offset_table.get(offset_key(topic, src_group))
        if offsets is not None:
            self.offset_table[offset_key(topic, dest_group)] = dict(offsets)
            self.changed = True

    def merge(self, table: dict[str, dict]) -> bool:
        """A slave taking its master's offsets ({"topic@group": {queue id: offset}}) over its own, as
        Apache's SlaveSynchronize does (entries the master lacks stay); whether anything changed."""
        changed = False
        for key, queues in table.items():
            offsets = {int(qid): int(off) for qid, off in queues.items()}
            if self.offset_table.get(key) != offsets:
                self.offset_table[key] = offsets
                changed = True
        self.changed = self.changed or changed
        return changed

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
