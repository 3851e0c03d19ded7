"""The asyncio consumers: messages by ``async for`` (or a listener), and pulls by ``await``.

A :class:`PushConsumer` read with ``async for`` (or :meth:`PushConsumer.getone`) acknowledges a message
when the application asks for the next one, so a message counts as consumed only once the loop body
that handled it has finished: its offset is committed then, never before. When the consumer stops,

- the message in hand counts as consumed, unless ``async with`` is left by an exception, which asks
  the broker to deliver it again later (RECONSUME_LATER);
- messages pulled but not yet handed out are also given back (RECONSUME_LATER), so none is lost.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Self

from ferrymq.wire.message import MessageExt

from .. import reactor_thread
from ..client_instance import MQClientError
from ..consumer import pull as core_pull
from ..consumer import push as core_push
from ..consumer.push import ConsumeConcurrentlyStatus
from ..consumer.subscription import SUB_ALL, TAG, build_subscription
from ..message import MessageQueue, PullResult
from .bridge import Client, call, on_loop, post


class ConsumerStoppedError(MQClientError):
    """:meth:`PushConsumer.getone` was waiting, or was called, when the consumer stopped."""


@dataclass
class _Delivery:
    """One listener call's messages, and the future its status is awaited on."""

    remaining: deque[MessageExt]
    status: asyncio.Future = field(repr=False)

    def settle(self, status: ConsumeConcurrentlyStatus) -> None:
        if not self.status.done():
            self.status.set_result(status)


_STOPPED = object()


class PushConsumer(Client):
    """A push consumer of one group; the keyword arguments are :class:`ferrymq.sdk.PushConsumer`'s.

    Subscribe, then either iterate (``async for msg in consumer``) or :meth:`register_listener` before
    starting. A subscription may be added while running too.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, **kwargs: Any):
        reactor_thread.ensure_running()
        self._core: core_push.PushConsumer = reactor_thread.call(
            lambda: core_push.PushConsumer(group, namesrv_addr, **kwargs))
        self._listener: Callable[[list[MessageExt], Any], Any] | None = None
        self._orderly = False
        self._inbox: asyncio.Queue | None = None
        self._in_hand: _Delivery | None = None
        self._stopping = False

    def subscribe(self, topic: str, expression: str = SUB_ALL, expression_type: str = TAG) -> None:
        """Subscribe ``topic`` with a TAG expression (``*``, ``TagA || TagB``) or an SQL92 one."""
        build_subscription(topic, expression, expression_type)  # a bad expression raises here, not later
        post(self._core.subscribe, topic, expression, expression_type)

    def unsubscribe(self, topic: str) -> None:
        post(self._core.unsubscribe, topic)

    def register_listener(self, listener: Callable[[list[MessageExt], Any], Any], *, orderly: bool = False) -> None:
        """Consume by callback instead of iteration: ``listener(msgs, context)``, a function or a coroutine
        function run on the loop that starts the consumer, returns a status as for
        :meth:`ferrymq.sdk.PushConsumer.register_listener` (None: success; raising: consume later)."""
        self._listener = listener
        self._orderly = orderly

    async def start(self) -> None:
        """Register with the brokers, take a share of the queues and start pulling."""
        loop = asyncio.get_running_loop()
        self._stopping = False
        if self._listener is None:
            self._inbox = asyncio.Queue()
            listener, orderly = on_loop(loop, self._deliver), False
        else:
            listener, orderly = on_loop(loop, self._listener), self._orderly
        await call(self._start, listener, orderly)

    def _start(self, listener: Callable[..., Any], orderly: bool):
        self._core.register_listener(listener, orderly=orderly)
        return self._core.start()

    async def stop(self, *, consumed: bool = True) -> None:
        """Stop pulling and commit the offsets reached. The message in hand counts as consumed unless
        ``consumed`` is False; messages not handed out yet are given back for redelivery."""
        self._stopping = True
        if self._in_hand is not None:
            # a status answers for a whole delivery: one with messages not handed out yet goes back whole
            done = consumed and not self._in_hand.remaining
            self._in_hand.settle(ConsumeConcurrentlyStatus.CONSUME_SUCCESS if done
                                 else ConsumeConcurrentlyStatus.RECONSUME_LATER)
            self._in_hand = None
        if self._inbox is not None:
            while not self._inbox.empty():
                delivery = self._inbox.get_nowait()
                if delivery is not _STOPPED:
                    delivery.settle(ConsumeConcurrentlyStatus.RECONSUME_LATER)
            self._inbox.put_nowait(_STOPPED)  # wakes a waiting getone()
        await super().stop()

    async def __aexit__(self, exc_type: type[BaseException] | None, *exc: object) -> None:
        await self.stop(consumed=exc_type is None)

    async def _deliver(self, msgs: list[MessageExt], _context: Any) -> ConsumeConcurrentlyStatus:
        if self._stopping or self._inbox is None:
            return ConsumeConcurrentlyStatus.RECONSUME_LATER
        delivery = _Delivery(deque(msgs), asyncio.get_running_loop().create_future())
        self._inbox.put_nowait(delivery)
        return await delivery.status

    async def getone(self) -> MessageExt:
        """The next message; the one returned before counts as consumed from now on.

        Raises ConsumerStoppedError once the consumer stops."""
        if self._listener is not None:
            raise MQClientError(f"consumer {self.group} hands its messages to its listener; iterate a consumer "
                                f"without one")
        if self._inbox is None:
            raise MQClientError("start the consumer (or enter `async with`) before reading from it")
        if self._in_hand is not None:
            if self._in_hand.remaining:
                return self._in_hand.remaining.popleft()
            self._in_hand.settle(ConsumeConcurrentlyStatus.CONSUME_SUCCESS)
            self._in_hand = None
        if self._stopping:
            raise ConsumerStoppedError(f"consumer {self.group} is stopped")
        delivery = await self._inbox.get()
        if delivery is _STOPPED:
            self._inbox.put_nowait(_STOPPED)  # for any other reader
            raise ConsumerStoppedError(f"consumer {self.group} is stopped")
        self._in_hand = delivery
        return delivery.remaining.popleft()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> MessageExt:
        try:
            return await self.getone()
        except ConsumerStoppedError:
            raise StopAsyncIteration from None


class PullConsumer(Client):
    """A pull consumer of one group; the keyword arguments are :class:`ferrymq.sdk.PullConsumer`'s.
    The application picks queues and offsets, and commits the offsets it has consumed up to."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **kwargs: Any):
        reactor_thread.ensure_running()
        self._core: core_pull.PullConsumer = reactor_thread.call(
            lambda: core_pull.PullConsumer(group, namesrv_addr, **kwargs))

    async def stop(self) -> None:
        """Commit the remembered offsets, unregister and close the connections."""
        await super().stop()

    async def fetch_subscribe_queues(self, topic: str) -> list[MessageQueue]:
        """The topic's readable queues, sorted."""
        return await call(self._core.fetch_subscribe_queues, topic)

    async def pull(self, mq: MessageQueue, expression: str = SUB_ALL, offset: int = 0, max_nums: int = 32, *,
                   block: bool = False, expression_type: str = TAG, timeout: float | None = None) -> PullResult:
        """Messages of ``mq`` from ``offset``; with ``block`` the broker holds the request until some arrive."""
        return await call(self._core.pull, mq, expression, offset, max_nums, block=block,
                          expression_type=expression_type, timeout=timeout)

    def update_offset(self, mq: MessageQueue, offset: int) -> None:
        """Remember ``offset`` as consumed up to (committed on schedule, by :meth:`commit` and at stop)."""
        post(self._core.update_offset, mq, offset)

    async def commit(self, mqs: Iterable[MessageQueue] | None = None) -> None:
        """Write the remembered offsets (of ``mqs``, default all) to the brokers."""
        await call(self._core.commit, None if mqs is None else list(mqs))

    async def fetch_consume_offset(self, mq: MessageQueue, from_store: bool = True) -> int:
        return await call(self._core.fetch_consume_offset, mq, from_store)
