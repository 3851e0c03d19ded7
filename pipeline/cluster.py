"""Driver-side look-ups: which queues the options name, and which offsets bound each of them.

Everything here runs when a query is planned (``load()`` for a batch read), so a wrong option fails
there, with an :class:`~ferrymq.pipeline.options.OptionError` naming it, and not later inside a task.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from ferrymq.remoting.errors import RemotingError
from ferrymq.sdk.blocking_clients import BlockingMQAdmin
from ferrymq.sdk.errors import MQResponseError
from ferrymq.sdk.route import master_addr, subscribe_queues
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.topics import is_system_topic

from .options import OffsetSpec, OptionError, ReadOptions
from .queues import EARLIEST, LATEST, QueueRange, QueueRef

#: seconds a look-up may take before the name server counts as unreachable
LOOKUP_TIMEOUT = 5.0


class Cluster:
    """The name server and brokers of one ``nameServer`` option, seen from the driver."""

    def __init__(self, name_server: str):
        self.name_server = name_server
        self._admin = BlockingMQAdmin(name_server, timeout=LOOKUP_TIMEOUT)
        self._masters: dict[tuple[str, str], str] = {}  # (topic, broker) -> master address

    def close(self) -> None:
        self._admin.close()

    def __enter__(self) -> Cluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _unreachable(self, exc: Exception) -> OptionError:
        return OptionError("nameServer", f"cannot reach the name server at {self.name_server}: {exc}")

    def check_writable(self) -> None:
        """Fail unless the name server answers and routes to at least one master broker."""
        try:
            masters = self._admin.master_addrs()
        except (RemotingError, TimeoutError, OSError) as exc:
            raise self._unreachable(exc) from None
        if not masters:
            raise OptionError("nameServer", f"no master broker is registered with the name server at "
                                            f"{self.name_server}")

    def topics(self, options: ReadOptions) -> list[str]:
        if options.topic_pattern is None:
            return list(options.topics)
        try:
            names = self._admin.list_topics()
        except (RemotingError, TimeoutError, OSError) as exc:
            raise self._unreachable(exc) from None
        pattern = re.compile(options.topic_pattern)
        found = [t for t in names if pattern.fullmatch(t) and not is_system_topic(t)]
        if not found:
            raise OptionError("topicPattern", f"{options.topic_pattern!r} matches no topic on {self.name_server}")
        return found

    def queues(self, topics: Iterable[str]) -> list[QueueRef]:
        """The readable queues of ``topics``, sorted; an unknown topic is an error naming the option."""
        out: list[QueueRef] = []
        for topic in topics:
            try:
                route = self._admin.fetch_route(topic)
            except MQResponseError as exc:
                if exc.code == ResponseCode.TOPIC_NOT_EXIST:
                    raise OptionError("topic", f"topic {topic!r} does not exist on {self.name_server}") from None
                raise
            except (RemotingError, TimeoutError, OSError) as exc:
                raise self._unreachable(exc) from None
            for mq in subscribe_queues(route, topic):
                addr = master_addr(route, mq.broker_name)
                if addr is not None:
                    self._masters[(topic, mq.broker_name)] = addr
                    out.append(QueueRef.of(mq))
        return sorted(out)

    def _addr(self, queue: QueueRef) -> str:
        if (queue.topic, queue.broker) not in self._masters:
            self.queues([queue.topic])
        return self._masters[(queue.topic, queue.broker)]

    def min_offset(self, queue: QueueRef) -> int:
        return self._admin.api.get_min_offset(self._addr(queue), queue.message_queue())

    def max_offset(self, queue: QueueRef) -> int:
        return self._admin.api.get_max_offset(self._addr(queue), queue.message_queue())

    def offset_at(self, queue: QueueRef, timestamp_ms: int) -> int:
        """The broker's offset-by-time look-up: the first message stored at or after ``timestamp_ms``."""
        return self._admin.api.search_offset(self._addr(queue), queue.message_queue(), timestamp_ms)

    def commit_offsets(self, group: str, offsets: dict[QueueRef, int]) -> None:
        """Store ``offsets`` as ``group``'s consumer offsets on each queue's master broker."""
        for queue, offset in sorted(offsets.items()):
            self._admin.api.update_consumer_offset(self._addr(queue), group, queue.message_queue(), offset,
                                                   oneway=False)

    def resolve(self, spec: OffsetSpec, queue: QueueRef, low: int, high: int) -> int:
        """``spec``'s offset of ``queue`` as a number within the queue's ``[low, high]``."""
        if spec.timestamp_ms is not None:
            return min(max(self.offset_at(queue, spec.timestamp_ms), low), high)
        wanted = spec.for_queue(queue)
        if wanted == EARLIEST:
            return low
        if wanted == LATEST:
            return high
        return min(max(wanted, low), high)

    def ranges(self, options: ReadOptions) -> list[QueueRange]:
        """One range per queue of the options' topics, bounded by the starting and ending offsets."""
        queues = self.queues(self.topics(options))
        known = set(queues)
        for option, spec in (("startingOffsets", options.starting), ("endingOffsets", options.ending)):
            for queue, _ in spec.per_queue:
                if queue not in known:
                    raise OptionError(option, f"queue {queue} is not a readable queue of the topic(s) "
                                              f"{', '.join(sorted({q.topic for q in queues}))}")
        out = []
        for queue in queues:
            low, high = self.min_offset(queue), self.max_offset(queue)
            start = self.resolve(options.starting, queue, low, high)
            end = self.resolve(options.ending, queue, low, high)
            out.append(QueueRange(queue, start, max(start, end)))
        return out
