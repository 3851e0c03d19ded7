"""Producer (Java ``DefaultMQProducerImpl``), Twisted-native: every send returns a Deferred.

- Route: GET_ROUTEINFO_BY_TOPIC; if the name server has none (17), the TBW102 template's route with at
  most ``default_topic_queue_nums`` queues per broker, so the broker auto-creates the topic on first send.
- Queue: round-robin over master write queues; a retry avoids the broker that just failed.
- Wire: SEND_MESSAGE_V2 (one-letter header) and SEND_BATCH_MESSAGE, as Java sends them. Each message
  gets a UNIQ_KEY; bodies of ``compress_over`` bytes or more (4 KiB) are zlib-compressed (not batches).
- Retries: ``retry_times_when_send_failed`` more attempts (2) on transport errors and on the broker codes
  Java retries (:data:`RETRY_CODES`); 10/11/12 come back as a non-OK SendResult, other codes fail.
- In a broker's own process (a gateway it serves), ``store_in_process`` may store an attempt to that
  broker without a request, answering as the request would.
"""

from __future__ import annotations

import socket

import enum
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from ferrymq.wire.bodies import MessageQueue, TopicRouteData
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.headers import EndTransactionRequestHeader, SendMessageRequestHeader
from ferrymq.wire.message import (
    DEFAULT_MAX_MESSAGE_SIZE,
    MessageConst,
    MessageExt,
    MessageSysFlag,
    compress_body,
    encode_batch,
    encode_properties,
    java_string_hash,
)
from ferrymq.remoting.local_address import local_ip
from ferrymq.wire.msgid import UniqKeyGenerator, parse_offset_msg_id
from ferrymq.wire.topics import AUTO_CREATE_TOPIC, RETRY_GROUP_TOPIC_PREFIX, validate_topic

from .client_config import ClientConfig, settle_config
from .client_instance import ClientInstance, MQClientError
from .errors import MQResponseError
from .message import Message
from ferrymq.remoting import RemotingError
from .route import TopicPublishInfo, publish_info

log = logging.getLogger("ferrymq.sdk.producer")

#: broker codes after which Java's producer tries again (``DefaultMQProducer.retryResponseCodes``)
RETRY_CODES = frozenset(
    {
        ResponseCode.TOPIC_NOT_EXIST,
        ResponseCode.SERVICE_NOT_AVAILABLE,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_BUSY,
        ResponseCode.NO_PERMISSION,
        ResponseCode.NO_BUYER_ID,
        ResponseCode.NOT_IN_CURRENT_UNIT,
        ResponseCode.GO_AWAY,
    }
)

_uniq = UniqKeyGenerator(socket.inet_aton(local_ip()))


def should_retry(exc: BaseException) -> bool:
    """Whether a failed send attempt may be tried again on another queue (Java's rules)."""
    if isinstance(exc, MQResponseError):
        return exc.code in RETRY_CODES
    return isinstance(exc, (RemotingError, MQClientError))


class LocalTransactionState(enum.Enum):
    COMMIT_MESSAGE = 8  # values are END_TRANSACTION's commitOrRollback
    ROLLBACK_MESSAGE = 12
    UNKNOW = 0  # sic: Apache's name


QueueSelector = Callable[[list[MessageQueue], Message, Any], MessageQueue]
#: ``(addr, msg, mq, body, sys_flag, timeout)``: a send attempt to ``mq`` of the broker at ``addr``, made
#: without a request by a broker of the producer's own process, firing as the request would (a SendResult,
#: or the broker's refusal as MQResponseError); None when that broker does not take it so (the request goes)
StoreInProcess = Callable[[str, Message, MessageQueue, bytes, int, float], "defer.Deferred | None"]


def select_by_hash(queues: list[MessageQueue], msg: Message, arg: Any) -> MessageQueue:
    """Java ``SelectMessageQueueByHash``: the same ``arg`` (e.g. an order id) always picks the same queue."""
    key = arg if isinstance(arg, int) else java_string_hash(str(arg))
    return queues[abs(key) % len(queues)]


class Producer:
    """A producer of one group. ``start()`` before sending; ``shutdown()`` unregisters it."""

    def __init__(
        self,
        group: str,
        namesrv_addr: str | None = None,
        *,
        config: ClientConfig | None = None,
        send_msg_timeout: float = 3.0,
        retry_times_when_send_failed: int = 2,
        retry_times_when_send_async_failed: int = 2,
        compress_over: int = 4096,
        compress_level: int = 5,
        max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
        default_topic_queue_nums: int = 4,
        create_topic_key: str = AUTO_CREATE_TOPIC,
        transaction_checker: Callable[[MessageExt], Any] | None = None,
        instance: ClientInstance | None = None,
        store_in_process: StoreInProcess | None = None,
    ):
        config = settle_config(group, namesrv_addr, config)
        self.group = group
        self.config = config
        self.send_msg_timeout = send_msg_timeout
        self.retry_times_when_send_failed = retry_times_when_send_failed
        self.retry_times_when_send_async_failed = retry_times_when_send_async_failed
        self.compress_over = compress_over
        self.compress_level = compress_level
        self.max_message_size = max_message_size
        self.default_topic_queue_nums = default_topic_queue_nums
        self.create_topic_key = create_topic_key
        #: called with a half message the broker asks about; returns a LocalTransactionState
        self.transaction_checker = transaction_checker
        #: sends to a broker of this process stored by it without a request (a gateway served by a broker)
        self.store_in_process = store_in_process
        self._own_instance = instance is None
        self.instance = instance or ClientInstance(config)
        self.publish_table: dict[str, TopicPublishInfo] = {}
        self.started = False

    # ------------------------------------------------------------------ lifecycle

    @defer.inlineCallbacks
    def start(self):
        if self.started:
            return
        self.instance.register_producer(self.group, self)
        self.instance.start()
        self.started = True
        yield self.instance.send_heartbeat_to_all()

    @defer.inlineCallbacks
    def shutdown(self):
        if not self.started:
            return
        self.started = False
        yield self.instance.unregister(producer_group=self.group)
        if self._own_instance:
            yield self.instance.shutdown()

    # ------------------------------------------------------------------ hooks from the instance

    def published_topics(self) -> list[str]:
        return list(self.publish_table)

    def on_route_changed(self, topic: str, route: TopicRouteData) -> None:
        if topic in self.publish_table:
            self.publish_table[topic] = publish_info(route, topic)

    # ------------------------------------------------------------------ routes

    def find_publish_info(self, topic: str) -> defer.Deferred:
        """The topic's write queues; falls back to the TBW102 template when the name server has no route."""
        info = self.publish_table.get(topic)
        if info is not None and info.ok:  # known: every send but a topic's first asks, so no generator
            return defer.succeed(info)
        return self._fetch_publish_info(topic)

    @defer.inlineCallbacks
    def _fetch_publish_info(self, topic: str):
        self.publish_table.setdefault(topic, TopicPublishInfo())
        route = yield self.instance.update_route(topic)
        if route is not None:
            info = publish_info(route, topic)
            if not info.ok:  # the topic exists but nothing takes writes: Java gives up here too
                raise MQClientError(f"No route info of this topic: {topic} (its route has no writable queue "
                                    f"on a master broker; check the topic's and brokers' permissions)")
            self.publish_table[topic] = info
            return info
        template = yield self.instance.update_route(self.create_topic_key)
        if template is None:
            raise MQClientError(f"No route info of this topic: {topic} (and no {self.create_topic_key} route to "
                                f"auto-create it); create the topic first")
        info = publish_info(template, topic, max_queues=self.default_topic_queue_nums)
        if not info.ok:
            raise MQClientError(f"No route info of this topic: {topic}")
        self.publish_table[topic] = info
        return info

    @defer.inlineCallbacks
    def fetch_publish_queues(self, topic: str):
        info = yield self.find_publish_info(topic)
        return list(info.queues)

    # ------------------------------------------------------------------ message preparation

    def _check(self, msg: Message) -> None:
        if not self.started:
            raise MQClientError(f"producer {self.group} is not started; call start() first")
        problem = validate_topic(msg.topic)
        if problem:
            raise MQClientError(problem)
        if not msg.body:
            raise MQClientError("the message body is empty")
        if len(msg.body) > self.max_message_size:
            raise MQClientError(f"the message body is {len(msg.body)} bytes, over the limit of "
                                f"{self.max_message_size}")

    def _header(self, msg: Message, mq: MessageQueue, body_flag: int, *, batch: bool = False,
                properties: dict[str, str] | None = None) -> SendMessageRequestHeader:
        props = dict(msg.properties if properties is None else properties)
        reconsume = max_reconsume = None
        if msg.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
            reconsume = int(props.pop(MessageConst.RECONSUME_TIME, "0"))
            mr = props.pop(MessageConst.MAX_RECONSUME_TIMES, None)
            max_reconsume = int(mr) if mr is not None else None
        return SendMessageRequestHeader(
            producer_group=self.group,
            topic=msg.topic,
            default_topic=self.create_topic_key,
            default_topic_queue_nums=self.default_topic_queue_nums,
            queue_id=mq.queue_id,
            sys_flag=body_flag,
            born_timestamp=int(time.time() * 1000),
            flag=msg.flag,
            properties=encode_properties(props),
            reconsume_times=reconsume if reconsume is not None else 0,
            unit_mode=False,
            max_reconsume_times=max_reconsume,
            batch=batch,
            broker_name=mq.broker_name,
        )

    def prepare(self, msg: Message) -> tuple[bytes, int]:
        """The checks and encoding of a single message before it is sent: its body as stored and its
        sys flag (compressed past ``compress_over``), its UNIQ_KEY set; raises MQClientError."""
        self._check(msg)
        return self._encode_single(msg)

    def _encode_single(self, msg: Message) -> tuple[bytes, int]:
        msg.properties.setdefault(MessageConst.UNIQ_KEY, _uniq.next())
        body, sys_flag = msg.body, 0
        if len(body) >= self.compress_over:
            body, bits = compress_body(body, self.compress_level)
            sys_flag |= bits
        if msg.properties.get(MessageConst.TRANSACTION_PREPARED) == "true":
            sys_flag |= MessageSysFlag.TRANSACTION_PREPARED_TYPE
        return body, sys_flag

    # ------------------------------------------------------------------ sends

    def _send_to(self, msg: Message, mq: MessageQueue, body: bytes, sys_flag: int, timeout: float,
                 *, oneway: bool = False) -> defer.Deferred:
        def send(addr: str) -> defer.Deferred:
            header = self._header(msg, mq, sys_flag)
            return self.instance.api.send_message(
                addr, mq.broker_name, header, body, oneway=oneway, timeout=timeout, uniq_key=msg.uniq_key
            )

        addr = self.instance.find_broker_addr(mq.broker_name)
        if addr is not None:  # known, as for every send but the first to a broker
            if self.store_in_process is not None and not oneway:
                stored = self.store_in_process(addr, msg, mq, body, sys_flag, timeout)
                if stored is not None:
                    return stored
            return send(addr)
        return self.instance.require_broker_addr(mq.broker_name, msg.topic).addCallback(send)

    def _send_with_retries(self, msg: Message, attempts: int, timeout: float | None, send_one) -> defer.Deferred:
        timeout = timeout or self.send_msg_timeout
        info = self.publish_table.get(msg.topic)
        if info is not None and info.ok:  # known, as for every send but a topic's first
            return self._attempt(msg, info, 0, attempts, timeout, time.monotonic(), None, None, send_one)
        return self._fetch_publish_info(msg.topic).addCallback(
            lambda info: self._attempt(msg, info, 0, attempts, timeout, time.monotonic(), None, None, send_one))

    def _attempt(self, msg: Message, info: TopicPublishInfo, attempt: int, attempts: int, timeout: float,
                 started: float, last_broker: str | None, last_exc: BaseException | None, send_one) -> defer.Deferred:
        """Attempt ``attempt`` of ``attempts``; a failure Java retries makes the next, on another broker.
        Callbacks, not a generator: this runs on every send."""
        remaining = timeout - (time.monotonic() - started)
        if attempt >= attempts or remaining <= 0:
            if last_exc is None:
                return defer.fail(MQClientError(
                    f"sending to {msg.topic} timed out after {timeout} s before an attempt was made"))
            return defer.fail(last_exc)
        mq = info.select_queue(last_broker)
        try:
            sent = send_one(mq, remaining)
        except Exception:  # noqa: BLE001 - classified as a failed attempt
            sent = defer.fail()
        return sent.addErrback(self._failed, msg, info, mq, attempt, attempts, timeout, started, send_one)

    def _failed(self, failure: Failure, msg: Message, info: TopicPublishInfo, mq: MessageQueue, attempt: int,
                attempts: int, timeout: float, started: float, send_one) -> Any:
        """Attempt ``attempt`` to ``mq`` failed: the next attempt, on another broker, if Java retries it."""
        exc = failure.value
        if not isinstance(exc, Exception) or not should_retry(exc):
            return failure
        log.info("send of %s to %s failed (attempt %d of %d): %s", msg.topic, mq, attempt + 1, attempts, exc)
        return self._attempt(msg, info, attempt + 1, attempts, timeout, started, mq.broker_name, exc, send_one)

    def send(self, msg: Message, timeout: float | None = None) -> defer.Deferred:
        """Send and fire with the SendResult once the broker answers (Java's synchronous send)."""
        return self._send_single(msg, 1 + self.retry_times_when_send_failed, timeout)

    def send_async(self, msg: Message, timeout: float | None = None) -> defer.Deferred:
        """Java's asynchronous send: same answer, retried ``retry_times_when_send_async_failed`` times."""
        return self._send_single(msg, 1 + self.retry_times_when_send_async_failed, timeout)

    def _send_single(self, msg: Message, attempts: int, timeout: float | None) -> defer.Deferred:
        try:
            body, sys_flag = self.prepare(msg)
        except Exception:  # noqa: BLE001 - surfaced through the Deferred
            return defer.fail()
        return self._send_with_retries(
            msg, attempts, timeout, lambda mq, remaining: self._send_to(msg, mq, body, sys_flag, remaining)
        )

    @defer.inlineCallbacks
    def send_oneway(self, msg: Message):
        """Write the message and fire (with None) once it is on the wire; the broker does not answer."""
        body, sys_flag = self.prepare(msg)
        info = yield self.find_publish_info(msg.topic)
        yield self._send_to(msg, info.select_queue(), body, sys_flag, self.send_msg_timeout, oneway=True)

    @defer.inlineCallbacks
    def send_to_queue(self, msg: Message, mq: MessageQueue, timeout: float | None = None):
        """Send to one given queue, no retries (Java ``send(msg, mq)``)."""
        body, sys_flag = self.prepare(msg)
        yield self.find_publish_info(msg.topic)
        result = yield self._send_to(msg, mq, body, sys_flag, timeout or self.send_msg_timeout)
        return result

    def send_orderly(self, msg: Message, selector: QueueSelector, arg: Any = None,
                     timeout: float | None = None) -> defer.Deferred:
        """Send to the queue ``selector(queues, msg, arg)`` picks (e.g. :func:`select_by_hash` on an order
        id), so messages with the same ``arg`` keep their order. No retry on another queue. Callbacks, not
        a generator: a gateway sends every message this way."""
        try:
            body, sys_flag = self.prepare(msg)
        except Exception:  # noqa: BLE001 - surfaced through the Deferred
            return defer.fail()

        def to_selected(info: TopicPublishInfo) -> defer.Deferred:
            mq = selector(list(info.queues), msg, arg)
            if mq not in info.queues:
                raise MQClientError(f"the queue selector chose {mq}, which is not a write queue of {msg.topic}")
            return self._send_to(msg, mq, body, sys_flag, timeout or self.send_msg_timeout)

        info = self.publish_table.get(msg.topic)
        if info is None or not info.ok:
            return self._fetch_publish_info(msg.topic).addCallback(to_selected)
        try:
            return to_selected(info)
        except Exception:  # noqa: BLE001 - surfaced through the Deferred
            return defer.fail()

    def send_batch(self, msgs: Sequence[Message], timeout: float | None = None) -> defer.Deferred:
        """SEND_BATCH_MESSAGE: one request, stored as consecutive messages of one queue."""
        try:
            container, body = self._batch(msgs)
        except Exception:  # noqa: BLE001
            return defer.fail()

        def send_one(mq: MessageQueue, remaining: float) -> defer.Deferred:
            @defer.inlineCallbacks
            def go():
                addr = yield self.instance.require_broker_addr(mq.broker_name, container.topic)
                header = self._header(container, mq, 0, batch=True)
                result = yield self.instance.api.send_message(
                    addr, mq.broker_name, header, body, batch=True, timeout=remaining,
                    uniq_key=",".join(m.properties[MessageConst.UNIQ_KEY] for m in msgs),
                )
                return result

            return go()

        return self._send_with_retries(container, 1 + self.retry_times_when_send_failed, timeout, send_one)

    def _batch(self, msgs: Sequence[Message]) -> tuple[Message, bytes]:
        if not msgs:
            raise MQClientError("a batch needs at least one message")
        topic = msgs[0].topic
        wait = msgs[0].properties.get(MessageConst.WAIT_STORE_MSG_OK)
        for m in msgs:
            self._check(m)
            if m.topic != topic:
                raise MQClientError(f"a batch must have one topic; got {topic} and {m.topic}")
            if m.topic.startswith(RETRY_GROUP_TOPIC_PREFIX):
                raise MQClientError("retry topics may not be sent to in a batch")
            if m.properties.get(MessageConst.DELAY_TIME_LEVEL, "0") != "0":
                raise MQClientError("delayed messages may not be sent in a batch")
            if m.properties.get(MessageConst.WAIT_STORE_MSG_OK) != wait:
                raise MQClientError("all messages of a batch must have the same WAIT (wait_store_msg_ok)")
            m.properties.setdefault(MessageConst.UNIQ_KEY, _uniq.next())
        body = encode_batch([(m.flag, m.body, m.properties) for m in msgs])
        if len(body) > self.max_message_size:
            raise MQClientError(f"the batch is {len(body)} bytes, over the limit of {self.max_message_size}")
        container = Message(topic, body, wait_store_msg_ok=wait != "false")
        container.properties[MessageConst.UNIQ_KEY] = _uniq.next()
        return container, body

    # ------------------------------------------------------------------ transactions

    @defer.inlineCallbacks
    def send_message_in_transaction(self, msg: Message, execute: Callable[[Message, Any], Any], arg: Any = None):
        """Send a half message, run ``execute(msg, arg)`` (a LocalTransactionState, or a Deferred of one),
        then END_TRANSACTION with its verdict. Fires with (SendResult, LocalTransactionState)."""
        msg.properties[MessageConst.TRANSACTION_PREPARED] = "true"
        msg.properties[MessageConst.PRODUCER_GROUP] = self.group
        result = yield self.send(msg)
        try:
            state = yield defer.maybeDeferred(execute, msg, arg)
        except Exception:  # noqa: BLE001 - an executor failure leaves the verdict to the check-back
            log.exception("local transaction of %s failed", msg.uniq_key)
            state = LocalTransactionState.UNKNOW
        state = LocalTransactionState(state)
        yield self._end_transaction(result.offset_msg_id, result.queue_offset, msg.uniq_key,
                                    result.transaction_id, msg.topic, result.message_queue.broker_name, state, False)
        return result, state

    def end_transaction(self, topic: str, broker_name: str, msg_id: str, transaction_id: str | None,
                        offset_msg_id: str, queue_offset: int, state: LocalTransactionState) -> defer.Deferred:
        """END_TRANSACTION for a half message sent earlier, when the local transaction ends after
        ``send_message_in_transaction`` has returned (UNKNOW). ``offset_msg_id`` and ``queue_offset`` are those
        of the half message's newest copy: each check-back stores it again, and only that copy is still open."""
        return self._end_transaction(offset_msg_id, queue_offset, msg_id, transaction_id, topic, broker_name,
                                     LocalTransactionState(state), False)

    @defer.inlineCallbacks
    def _end_transaction(self, offset_msg_id, queue_offset, msg_id, transaction_id, topic, broker_name,
                         state: LocalTransactionState, from_check: bool, addr: str | None = None):
        if addr is None:
            addr = yield self.instance.require_broker_addr(broker_name, topic)
        _host, commitlog_offset = parse_offset_msg_id(offset_msg_id)
        header = EndTransactionRequestHeader(
            producer_group=self.group,
            tran_state_table_offset=queue_offset,
            commit_log_offset=commitlog_offset,
            commit_or_rollback=state.value,
            msg_id=msg_id,
            from_transaction_check=from_check,
            transaction_id=transaction_id,
            topic=topic,
            broker_name=broker_name,
        )
        yield self.instance.api.end_transaction(addr, header)

    def check_transaction_state(self, addr: str, header, msg: MessageExt) -> None:
        """The broker asks about a half message: answer with the checker's verdict (END_TRANSACTION)."""
        if self.transaction_checker is None:
            return
        d = defer.maybeDeferred(self.transaction_checker, msg)
        d.addCallback(lambda state: self._end_transaction(
            header.offset_msg_id or msg.offset_msg_id, header.tran_state_table_offset,
            msg.uniq_key or header.msg_id, header.transaction_id, msg.topic, header.broker_name,
            LocalTransactionState(state), True, addr,
        ))
        d.addErrback(lambda f: log.warning("transaction check of %s failed: %s", header.msg_id, f.getErrorMessage()))
