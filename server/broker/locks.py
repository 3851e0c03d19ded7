"""Queue locks for orderly consumption (LOCK_BATCH_MQ / UNLOCK_BATCH_MQ).

A client that consumes a queue orderly holds its lock; the lock lapses when the holder stops
renewing it (clients renew every 20 s), so a crashed consumer's queues move on after the expiry.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Hashable, Iterable

#: Apache's ``rocketmq.broker.rebalance.lockMaxLiveTime``.
DEFAULT_LOCK_MAX_LIVE_MS = 60_000


@dataclass(slots=True)
class _Lock:
    client_id: str
    last_update_ms: int


class QueueLockManager:
    """(group, queue) -> holder. Queues are any hashable value (the broker uses MessageQueue)."""

    def __init__(
        self,
        max_live_ms: int = DEFAULT_LOCK_MAX_LIVE_MS,
        clock: Callable[[], float] = time.time,
    ):
        self.max_live_ms = max_live_ms
        self._clock = clock
        self._groups: dict[str, dict[Hashable, _Lock]] = {}

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def _expired(self, lock: _Lock, now: int) -> bool:
        return now - lock.last_update_ms > self.max_live_ms

    def try_lock_batch(self, group: str, queues: Iterable[Hashable], client_id: str) -> set:
        """Lock every queue that is free, expired or already ours; return the ones now held by ``client_id``."""
        now = self._now()
        table = self._groups.setdefault(group, {})
        granted = set()
        for queue in queues:
            lock = table.get(queue)
            if lock is None or lock.client_id == client_id or self._expired(lock, now):
                table[queue] = _Lock(client_id, now)
                granted.add(queue)
        return granted

    def unlock_batch(self, group: str, queues: Iterable[Hashable], client_id: str) -> None:
        """Release the queues ``client_id`` holds; a lock held by someone else is left alone."""
        table = self._groups.get(group)
        if not table:
            return
        for queue in queues:
            lock = table.get(queue)
            if lock is not None and lock.client_id == client_id:
                del table[queue]

    def is_locked_by(self, group: str, queue: Hashable, client_id: str) -> bool:
        lock = self._groups.get(group, {}).get(queue)
        return lock is not None and lock.client_id == client_id and not self._expired(lock, self._now())

    def holder(self, group: str, queue: Hashable) -> str | None:
        lock = self._groups.get(group, {}).get(queue)
        if lock is None or self._expired(lock, self._now()):
            return None
        return lock.client_id

    def purge_expired(self) -> int:
        """Forget lapsed locks (they are already ignored; this only bounds the table's memory)."""
        now = self._now()
        dropped = 0
        for group, table in list(self._groups.items()):
            for queue in [q for q, lock in table.items() if self._expired(lock, now)]:
                del table[queue]
                dropped += 1
            if not table:
                del self._groups[group]
        return dropped
