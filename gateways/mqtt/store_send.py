"""What devices publish, stored by the broker of the gateway's own process without a send request.

Through the SDK, a device's message is a SEND_MESSAGE_V2 request built by the producer (header, encoded
properties), dispatched to the broker's send processor in process (properties decoded again), answered
with a response command the producer turns into a SendResult. In the broker's process the send
processor is at hand: :meth:`~ferrymq.server.broker.processors.send.SendProcessor.store` runs a send's
checks (topic exists or is auto-created, permissions, size limits) and store path on the message the
producer prepared (:meth:`~ferrymq.sdk.producer.Producer.prepare`: its checks, UNIQ_KEY, compression),
on the queue the producer's selector picks among this broker's write queues. The stored record is the
one the request would have stored; the Deferred fires when the store took it (flushed, under
SYNC_FLUSH), or fails with the error the producer would raise for the broker's refusal.

The producer keeps what the broker of this process cannot do: a topic it does not have or may not
write (the topic may live on the cluster's other brokers), and whatever the broker's request table
refuses or checks before its send processor reads a send (:func:`~ferrymq.server.ha.roles.refuses_sends`):
a slave's sends go to its master, and a master short of minInSyncReplicas answers the producer's request
as it answers a socket client's. The table is looked up at each send, as the controller swaps it at runtime.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from ferrymq.remoting.client import split_address
from ferrymq.remoting.dispatch import Route
from ferrymq.remoting.errors import RemotingTimeoutError, ResponseCodeError
from ferrymq.remoting.local import LocalChannel
from ferrymq.remoting.pending import Pending
from ferrymq.sdk.message import Message
from ferrymq.sdk.producer import Producer, select_by_hash
from ferrymq.server.ha.roles import refuses_sends
from ferrymq.server.store.status import PutMessageResult
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.errors import Refusal
from ferrymq.wire.message import MessageExt, MessageSysFlag

#: refusals another broker of the cluster may not give: the producer sends those messages by route
_ELSEWHERE = frozenset((ResponseCode.TOPIC_NOT_EXIST, ResponseCode.NO_PERMISSION))
#: the request the producer would have sent, named in its errors
_OPERATION = RequestCode.SEND_MESSAGE_V2.name


class StoreSend:
    """Sends of ``producer`` stored by ``sends`` (the send processor of the broker at ``addr`` in this
    process, whose request table as it is now ``table`` gives); ``born_host``: the messages' BORNHOST,
    ``ip:port``."""

    def __init__(self, sends: Any, table: Mapping[int, Route], addr: str, born_host: str, producer: Producer,
                 reactor: Any = None):
        if reactor is None:
            from twisted.internet import reactor
        self.sends = sends
        self.table = table
        self.addr = addr
        self.producer = producer
        self.reactor = reactor
        self._channel = LocalChannel(born_host)
        self._born_host = split_address(born_host)
        #: told of each message stored here, with its place set and its body as sent (the fan-out hands it
        #: out without reading it back, :meth:`~.store_fanout.StoreFanOut.stored`)
        self.on_stored: Callable[[MessageExt], None] | None = None

    def send_orderly(self, message: Message, key: str) -> defer.Deferred:
        """Store ``message`` in the queue that :func:`~ferrymq.sdk.producer.select_by_hash` picks for
        ``key``; fires with the PutMessageResult."""
        producer = self.producer
        if refuses_sends(self.table):
            return producer.send_orderly(message, select_by_hash, key)
        try:
            body, sys_flag = producer.prepare(message)
            msg = MessageExt(topic=message.topic, body=body, flag=message.flag, properties=dict(message.properties),
                             sys_flag=sys_flag, born_timestamp=int(time.time() * 1000), born_host=self._born_host)
            result = self.sends.store(msg, lambda queues: select_by_hash(range(queues), message, key),
                                      producer.create_topic_key, producer.default_topic_queue_nums, self._channel)
        except Refusal as refusal:
            if refusal.code in _ELSEWHERE:
                return producer.send_orderly(message, select_by_hash, key)
            return defer.fail(self._error(refusal))
        except Exception:  # noqa: BLE001 - surfaced through the Deferred, as the producer's
            return defer.fail()
        if isinstance(result, Pending):
            result = result.deferred()
        elif not isinstance(result, defer.Deferred):
            return defer.succeed(self._kept(result, msg, message.body))
        timeout = producer.send_msg_timeout
        result.addCallback(self._kept, msg, message.body)
        return result.addTimeout(timeout, self.reactor, onTimeoutCancel=self._timed_out).addErrback(self._refused)

    def _kept(self, result: PutMessageResult, msg: MessageExt, body: bytes) -> PutMessageResult:
        on_stored = self.on_stored
        if on_stored is not None:
            msg.body, msg.sys_flag = body, msg.sys_flag & ~MessageSysFlag.COMPRESSED_FLAG
            msg.queue_offset = result.queue_offset
            msg.commitlog_offset = result.commitlog_offset
            msg.store_timestamp = result.store_timestamp
            on_stored(msg)
        return result

    def _timed_out(self, _result: Any, timeout: float) -> Failure:
        return Failure(RemotingTimeoutError(self.addr, RequestCode.SEND_MESSAGE_V2, 0, timeout))

    def _refused(self, failure: Failure) -> Failure:
        if failure.check(Refusal):
            return Failure(self._error(failure.value))
        return failure

    def _error(self, refusal: Refusal) -> ResponseCodeError:
        return ResponseCodeError(_OPERATION, self.addr, refusal.code, refusal.remark)


__all__ = ["StoreSend"]
