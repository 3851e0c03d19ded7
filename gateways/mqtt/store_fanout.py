"""The fan-out of the gateway served by a broker process, read from that broker's store in process.

In front of a cluster the fan-out is a BROADCASTING pull consumer (:class:`.gateway._Consumer`): each
message costs a pull request and its answer, encoded and decoded on both sides of a loopback connection.
In the broker's own process that broker's queues are at hand: the arrival notice that wakes long-polling
pulls marks the queue, and once per reactor turn the new entries of every marked queue are read straight
from the store (no request, no remoting codec) and handed to the sessions, so what arrives in one turn
is delivered together. What the gateway itself stored in the turn (:meth:`StoreFanOut.stored`, the
messages its devices published) is handed out as the gateway has it, by queue and offset: only records
that other clients stored are read back and decoded.

What it delivers is what the pull consumer would of those queues: every queue of each subscribed
RocketMQ topic in this broker (the consumer pulls those of other brokers, :class:`.gateway._Elsewhere`),
from its offset, else from when the topic was first subscribed (:attr:`since`), skipping messages stored
before that. Its offsets are the broadcasting consumer's own (the same local offset file, same group and
client id, persisted on the same 5 s schedule and at stop), so a restart resumes where either left off.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

from twisted.internet import task

from ferrymq.sdk.consumer.offset_store import LocalFileOffsetStore
from ferrymq.server.event_loop import call_soon
from ferrymq.server.store.status import GetMessageStatus
from ferrymq.wire.bodies import MessageQueue
from ferrymq.wire.message import MessageExt, RecordError, decode_records, decompress_body

log = logging.getLogger("ferrymq.gateway.mqtt")

#: messages read from one queue at a time (a pull's batch)
READ_BATCH = 32
#: messages read from one queue in one reactor turn at most: a backlog does not hold the reactor up
TURN_LIMIT = 512
#: bytes of one read at most
READ_BYTES = 4 << 20


class StoreFanOut:
    """The gateway's non-shared deliveries, read from the store of the broker it runs in.

    ``store``: the broker's store port (``get_message``, ``search_offset_by_time``, ``add_arrival_listener``);
    ``queue_ids(topic)``: the topic's queues in that broker; ``expressions()``: the RocketMQ topics the
    sessions subscribe now (as keys); ``handle(messages)``: hands new messages to the sessions;
    ``turn_done()``: a turn's messages were all handed over (the connections write what they got then)."""

    def __init__(self, store: Any, broker_name: str, queue_ids: Callable[[str], Iterable[int]],
                 expressions: Callable[[], dict[str, str]], handle: Callable[[list[MessageExt]], None],
                 offsets: LocalFileOffsetStore, *, reactor: Any = None, persist_interval: float = 5.0,
                 turn_done: Callable[[], None] = lambda: None):
        if reactor is None:
            from twisted.internet import reactor
        self.store = store
        self.broker_name = broker_name
        self.queue_ids = queue_ids
        self.expressions = expressions
        self.handle = handle
        self.turn_done = turn_done
        self.offsets = offsets
        self.reactor = reactor
        self.persist_interval = persist_interval
        #: RocketMQ topic -> when it was first subscribed here (ms): its messages stored earlier are not new
        self.since: dict[str, int] = {}
        self._topics: frozenset[str] = frozenset()
        #: queues with entries not read yet (insertion-ordered), each with its max offset as the last arrival
        #: notice told it (None: not known)
        self._marked: dict[tuple[str, int], int | None] = {}
        #: what this process stored since the last read, by queue then queue offset: handed out as it is
        self._stored: dict[tuple[str, int], dict[int, MessageExt]] = {}
        self._turn = None
        #: :meth:`hold` calls not yet ended by :meth:`flush`
        self._holds = 0
        self._listening = False
        self._persist = task.LoopingCall(self.persist)
        self._persist.clock = reactor
        self.offsets.load()

    # ------------------------------------------------------------------ what the gateway calls

    def update(self) -> None:
        """The subscriptions changed: read the topics they need now (a new one from its offsets, or from
        when it was first subscribed), forget those they no longer need."""
        wanted = frozenset(self.expressions())
        for topic in self._topics - wanted:
            self.since.pop(topic, None)
            for mq in [mq for mq in self.offsets.table if mq.topic == topic]:
                del self.offsets.table[mq]
        now_ms = int(time.time() * 1000)
        added = wanted - self._topics
        self._topics = wanted
        for topic in added:
            self.since.setdefault(topic, now_ms)
            for queue_id in self.queue_ids(topic):
                self._mark(topic, queue_id)
        if wanted and not self._listening:
            self._listening = True
            self.store.add_arrival_listener(self._arrived)
            self._persist.start(self.persist_interval, now=False)

    def stored(self, msg: MessageExt) -> None:
        """``msg`` was just stored in this broker by the gateway: its queue, queue offset, commit-log offset
        and store time set, its body as published (not compressed). The next read of its queue hands it
        out as it is instead of reading the record back."""
        if msg.topic in self._topics:
            queue = (msg.topic, msg.queue_id)
            kept = self._stored.get(queue)
            if kept is None:
                kept = self._stored[queue] = {}
            kept[msg.queue_offset] = msg

    def hold(self) -> None:
        """Queues marked from now on are read by the matching :meth:`flush` rather than in the next reactor
        turn: a device's packets of one read are handled between the two, and what they stored reaches
        the sessions in that turn (one turn a message, not two, when messages come one at a time)."""
        self._holds += 1

    def flush(self) -> None:
        """End a :meth:`hold`: the last one reads the marked queues now."""
        self._holds -= 1
        if self._holds or not self._marked:
            return
        if self._turn is not None:  # marked before the hold
            self._turn.cancel()
        self._read_marked()

    def nudge(self, topic: str) -> None:
        """Nothing to do: the store's arrival notice names even a queue created by the message."""

    def is_new(self, msg: MessageExt) -> bool:
        since = self.since.get(msg.topic)
        return since is not None and msg.store_timestamp >= since

    def persist(self) -> None:
        if self.offsets.table:
            try:
                self.offsets.persist_all(list(self.offsets.table))
            except OSError as exc:
                log.warning("MQTT gateway: offsets not saved: %s", exc)

    def stop(self) -> None:
        if self._persist.running:
            self._persist.stop()
        if self._turn is not None:  # pending: a turn that ran set it to None
            self._turn.cancel()
        self._turn = None
        self._topics = frozenset()  # arrivals from now on are not read
        self.persist()

    # ------------------------------------------------------------------ reading

    def _arrived(self, topic: str, queue_id: int, max_offset: int, _tags_code: int | None) -> None:
        if topic in self._topics:
            self._mark(topic, queue_id, max_offset)

    def _mark(self, topic: str, queue_id: int, max_offset: int | None = None) -> None:
        self._marked[(topic, queue_id)] = max_offset
        if self._turn is None and not self._holds:
            self._turn = call_soon(self.reactor, self._read_marked)

    def _read_marked(self) -> None:
        self._turn = None
        marked, self._marked = self._marked, {}
        stored, self._stored = self._stored, {}
        try:
            for (topic, queue_id), max_offset in marked.items():
                if topic not in self._topics:
                    continue
                try:
                    more = self._read(topic, queue_id, max_offset, stored.get((topic, queue_id)))
                except Exception:  # noqa: BLE001 - one queue's trouble stops neither the others nor later turns
                    log.exception("MQTT gateway: reading %s queue %d failed", topic, queue_id)
                    continue
                if more:
                    self._mark(topic, queue_id)
        finally:
            self.turn_done()

    def _read(self, topic: str, queue_id: int, max_offset: int | None = None,
              stored: dict[int, MessageExt] | None = None) -> bool:
        """Hand out what the queue holds past its offset (up to :data:`TURN_LIMIT`): first what the gateway
        ``stored`` from that offset on, then what the store holds past it, up to ``max_offset`` if that is
        known; ``True`` if more is left."""
        mq = MessageQueue(topic, self.broker_name, queue_id)
        table = self.offsets.table
        offset = table.get(mq)
        if offset is None:
            offset = self.store.search_offset_by_time(topic, queue_id, self.since[topic])
        read = 0
        if stored:
            kept = []
            while offset in stored:
                kept.append(stored[offset])
                offset += 1
            if kept:
                table[mq] = offset
                read = len(kept)
                self.handle(kept)
                if max_offset is not None and offset >= max_offset:
                    return False
        while read < TURN_LIMIT:
            result = self.store.get_message(topic, queue_id, offset, READ_BATCH, READ_BYTES, None)
            found = result.status is GetMessageStatus.FOUND
            if result.status is not GetMessageStatus.NO_MATCHED_LOGIC_QUEUE:
                table[mq] = offset = result.next_begin_offset
            if not found:
                return result.status in (GetMessageStatus.OFFSET_FOUND_NULL, GetMessageStatus.NO_MATCHED_MESSAGE) \
                    and offset < result.max_offset
            msgs = _decoded(result.spans)
            read += len(msgs)
            if msgs:
                self.handle(msgs)
            if offset >= result.max_offset:
                return False
        return True


def _decoded(spans: list) -> list[MessageExt]:
    msgs: list[MessageExt] = []
    for span in spans:
        try:
            msgs += decode_records(span)
        except RecordError as exc:
            log.warning("MQTT gateway: a stored record did not decode: %s", exc)
            msgs += exc.decoded
    for msg in msgs:
        if msg.sys_flag:
            msg.body = decompress_body(msg.body, msg.sys_flag)
    return msgs


__all__ = ["READ_BATCH", "TURN_LIMIT", "StoreFanOut"]
