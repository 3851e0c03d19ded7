"""The same client scenarios written in each of the SDK's three styles: Deferreds in the reactor thread,
the blocking facades, and asyncio. Each method is what an application in that style would write; the
tests call them from a plain thread and compare what comes back."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable

from ferrymq.sdk import (
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
    LocalTransactionState,
    Message,
    MessageExt,
    Producer,
    PullConsumer,
    PullResult,
    PushConsumer,
    SendResult,
    aio,
    reactor_thread,
)
from twisted.internet import defer

FROM_FIRST = "CONSUME_FROM_FIRST_OFFSET"
#: longest a scenario waits for messages
WAIT = 20.0

Execute = Callable[[Message, object], LocalTransactionState]


class DeferredStyle:
    name = "deferred"

    def __init__(self, namesrv_addr: str):
        self.namesrv_addr = namesrv_addr

    def send(self, group: str, msg: Message) -> SendResult:
        @defer.inlineCallbacks
        def go():
            producer = Producer(group, self.namesrv_addr)
            yield producer.start()
            try:
                return (yield producer.send(msg))
            finally:
                yield producer.shutdown()

        return reactor_thread.call(go)

    def push_consume(self, group: str, topic: str, expression: str, msgs: list[Message],
                     until: int) -> list[MessageExt]:
        from twisted.internet import reactor

        @defer.inlineCallbacks
        def go():
            got: list[MessageExt] = []
            enough = defer.Deferred()

            def listener(batch, _context):
                got.extend(batch)
                if len(got) >= until and not enough.called:
                    enough.callback(None)

            consumer = PushConsumer(group, self.namesrv_addr, consume_from_where=FROM_FIRST)
            consumer.subscribe(topic, expression)
            consumer.register_listener(listener)
            producer = Producer(group, self.namesrv_addr)
            yield producer.start()
            yield consumer.start()
            try:
                for msg in msgs:
                    yield producer.send(msg)
                yield enough.addTimeout(WAIT, reactor)
            finally:
                yield consumer.shutdown()
                yield producer.shutdown()
            return got

        return reactor_thread.call(go, timeout=WAIT + 20)

    def pull_and_commit(self, group: str, topic: str) -> tuple[PullResult, int]:
        @defer.inlineCallbacks
        def go():
            consumer = PullConsumer(group, self.namesrv_addr)
            yield consumer.start()
            try:
                (mq,) = yield consumer.fetch_subscribe_queues(topic)
                result = yield consumer.pull(mq, "*", 0, 32, block=True)
                consumer.update_offset(mq, result.next_begin_offset)
                yield consumer.commit()
                return result, (yield consumer.fetch_consume_offset(mq))
            finally:
                yield consumer.shutdown()

        return reactor_thread.call(go, timeout=WAIT + 20)

    def transact(self, group: str, msg: Message, execute: Execute):
        @defer.inlineCallbacks
        def go():
            producer = Producer(group, self.namesrv_addr)
            yield producer.start()
            try:
                return (yield producer.send_message_in_transaction(msg, execute))
            finally:
                yield producer.shutdown()

        return reactor_thread.call(go)


class BlockingStyle:
    name = "blocking"

    def __init__(self, namesrv_addr: str):
        self.namesrv_addr = namesrv_addr

    def send(self, group: str, msg: Message) -> SendResult:
        with BlockingProducer(group, self.namesrv_addr) as producer:
            return producer.send(msg)

    def push_consume(self, group: str, topic: str, expression: str, msgs: list[Message],
                     until: int) -> list[MessageExt]:
        got: list[MessageExt] = []
        lock, enough = threading.Lock(), threading.Event()

        def listener(batch, _context):
            with lock:
                got.extend(batch)
                if len(got) >= until:
                    enough.set()

        consumer = BlockingPushConsumer(group, self.namesrv_addr, consume_from_where=FROM_FIRST)
        consumer.subscribe(topic, expression)
        consumer.register_listener(listener)
        with BlockingProducer(group, self.namesrv_addr) as producer, consumer:
            for msg in msgs:
                producer.send(msg)
            if not enough.wait(WAIT):
                raise TimeoutError(f"{len(got)} of {until} messages within {WAIT} s")
        return got

    def pull_and_commit(self, group: str, topic: str) -> tuple[PullResult, int]:
        with BlockingPullConsumer(group, self.namesrv_addr) as consumer:
            (mq,) = consumer.fetch_subscribe_queues(topic)
            result = consumer.pull(mq, "*", 0, 32, block=True)
            consumer.update_offset(mq, result.next_begin_offset)
            consumer.commit()
            return result, consumer.fetch_consume_offset(mq)

    def transact(self, group: str, msg: Message, execute: Execute):
        with BlockingProducer(group, self.namesrv_addr) as producer:
            return producer.send_message_in_transaction(msg, execute)


class AsyncioStyle:
    name = "asyncio"

    def __init__(self, namesrv_addr: str):
        self.namesrv_addr = namesrv_addr

    def send(self, group: str, msg: Message) -> SendResult:
        async def main():
            async with aio.Producer(group, self.namesrv_addr) as producer:
                return await producer.send(msg)

        return asyncio.run(main())

    def push_consume(self, group: str, topic: str, expression: str, msgs: list[Message],
                     until: int) -> list[MessageExt]:
        async def main():
            consumer = aio.PushConsumer(group, self.namesrv_addr, consume_from_where=FROM_FIRST)
            consumer.subscribe(topic, expression)
            got: list[MessageExt] = []
            async with aio.Producer(group, self.namesrv_addr) as producer, consumer:
                for msg in msgs:
                    await producer.send(msg)
                async with asyncio.timeout(WAIT):
                    async for msg in consumer:
                        got.append(msg)
                        if len(got) >= until:
                            break
            return got

        return asyncio.run(main())

    def pull_and_commit(self, group: str, topic: str) -> tuple[PullResult, int]:
        async def main():
            async with aio.PullConsumer(group, self.namesrv_addr) as consumer:
                (mq,) = await consumer.fetch_subscribe_queues(topic)
                result = await consumer.pull(mq, "*", 0, 32, block=True)
                consumer.update_offset(mq, result.next_begin_offset)
                await consumer.commit()
                return result, await consumer.fetch_consume_offset(mq)

        return asyncio.run(main())

    def transact(self, group: str, msg: Message, execute: Execute):
        async def execute_async(msg: Message, arg: object) -> LocalTransactionState:
            await asyncio.sleep(0)  # a coroutine, awaited on the application's loop
            return execute(msg, arg)

        async def main():
            async with aio.Producer(group, self.namesrv_addr) as producer:
                return await producer.send_message_in_transaction(msg, execute_async)

        return asyncio.run(main())


STYLES = {style.name: style for style in (DeferredStyle, BlockingStyle, AsyncioStyle)}
