"""What a gateway publishes, stored by the broker of the gateway's own process without a send request.

Through the SDK, a message is a SEND_MESSAGE_V2 request built by the producer (header, encoded
properties), dispatched to the broker's send processor in process (properties decoded again), answered
with a response command the producer turns into a SendResult. In the broker's process the send
processor is at hand: :meth:`~ferrymq.server.broker.processors.send.SendProcessor.store` runs a send's
checks (topic exists or is auto-created, permissions, queue, size limits) and store path on the message
the producer prepared (:meth:`~ferrymq.sdk.producer.Producer.prepare`: its checks, UNIQ_KEY,
compression). The stored record is the one the request would have stored, and the outcome the one the
producer makes of the broker's answer: a SendResult, or the refusal's code and remark as the error the
producer raises.

Two ways in:

- as the producer's ``store_in_process``: each send attempt the producer makes to a queue of this
  broker, the queue picked by the producer's own selection, retries and route (the HTTP gateway);
- :meth:`StoreSend.send_orderly`: the queue :func:`~ferrymq.sdk.producer.select_by_hash` picks among this
  broker's own write queues, the producer sending by route what this broker does not have or may not
  write (the MQTT gateway: an MQTT topic's messages stay in one queue).

Requests still carry a retry topic's messages (a send rewrites them to the DLQ), and every send while the
broker's request table refuses or checks sends (a slave's, a master's short of in-sync replicas:
:func:`~ferrymq.server.ha.roles.refuses_sends`), so they are answered as a socket client's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from ferrymq.remoting.client import split_address
from ferrymq.remoting.errors import RemotingTimeoutError, ResponseCodeError
from ferrymq.remoting.local import LocalChannel, within
from ferrymq.sdk.message import Message, SendResult, SendStatus
from ferrymq.sdk.producer import Producer, select_by_hash
from ferrymq.server.ha.roles import refuses_sends
from ferrymq.server.store.status import PutMessageResult, PutMessageStatus
from ferrymq.wire.bodies import MessageQueue
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.errors import Refusal
from ferrymq.wire.message import MessageConst, MessageExt, MessageSysFlag, java_string_hash
from ferrymq.wire.topics import RETRY_GROUP_TOPIC_PREFIX

#: refusals another broker of the cluster may not give: :meth:`StoreSend.send_orderly` sends by route then
_ELSEWHERE = frozenset((ResponseCode.TOPIC_NOT_EXIST, ResponseCode.NO_PERMISSION))
#: the request the producer would have sent, named in its errors
_OPERATION = RequestCode.SEND_MESSAGE_V2.name
#: a stored put's status as the SendResult's (a put not stored is refused)
_SENT = {
    PutMessageStatus.PUT_OK: SendStatus.SEND_OK,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}


class StoreSend:
    """Sends of ``producer`` stored by ``sends``, the send processor of the broker at ``addr`` in this
    process, whose request table is ``table``; ``born_host``: the messages' BORNHOST, ``ip:port``."""

    def __init__(self, sends: Any, table: Mapping[int, Any], addr: str, born_host: str, producer: Producer,
                 reactor: Any = None):
        self.sends = sends
        self.table = table
        self.addr = addr
        self.producer = producer
        self.reactor = reactor
        self._channel = LocalChannel(born_host)
        self._born_host = split_address(born_host)
        #: told of each message stored here, its place set and its body as published (the MQTT fan-out
        #: hands it out without reading it back, :meth:`~.mqtt.store_fanout.StoreFanOut.stored`)
        self.on_stored: Callable[[MessageExt], None] | None = None

    def takes(self, topic: str) -> bool:
        """Whether a send to ``topic`` is stored here now rather than sent as a request."""
        return not topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and not refuses_sends(self.table)

    def __call__(self, addr: str, message: Message, mq: MessageQueue, body: bytes, sys_flag: int,
                 timeout: float) -> defer.Deferred | None:
        """The producer's ``store_in_process``: its attempt to ``mq``, stored when ``addr`` is this broker's."""
        if addr != self.addr or not self.takes(message.topic):
            return None
        try:
            return _deferred(self._store(message, body, sys_flag, lambda _queues: mq.queue_id, timeout))
        except Refusal as refusal:
            return defer.fail(self._error(refusal))
        except Exception:  # noqa: BLE001 - surfaced through the Deferred, as the producer's
            return defer.fail()

    def send_orderly(self, message: Message, key: str) -> defer.Deferred:
        """Store ``message`` in the queue of this broker that :func:`~ferrymq.sdk.producer.select_by_hash`
        picks for ``key``; fires with the SendResult."""
        return _deferred(self.store_orderly(message, key))

    def store_orderly(self, message: Message, key: str, answer: bool = True,
                      by_route: Callable[[Message, str], Any] | None = None) -> Any:
        """:meth:`send_orderly`, whose outcome is the SendResult itself when the store took the message at
        once (an ASYNC_FLUSH store): the caller answers without a Deferred's callbacks, once a message.
        ``answer=False``: a message stored here has the store's PutMessageResult as its outcome instead,
        for a caller that needs to know only that it was stored (no SendResult built to be dropped).
        ``by_route(message, key)`` sends a message this broker does not store (default: the producer's
        send_orderly by hash of ``key``)."""
        producer = self.producer
        if by_route is None:
            def by_route(message: Message, key: str) -> Any:
                return producer.send_orderly(message, select_by_hash, key)
        if not self.takes(message.topic):
            return by_route(message, key)
        try:
            body, sys_flag = producer.prepare(message)
            hashed = _key_hash(str(key))
            return self._store(message, body, sys_flag, lambda queues: select_by_hash(range(queues), message, hashed),
                               producer.send_msg_timeout, answer)
        except Refusal as refusal:
            if refusal.code in _ELSEWHERE:
                return by_route(message, key)
            return defer.fail(self._error(refusal))
        except Exception:  # noqa: BLE001 - surfaced through the Deferred, as the producer's
            return defer.fail()

    def store_orderly_many(self, messages: list[Message], key: str,
                           by_route: Callable[[Message, str], Any] | None = None) -> list[Any]:
        """:meth:`store_orderly` (``answer=False``) of messages that share ``key`` (a device's PUBLISHes of one
        read to one MQTT topic), in order: stored by one
        :meth:`~ferrymq.server.broker.processors.send.SendProcessor.store_many`, each as the record
        :meth:`store_orderly` would store, with the outcome it would have (its PutMessageResult, a
        Deferred of it, or a failed Deferred)."""
        producer = self.producer
        if by_route is None:
            def by_route(message: Message, key: str) -> Any:
                return producer.send_orderly(message, select_by_hash, key)
        if len(messages) == 1 or not self.takes(messages[0].topic):
            return [self.store_orderly(message, key, False, by_route) for message in messages]
        outcomes: list[Any] = [None] * len(messages)
        taken: list[int] = []
        exts: list[MessageExt] = []
        born = int(time.time() * 1000)
        for i, message in enumerate(messages):
            try:
                body, sys_flag = producer.prepare(message)
            except Exception:  # noqa: BLE001 - surfaced through the Deferred, as the producer's
                outcomes[i] = defer.fail()
                continue
            taken.append(i)
            exts.append(self._ext(message, body, sys_flag, born))
        if not exts:
            return outcomes
        hashed = _key_hash(str(key))
        first = messages[taken[0]]
        try:
            stored = self.sends.store_many(exts, lambda queues: select_by_hash(range(queues), first, hashed),
                                           producer.create_topic_key, producer.default_topic_queue_nums,
                                           self._channel)
        except Refusal as refusal:
            for i in taken:
                outcomes[i] = (by_route(messages[i], key) if refusal.code in _ELSEWHERE
                               else defer.fail(self._error(refusal)))
            return outcomes
        except Exception:  # noqa: BLE001 - surfaced through the Deferreds, as the producer's
            failure = Failure()
            for i in taken:
                outcomes[i] = defer.fail(failure)
            return outcomes
        for i, msg, put in zip(taken, exts, stored):
            outcomes[i] = (defer.fail(self._error(put)) if isinstance(put, Refusal) else
                           self._outcome(put, messages[i], msg, None, "", False, producer.send_msg_timeout))
        return outcomes

    def _store(self, message: Message, body: bytes, sys_flag: int, queue_of: Callable[[int], int],
               timeout: float, answer: bool = True) -> Any:
        """``message`` (prepared: ``body`` and ``sys_flag``) stored on the queue ``queue_of`` picks: the
        SendResult (``answer=False``: the PutMessageResult), or a Deferred of it when the store answers
        later; raises the Refusal of a check, fails the Deferred with the error of a later refusal."""
        producer = self.producer
        picked: list[int] = []  # the queue answered, as a send's is, even if a delay parks the message

        def pick(queues: int) -> int:
            picked.append(queue_of(queues))
            return picked[0]

        msg = self._ext(message, body, sys_flag, int(time.time() * 1000))
        put = self.sends.store(msg, pick, producer.create_topic_key, producer.default_topic_queue_nums, self._channel)
        return self._outcome(put, message, msg, picked, message.properties[MessageConst.UNIQ_KEY], answer, timeout)

    def _ext(self, message: Message, body: bytes, sys_flag: int, born: int) -> MessageExt:
        """The record the send processor stores for ``message`` (prepared: ``body`` and ``sys_flag``)."""
        return MessageExt(topic=message.topic, body=body, flag=message.flag, properties=dict(message.properties),
                          sys_flag=sys_flag, born_timestamp=born, born_host=self._born_host)

    def _outcome(self, put: Any, message: Message, msg: MessageExt, picked: list[int] | None, uniq_key: str,
                 answer: bool, timeout: float) -> Any:
        """What :meth:`_sent` makes of ``put`` (the send processor's PutMessageResult for ``msg``, the record
        of ``message``, or its promise), or a Deferred of it failing when the store has not answered within
        ``timeout`` seconds. The topic answered is the message's, even if a delay parked the record elsewhere."""
        stored = within(put, timeout, self.reactor,
                        lambda: RemotingTimeoutError(self.addr, RequestCode.SEND_MESSAGE_V2, 0, timeout))
        if isinstance(stored, defer.Deferred):
            return stored.addCallbacks(self._sent, self._refused,
                                       (message.topic, picked, uniq_key, msg, message.body, answer))
        return self._sent(stored, message.topic, picked, uniq_key, msg, message.body, answer)

    def _sent(self, put: PutMessageResult, topic: str, picked: list[int] | None, uniq_key: str, msg: MessageExt,
              body: bytes, answer: bool = True) -> SendResult | PutMessageResult:
        """The SendResult the producer makes of a send's answer (``put_result_response``; ``answer=False``:
        ``put`` itself), once :attr:`on_stored` was told of ``msg``."""
        on_stored = self.on_stored
        if on_stored is not None:
            msg.body, msg.sys_flag = body, msg.sys_flag & ~MessageSysFlag.COMPRESSED_FLAG
            msg.queue_offset = put.queue_offset
            msg.commitlog_offset = put.commitlog_offset
            msg.store_timestamp = put.store_timestamp
            on_stored(msg)
        if not answer:
            return put
        config = self.sends.ctx.config
        return SendResult(_SENT[put.status], uniq_key, put.msg_id, MessageQueue(topic, config.brokerName, picked[0]),
                          put.queue_offset, uniq_key, config.regionId, config.traceOn)

    def _refused(self, failure: Failure) -> Failure:
        if failure.check(Refusal):
            return Failure(self._error(failure.value))
        return failure

    def _error(self, refusal: Refusal) -> ResponseCodeError:
        return ResponseCodeError(_OPERATION, self.addr, refusal.code, refusal.remark)


#: the Java String hash of an orderly send's key, which :func:`~ferrymq.sdk.producer.select_by_hash` takes as
#: it is: a device fleet publishes to few MQTT topics, each hashed once rather than once a message
_key_hash = lru_cache(maxsize=4096)(java_string_hash)


def _deferred(outcome: Any) -> defer.Deferred:
    return outcome if isinstance(outcome, defer.Deferred) else defer.succeed(outcome)


__all__ = ["StoreSend"]
