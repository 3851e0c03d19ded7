"""The asyncio producer: :class:`ferrymq.sdk.Producer` with ``await`` in place of Deferreds."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

from ferrymq.wire.message import MessageExt

from .. import producer as core
from .. import reactor_thread
from ..message import Message, MessageQueue, SendResult
from ..producer import LocalTransactionState, QueueSelector
from .bridge import Client, call, on_loop


class Producer(Client):
    """A producer of one group; the keyword arguments are :class:`ferrymq.sdk.Producer`'s.

    ``transaction_checker(msg)`` (a function or a coroutine function) answers the broker's check-backs
    of half messages with a :class:`LocalTransactionState`; it runs on the loop that started the producer.
    """

    def __init__(self, group: str, namesrv_addr: str | None = None, *,
                 transaction_checker: Callable[[MessageExt], Any] | None = None, **kwargs: Any):
        reactor_thread.ensure_running()
        self._checker = transaction_checker
        self._core: core.Producer = reactor_thread.call(lambda: core.Producer(group, namesrv_addr, **kwargs))

    async def start(self) -> None:
        """Register with the brokers (HEART_BEAT); call before sending."""
        checker = None if self._checker is None else on_loop(asyncio.get_running_loop(), self._checker)
        await call(self._start, checker)

    def _start(self, checker: Callable[[MessageExt], Any] | None):
        if checker is not None:
            self._core.transaction_checker = checker
        return self._core.start()

    async def stop(self) -> None:
        """Unregister from the brokers and close the connections."""
        await super().stop()

    async def send(self, msg: Message, timeout: float | None = None) -> SendResult:
        """Send and return the broker's SendResult, retrying on another broker as Java's producer does."""
        return await call(self._core.send, msg, timeout)

    async def send_oneway(self, msg: Message) -> None:
        """Write the message; returns once it is on the wire (the broker does not answer)."""
        await call(self._core.send_oneway, msg)

    async def send_to_queue(self, msg: Message, mq: MessageQueue, timeout: float | None = None) -> SendResult:
        """Send to one given queue, no retries."""
        return await call(self._core.send_to_queue, msg, mq, timeout)

    async def send_orderly(self, msg: Message, selector: QueueSelector, arg: Any = None,
                           timeout: float | None = None) -> SendResult:
        """Send to the queue ``selector(queues, msg, arg)`` picks (e.g. :func:`ferrymq.sdk.select_by_hash`)."""
        return await call(self._core.send_orderly, msg, selector, arg, timeout)

    async def send_batch(self, msgs: Sequence[Message], timeout: float | None = None) -> SendResult:
        """One request; the messages are stored consecutively in one queue."""
        return await call(self._core.send_batch, msgs, timeout)

    async def send_message_in_transaction(
        self, msg: Message, execute: Callable[[Message, Any], Any], arg: Any = None,
    ) -> tuple[SendResult, LocalTransactionState]:
        """Send a half message, run ``execute(msg, arg)`` (a function or a coroutine function, on this
        loop) for the local transaction, then commit or roll back with the state it returns."""
        execute_here = on_loop(asyncio.get_running_loop(), execute)
        return await call(self._core.send_message_in_transaction, msg, execute_here, arg)

    async def end_transaction(self, topic: str, broker_name: str, msg_id: str, transaction_id: str | None,
                              offset_msg_id: str, queue_offset: int, state: LocalTransactionState) -> None:
        """Commit or roll back a half message whose local transaction ended after the send
        (:meth:`ferrymq.sdk.Producer.end_transaction`)."""
        await call(self._core.end_transaction, topic, broker_name, msg_id, transaction_id, offset_msg_id,
                   queue_offset, state)

    async def fetch_publish_queues(self, topic: str) -> list[MessageQueue]:
        return await call(self._core.fetch_publish_queues, topic)
