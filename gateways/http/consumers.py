"""HTTP consumers of a group: a clustering push consumer whose messages wait for HTTP requests.

The gateway runs one :class:`ferrymq.sdk.aio.PushConsumer` per group, so the group's queues are shared
with every other consumer of it (Java, Go, another gateway) by the usual rebalance, offsets are the
group's, and redelivery goes through ``%RETRY%<group>`` and on to ``%DLQ%<group>`` after
maxReconsumeTimes, all as for a Java consumer. Each message the consumer pulls waits here until a
request takes it; it is then invisible to other requests until it is acked (CONSUME_SUCCESS: the
group's offset may move past it), nacked, or its invisibility time passes (both RECONSUME_LATER: it
comes back later with reconsumeTimes + 1). A receipt handle names one such message in this gateway.

With ``model=BROADCASTING`` the consumer is one broadcasting consumer instance of the group: it owns
every queue, keeps its offsets in a local file (Java's offsets.json), and a message nacked or not acked
in time is skipped, as a Java broadcasting consumer drops what its listener fails (no retry topic).

A group that no request has asked for in ``idle_seconds`` (:data:`IDLE_SECONDS`), with nothing handed
out and no event stream open, stops: its queues go to the group's other consumers, and the messages it
had pulled but not handed out are delivered again from the committed offset.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from ferrymq.sdk.aio import PushConsumer
from ferrymq.sdk.consumer.push import ConsumeConcurrentlyContext, ConsumeConcurrentlyStatus
from ferrymq.sdk.consumer.rebalance import MessageModel
from ferrymq.sdk.consumer.subscription import build_subscription
from ferrymq.wire.message import MessageExt

from .problems import Problem

log = logging.getLogger("ferrymq.gateway.http")

#: a group with no request for this long, and nothing handed out, stops consuming
IDLE_SECONDS = 120.0
#: messages of a group pulled and waiting for a request (the consumer stops pulling at this many per queue)
_PULL_THRESHOLD_FOR_QUEUE = 256
#: messages of a group waiting or handed out at once
_IN_FLIGHT = 4096


@dataclass(eq=False)
class Pending:
    """One pulled message and the consumer's wait for its outcome."""

    msg: MessageExt
    context: ConsumeConcurrentlyContext
    outcome: asyncio.Future
    broker_name: str
    handle: str | None = None
    invisible_until: int = 0  #: epoch ms
    timer: asyncio.TimerHandle | None = None

    def settle(self, status: ConsumeConcurrentlyStatus) -> None:
        if self.timer is not None:
            self.timer.cancel()
        if not self.outcome.done():
            self.outcome.set_result(status)


@dataclass
class _Topic:
    expression: str
    expression_type: str
    ready: deque[Pending] = field(default_factory=deque)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)


def unknown_handle(group: str, handle: str, index: int) -> Problem:
    return Problem(404, f"receipt handle {handle!r} names no message handed out to group {group} here: it was "
                        f"acked or nacked already, its invisibility time passed (the message is delivered "
                        f"again), or it is not this gateway's", f"/receiptHandles/{index}")


class GroupConsumer:
    """The HTTP side of one consumer group in this gateway."""

    def __init__(self, group: str, client_kwargs: dict[str, Any], max_reconsume_times: int,
                 model: MessageModel = MessageModel.CLUSTERING, idle_seconds: float = IDLE_SECONDS):
        self.group = group
        self.max_reconsume_times = max_reconsume_times
        self.model = model
        self.idle_seconds = idle_seconds
        self._client_kwargs = client_kwargs
        self._consumer: PushConsumer | None = None
        self._topics: dict[str, _Topic] = {}
        self._handed_out: dict[str, Pending] = {}
        self._start_lock = asyncio.Lock()
        self.last_request = time.monotonic()
        #: event streams open on this group (it is not idle while one is)
        self.streams = 0

    def consumes(self, topic: str) -> bool:
        return topic in self._topics

    @property
    def idle(self) -> bool:
        return (not self._handed_out and not self.streams
                and time.monotonic() - self.last_request > self.idle_seconds)

    @property
    def consuming(self) -> bool:
        """Whether a topic is subscribed (a request whose subscription failed leaves none)."""
        return bool(self._topics)

    async def subscribe(self, topic: str, expression: str, expression_type: str) -> None:
        """Consume ``topic`` with this expression; another expression for the same topic is a conflict, as
        two subscriptions of one group to one topic would have the brokers filter for either at random."""
        self.last_request = time.monotonic()
        known = self._topics.get(topic)
        if known is not None:
            if (known.expression, known.expression_type) != (expression, expression_type):
                raise Problem(409, f"group {self.group} consumes {topic} with {known.expression_type} "
                                   f"{known.expression!r} at this gateway; a group has one subscription per "
                                   f"topic (use another group for another filter)", "query.expression")
            return
        try:
            build_subscription(topic, expression, expression_type)
        except Exception as exc:  # noqa: BLE001 - the parser's message says what is wrong
            raise Problem(400, f"expression {expression!r} is not a valid {expression_type} expression: {exc}",
                          "query.expression") from None
        async with self._start_lock:
            if topic in self._topics:
                return
            self._topics[topic] = _Topic(expression, expression_type)
            if self._consumer is None:
                consumer = PushConsumer(self.group, message_model=self.model, consume_concurrency=_IN_FLIGHT,
                                        max_reconsume_times=self.max_reconsume_times,
                                        pull_threshold_for_queue=_PULL_THRESHOLD_FOR_QUEUE,
                                        await_termination_when_shutdown=0.5, **self._client_kwargs)
                consumer.subscribe(topic, expression, expression_type)
                consumer.register_listener(self._deliver)
                try:
                    await consumer.start()
                except BaseException:
                    del self._topics[topic]
                    raise
                self._consumer = consumer
                log.info("HTTP consumers of group %s: consuming %s (%s %s)", self.group, topic,
                         expression_type, expression)
            else:
                self._consumer.subscribe(topic, expression, expression_type)
                log.info("HTTP consumers of group %s: also consuming %s (%s %s)", self.group, topic,
                         expression_type, expression)

    async def _deliver(self, msgs: list[MessageExt], context: ConsumeConcurrentlyContext):
        """The consumer's listener (one message a call): wait for the message's outcome."""
        outcomes = []
        for msg in msgs:
            topic = self._topics.get(msg.topic)
            if topic is None:  # unsubscribed meanwhile
                return ConsumeConcurrentlyStatus.RECONSUME_LATER
            pending = Pending(msg, context, asyncio.get_running_loop().create_future(),
                              context.message_queue.broker_name)
            topic.ready.append(pending)
            topic.arrived.set()
            outcomes.append(pending.outcome)
        results = await asyncio.gather(*outcomes)
        if any(r == ConsumeConcurrentlyStatus.RECONSUME_LATER for r in results):
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        return ConsumeConcurrentlyStatus.CONSUME_SUCCESS

    async def take(self, topic: str, max_messages: int, wait: float, invisible: float) -> list[Pending]:
        """Up to ``max_messages`` of ``topic``, waiting up to ``wait`` seconds for the first; each is
        handed out for ``invisible`` seconds."""
        self.last_request = time.monotonic()
        state = self._topics[topic]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        while not state.ready:
            if self._topics.get(topic) is not state:  # stopped meanwhile
                return []
            state.arrived.clear()
            remaining = deadline - loop.time()
            if remaining <= 0:
                return []
            try:
                await asyncio.wait_for(state.arrived.wait(), remaining)
            except TimeoutError:
                return []
        taken = []
        until = time.time() + invisible
        while state.ready and len(taken) < max_messages:
            pending = state.ready.popleft()
            if pending.outcome.done():  # the consumer gave it up (stopped, queue moved away)
                continue
            pending.handle = f"{self.group}~{secrets.token_urlsafe(12)}"
            pending.timer = loop.call_later(invisible, self._expired, pending)
            pending.invisible_until = int(until * 1000)
            self._handed_out[pending.handle] = pending
            taken.append(pending)
        self.last_request = time.monotonic()
        return taken

    def _expired(self, pending: Pending) -> None:
        if self._handed_out.pop(pending.handle, None) is not None:
            log.info("group %s: message %s was not acked within its invisibility time; it is delivered again "
                     "later", self.group, pending.msg.msg_id)
            pending.settle(ConsumeConcurrentlyStatus.RECONSUME_LATER)

    def holds(self, handle: str) -> bool:
        return handle in self._handed_out

    def settle(self, handles: list[str], consumed: bool, delay_level: int = 0) -> int:
        """Ack (``consumed``) or nack the messages of ``handles``: all of them, or none when one is not
        handed out here (unknown, already settled or expired)."""
        self.last_request = time.monotonic()
        for i, handle in enumerate(handles):
            if handle not in self._handed_out:
                raise unknown_handle(self.group, handle, i)
        settled = 0
        for handle in handles:
            pending = self._handed_out.pop(handle, None)
            if pending is None:  # named twice in this request
                continue
            settled += 1
            if consumed:
                pending.settle(ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
            else:
                pending.context.delay_level_when_next_consume = delay_level
                pending.settle(ConsumeConcurrentlyStatus.RECONSUME_LATER)
        return settled

    async def stop(self) -> None:
        """Stop consuming; messages not acked are delivered again from the group's committed offset."""
        consumer, self._consumer = self._consumer, None
        if consumer is not None:
            await consumer.stop()  # its queues are dropped first: nothing settled below commits or retries
        for state in self._topics.values():
            while state.ready:
                state.ready.popleft().settle(ConsumeConcurrentlyStatus.RECONSUME_LATER)
            state.arrived.set()  # waiting requests answer now (with nothing)
        for pending in self._handed_out.values():
            pending.settle(ConsumeConcurrentlyStatus.RECONSUME_LATER)
        self._handed_out.clear()
        self._topics.clear()
