"""What an asyncio application relies on beyond the shared scenarios: the SDK's exceptions, cancellation,
the acknowledgement rules of ``async for``, and application callbacks running on the application's loop."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from ferrymq.remoting import RemotingConnectError, RemotingServer
from ferrymq.sdk import aio
from ferrymq.sdk.aio import bridge
from ferrymq.sdk.client_config import ClientConfig
from ferrymq.sdk.client_instance import MQClientError
from ferrymq.sdk.errors import MQResponseError
from ferrymq.wire.codes import RequestCode, ResponseCode
from twisted.internet import defer

from tests.sdk.test_blocking_admin import free_port

FIRST = "CONSUME_FROM_FIRST_OFFSET"


def run(coro, timeout: float = 30.0):
    async def bounded():
        async with asyncio.timeout(timeout):
            return await coro

    return asyncio.run(bounded())


# ---------------------------------------------------------------------------------------------- errors


def test_errors_are_the_sdks_exceptions(cluster, topic):
    async def main():
        producer = aio.Producer("g_errors", cluster.namesrv_addr)
        with pytest.raises(MQClientError, match="not started"):
            await producer.send(aio.Message(topic, b"early"))
        async with producer, aio.MQAdmin(cluster.namesrv_addr) as admin:
            with pytest.raises(MQClientError, match="body is empty"):
                await producer.send(aio.Message(topic, b""))
            with pytest.raises(MQResponseError) as info:
                await admin.fetch_route("NoSuchTopic")
            assert info.value.code == ResponseCode.TOPIC_NOT_EXIST
        async with aio.MQAdmin(f"127.0.0.1:{free_port()}", timeout=2) as nobody:
            with pytest.raises(RemotingConnectError):
                await nobody.fetch_route(topic)

    run(main())


def test_a_bad_group_or_expression_is_refused_at_once(cluster):
    with pytest.raises(ValueError):
        aio.Producer("bad group!", cluster.namesrv_addr)
    consumer = aio.PushConsumer("g_bad_expression", cluster.namesrv_addr)
    with pytest.raises(ValueError, match="names no tag"):
        consumer.subscribe("T", "||")


# ---------------------------------------------------------------------------------------------- cancellation


def test_cancelling_the_task_cancels_the_deferred(rt):
    from twisted.internet import reactor

    outcome: list[tuple[type, bool]] = []

    def never_answered() -> defer.Deferred:
        here = threading.current_thread()
        d = defer.Deferred()
        d.addErrback(lambda f: outcome.append((f.type, threading.current_thread() is here)))
        return d

    async def main():
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(bridge.call(never_answered), 0.2)

    run(main())
    rt.call(lambda: None)  # the cancel was posted before this call: it has run
    assert outcome == [(defer.CancelledError, True)] and reactor.running


@pytest.fixture
def silent_namesrv(rt):
    server = RemotingServer({RequestCode.GET_ROUTEINFO_BY_TOPIC: lambda cmd, ch: defer.Deferred()}, name="silent")
    rt.call(server.listen, 0, "127.0.0.1")
    yield f"127.0.0.1:{server.port}"
    rt.call(server.stop, 0.5)


def test_a_call_waiting_on_the_broker_stops_when_cancelled(silent_namesrv):
    async def main():
        async with aio.MQAdmin(silent_namesrv, timeout=10) as admin:
            started = time.monotonic()
            task = asyncio.create_task(admin.fetch_route("T"))
            await asyncio.sleep(0.1)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            return time.monotonic() - started

    assert run(main()) < 2


# ---------------------------------------------------------------------------------------------- async for


async def send_all(cluster, topic: str, bodies: list[bytes]) -> None:
    async with aio.Producer(f"p_{topic}", cluster.namesrv_addr) as producer:
        for body in bodies:
            await producer.send(aio.Message(topic, body))


async def read(cluster, topic: str, count: int, *, fail_on: bytes | None = None,
               **settings) -> list[aio.MessageExt]:
    """One consumer session of the topic's group: ``count`` messages, then leave (by an exception raised
    while handling ``fail_on``)."""
    consumer = aio.PushConsumer(f"g_{topic}", cluster.namesrv_addr, consume_from_where=FIRST, **settings)
    consumer.subscribe(topic)
    got = []
    async with consumer:
        async for msg in consumer:
            got.append(msg)
            if msg.body == fail_on:
                raise RuntimeError("the handler failed")
            if len(got) == count:
                break
    return got


def test_leaving_the_loop_commits_the_message_in_hand_and_gives_back_the_rest(cluster, topic):
    async def main():
        await send_all(cluster, topic, [b"m1", b"m2", b"m3"])
        first = await read(cluster, topic, 1)
        second = await read(cluster, topic, 2)  # redelivered through the retry topic if given back
        return first, second

    first, second = run(main())
    assert [m.body for m in first] == [b"m1"]
    assert sorted(m.body for m in second) == [b"m2", b"m3"]
    assert {m.topic for m in second} == {topic}


def test_an_exception_in_the_loop_has_the_message_delivered_again(cluster, topic):
    async def main():
        await send_all(cluster, topic, [b"poison"])
        with pytest.raises(RuntimeError, match="handler failed"):
            await read(cluster, topic, 1, fail_on=b"poison")
        return await read(cluster, topic, 1)

    (again,) = run(main())
    assert again.body == b"poison" and again.reconsume_times == 1 and again.topic == topic


def test_a_delivery_left_half_read_is_delivered_again_whole(cluster, topic):
    async def main():
        await send_all(cluster, topic, [b"b1", b"b2"])
        first = await read(cluster, topic, 1, consume_message_batch_max_size=2)
        return first, await read(cluster, topic, 2)

    first, again = run(main())
    assert [m.body for m in first] == [b"b1"]
    assert sorted((m.body, m.reconsume_times) for m in again) == [(b"b1", 1), (b"b2", 1)]


def test_getone_before_start_and_after_stop(cluster, topic):
    async def main():
        consumer = aio.PushConsumer(f"g_{topic}", cluster.namesrv_addr)
        consumer.subscribe(topic)
        with pytest.raises(MQClientError, match="start the consumer"):
            await consumer.getone()
        await consumer.start()
        waiting = asyncio.create_task(consumer.getone())
        await asyncio.sleep(0.1)
        await consumer.stop()
        with pytest.raises(aio.ConsumerStoppedError):
            await waiting
        with pytest.raises(aio.ConsumerStoppedError):
            await consumer.getone()
        assert [m async for m in consumer] == []

    run(main())


# ---------------------------------------------------------------------------------------------- callbacks


def test_a_coroutine_listener_runs_on_the_application_loop(cluster, topic):
    async def main():
        loop_thread = threading.current_thread()
        seen: list[tuple[bytes, bool]] = []
        done = asyncio.Event()

        async def listener(msgs, context):
            await asyncio.sleep(0)
            seen.extend((m.body, threading.current_thread() is loop_thread) for m in msgs)
            if len(seen) == 2:
                done.set()
            return aio.ConsumeConcurrentlyStatus.CONSUME_SUCCESS

        consumer = aio.PushConsumer(f"g_{topic}", cluster.namesrv_addr, consume_from_where=FIRST)
        consumer.subscribe(topic)
        consumer.register_listener(listener)
        async with consumer:
            await send_all(cluster, topic, [b"x", b"y"])
            await done.wait()
            with pytest.raises(MQClientError, match="listener"):
                await consumer.getone()
        return sorted(seen)

    assert run(main()) == [(b"x", True), (b"y", True)]


def test_the_transaction_checker_runs_on_the_application_loop(cluster, topic):
    async def main():
        loop_thread = threading.current_thread()
        asked: list[tuple[bytes, bool]] = []
        checked = asyncio.Event()

        async def checker(msg):
            asked.append((msg.body, threading.current_thread() is loop_thread))
            checked.set()
            return aio.LocalTransactionState.COMMIT_MESSAGE

        # the broker asks the producers it knows from heartbeats: heartbeat often, so it knows this one soon
        config = ClientConfig(cluster.namesrv_addr, heartbeat_broker_interval=0.2)
        async with aio.Producer(f"p_{topic}", config=config, transaction_checker=checker) as producer, \
                aio.PullConsumer(f"g_{topic}", cluster.namesrv_addr) as puller:
            _, state = await producer.send_message_in_transaction(
                aio.Message(topic, b"decided-later"), lambda msg, arg: aio.LocalTransactionState.UNKNOW)
            assert state is aio.LocalTransactionState.UNKNOW
            await checked.wait()
            (mq,) = await puller.fetch_subscribe_queues(topic)
            pulled = await puller.pull(mq, offset=0, block=True)
        return asked[:1], [m.body for m in pulled.messages]

    asked, bodies = run(main())
    assert asked == [(b"decided-later", True)] and bodies == [b"decided-later"]


def test_a_half_message_is_committed_after_its_send_returned(cluster, topic):
    async def main():
        async with aio.Producer(f"p_{topic}", cluster.namesrv_addr) as producer, \
                aio.PullConsumer(f"g_{topic}", cluster.namesrv_addr) as puller:
            msg = aio.Message(topic, b"decided-by-a-later-request")
            result, _ = await producer.send_message_in_transaction(
                msg, lambda msg, arg: aio.LocalTransactionState.UNKNOW)
            (mq,) = await puller.fetch_subscribe_queues(topic)
            before = await puller.pull(mq, offset=0, block=False)
            await producer.end_transaction(topic, result.message_queue.broker_name, msg.uniq_key,
                                           result.transaction_id, result.offset_msg_id, result.queue_offset,
                                           aio.LocalTransactionState.COMMIT_MESSAGE)
            after = await puller.pull(mq, offset=0, block=True)
        return before.messages, [m.body for m in after.messages]

    before, bodies = run(main())
    assert before == [] and bodies == [b"decided-by-a-later-request"]
