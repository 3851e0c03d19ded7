"""FerryMQ's asyncio client: the Deferred SDK's producer, consumers and admin with ``async``/``await``.

::

    async with Producer("pg", "127.0.0.1:9876") as producer:
        result = await producer.send(Message("TopicA", b"hello", tags="TagA"))

    consumer = PushConsumer("cg", "127.0.0.1:9876")
    consumer.subscribe("TopicA", "TagA || TagB")
    async with consumer:
        async for msg in consumer:
            ...

Every call runs the same Deferred-based client as :mod:`ferrymq.sdk`, in the SDK's reactor thread
(:mod:`ferrymq.sdk.reactor_thread`), and is bridged to the caller's event loop (:mod:`.bridge`). Errors are
the SDK's own (MQResponseError with the broker's code and remark, MQClientError, RemotingTimeoutError...),
and cancelling a task cancels the call it awaits.

Why a reactor thread rather than Twisted's asyncio reactor (``asyncioreactor.install()`` with
``Deferred.asFuture``): a process can install one reactor only, and only before anything imports
``twisted.internet.reactor``. The asyncio reactor would then fail in any process where Twisted code,
a library, or the blocking clients got there first, and it would tie the SDK to one event loop for the
life of the process, while ``asyncio.run`` makes a new loop each time. The reactor thread works in any
process, next to the blocking clients and next to other loops; the cost is one thread hop per call.
"""

from ..consumer import ConsumeConcurrentlyStatus, ConsumeFromWhere, ConsumeOrderlyStatus, MessageModel
from ..message import Message, MessageExt, MessageQueue, PullResult, PullStatus, SendResult, SendStatus
from ..producer import LocalTransactionState, select_by_hash
from .admin import MQAdmin
from .consumer import ConsumerStoppedError, PullConsumer, PushConsumer
from .producer import Producer

__all__ = [
    "ConsumeConcurrentlyStatus",
    "ConsumeFromWhere",
    "ConsumeOrderlyStatus",
    "ConsumerStoppedError",
    "LocalTransactionState",
    "MQAdmin",
    "Message",
    "MessageExt",
    "MessageModel",
    "MessageQueue",
    "Producer",
    "PullConsumer",
    "PullResult",
    "PullStatus",
    "PushConsumer",
    "SendResult",
    "SendStatus",
    "select_by_hash",
]
