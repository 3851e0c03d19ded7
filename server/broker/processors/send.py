"""SEND_MESSAGE (10), SEND_MESSAGE_V2 (310), SEND_BATCH_MESSAGE (320); oneway sends are the same requests.

Validation runs in Apache's order with Apache's codes (codes.md §3) because the clients decide
from the code whether to retry on another queue (17/14/1/2/16) or give up (13/29/26).
"""

from __future__ import annotations

import socket

import logging
from typing import Any, Callable

from twisted.python.failure import Failure

from ferrymq.wire import topics as names
from ferrymq.wire.bodies import TopicConfig
from ferrymq.wire.codes import Perm, RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.headers import SendMessageRequestHeader, SendMessageResponseHeader
from ferrymq.wire.message import (
    MAX_PROPERTIES_LEN,
    MessageConst,
    MessageExt,
    MessageSysFlag,
    decode_properties,
    encode_batch,
    encode_properties,
)
from ferrymq.remoting.local_address import local_ip
from ferrymq.remoting.pending import PROMISES, Pending
from ferrymq.wire.errors import Refusal
from ferrymq.wire.msgid import UniqKeyGenerator

from ferrymq.remoting.dispatch import handles
from ferrymq.server.schedule.delay import delay_level
from ferrymq.server.store.status import PutMessageResult, PutMessageStatus

from ..context import PERM_WRITE, BrokerContext, suggest_todo
from ..parking import may_park, park
from .common import after_registration, peer_addr, peer_host, refuse, then

log = logging.getLogger("ferrymq.broker.send")

APPLY_TOPIC_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"
#: %DLQ% topics have one queue (Apache's DLQ_NUMS_PER_GROUP).
DLQ_NUMS_PER_GROUP = 1

_uniq = UniqKeyGenerator(socket.inet_aton(local_ip()))
#: A UTF-8 encoding is at most 3 bytes per UTF-16 unit: a string this short cannot exceed the byte limit.
_MAX_PROPERTIES_CHARS = MAX_PROPERTIES_LEN // 3


def topic_not_exist_remark(topic: str) -> str:
    return f"topic[{topic}] not exist, apply first please!{suggest_todo(APPLY_TOPIC_URL)}"


def put_result_response(ctx: BrokerContext, cmd: RemotingCommand, result: PutMessageResult, queue_id: int,
                        uniq_key: str | None, base_ext: dict[str, str]) -> RemotingCommand:
    """Map a store outcome to Apache's send answer; stored outcomes carry the send response header."""
    code = _counted(ctx, result)
    if code is None:
        code, remark = put_failure(ctx, result)
        return cmd.response(code, remark, dict(base_ext))
    header = SendMessageResponseHeader(
        msg_id=result.msg_id, queue_id=queue_id, queue_offset=result.queue_offset, transaction_id=uniq_key
    )
    ext = header.to_ext()
    ext.update(base_ext)
    return cmd.response(code, None, ext)


_STORED = {
    PutMessageStatus.PUT_OK: ResponseCode.SUCCESS,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: ResponseCode.FLUSH_DISK_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: ResponseCode.FLUSH_SLAVE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: ResponseCode.SLAVE_NOT_AVAILABLE,
}


def _counted(ctx: BrokerContext, result: PutMessageResult) -> int | None:
    """The answer's code for a stored put, counted in the broker's put figures; ``None``: not stored."""
    code = _STORED.get(result.status)
    if code is not None:
        ctx.stats.put.add(max(1, result.msg_num))
    return code


def put_failure(ctx: BrokerContext, result: PutMessageResult) -> tuple[int, str]:
    """The code and remark answering a put the store did not take."""
    code, remark = _failure(ctx, result.status)
    if result.remark and result.status is PutMessageStatus.UNKNOWN_ERROR:
        remark = result.remark
    return code, remark


def _failure(ctx: BrokerContext, status: PutMessageStatus) -> tuple[int, str]:
    if status in (PutMessageStatus.MESSAGE_ILLEGAL, PutMessageStatus.PROPERTIES_SIZE_EXCEEDED):
        return ResponseCode.MESSAGE_ILLEGAL, illegal_remark(ctx)
    if status is PutMessageStatus.CREATE_MAPEDFILE_FAILED:
        return ResponseCode.SYSTEM_ERROR, "create mapped file failed, server is busy or broken."
    if status is PutMessageStatus.SERVICE_NOT_AVAILABLE:
        return ResponseCode.SERVICE_NOT_AVAILABLE, (
            "service not available now. It may be caused by one of the following reasons: the broker's disk is "
            "full, messages are put to the slave, message store has been shut down, etc."
        )
    if status is PutMessageStatus.OS_PAGECACHE_BUSY:
        return ResponseCode.SYSTEM_BUSY, "[PC_SYNCHRONIZED]broker busy, start flow control for a while"
    return ResponseCode.SYSTEM_ERROR, "UNKNOWN_ERROR"


def illegal_remark(ctx: BrokerContext) -> str:
    return (
        "the message is illegal, maybe msg body or properties length not matched. "
        f"msg body length limit {ctx.config.maxMessageSize}B, msg properties length limit 32KB."
    )


#: a record's bytes besides its body and properties, at most (a long topic, IPv6 hosts): a batch put
#: stays within maxMessageSize as a whole
_RECORD_OVERHEAD = 512


def _batchable(first: MessageExt, msg: MessageExt) -> bool:
    """Whether ``msg`` may share a batch put with ``first``: a batch's records share these fields."""
    return (msg.sys_flag == first.sys_flag and msg.born_timestamp == first.born_timestamp
            and msg.born_host == first.born_host and msg.reconsume_times == first.reconsume_times)


def _check_queue(config: TopicConfig, queue_id: int, channel: Any, base: dict[str, str]) -> None:
    if queue_id >= max(config.write_queue_nums, config.read_queue_nums):
        raise refuse(
            ResponseCode.INVALID_PARAMETER,
            f"request queueId[{queue_id}] is illegal, {config} Producer: {peer_addr(channel)}", base,
        )


class SendProcessor:
    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx

    def _base_ext(self) -> dict[str, str]:
        return {
            MessageConst.MSG_REGION: self.ctx.config.regionId,
            MessageConst.TRACE_SWITCH: "true" if self.ctx.config.traceOn else "false",
        }

    # ------------------------------------------------------------------ checks shared by both paths

    def _check(self, topic: str, queue_id: int, default_topic: str, default_topic_queue_nums: int, channel: Any,
               base: dict[str, str]) -> TopicConfig:
        """Apache's msgCheck: the topic's config (created from ``default_topic`` when the producer may),
        else a refusal."""
        ctx = self.ctx
        if not ctx.broker_writable() and (cfg := ctx.topics.get(topic)) is not None and cfg.order:
            raise refuse(ResponseCode.NO_PERMISSION,
                         f"the broker[{ctx.config.brokerIP1 or ctx.store_host[0]}] sending message is forbidden", base)
        if (remark := names.validate_topic(topic)) is not None:
            raise refuse(ResponseCode.INVALID_PARAMETER, remark, base)
        if topic in names.NOT_ALLOWED_SEND_TOPICS:
            raise refuse(ResponseCode.NO_PERMISSION, f"Sending message to topic[{topic}] is forbidden.", base)
        config = ctx.topics.get(topic)
        if config is None:
            log.warning("the topic %s does not exist, producer: %s", topic, peer_addr(channel))
            config = ctx.topics.create_in_send(topic, default_topic, default_topic_queue_nums, 0, peer_addr(channel))
            if config is None and topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX):
                config = ctx.topics.create_if_absent(topic, 1, Perm.READ | Perm.WRITE)
            if config is None:
                raise refuse(ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark(topic), base)
        _check_queue(config, queue_id, channel, base)
        # Apache leaves these to the route (clients stop choosing the queue); an explicit refusal is safer.
        if not ctx.broker_writable():
            raise refuse(ResponseCode.NO_PERMISSION,
                         f"the broker[{ctx.config.brokerIP1 or ctx.store_host[0]}] sending message is forbidden", base)
        if not config.perm & PERM_WRITE:
            raise refuse(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden", base)
        return config

    def _queue_id(self, h: SendMessageRequestHeader, write_queue_nums: int) -> int:
        if h.queue_id < 0:
            return self.ctx.rng.randrange(max(1, write_queue_nums))
        return h.queue_id

    # ------------------------------------------------------------------ single message

    @handles(RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2)
    def send(self, cmd: RemotingCommand, channel: Any, h: SendMessageRequestHeader):
        ctx = self.ctx
        base = self._base_ext()
        topic = h.topic
        created = topic not in ctx.topics
        config = self._check(topic, h.queue_id, h.default_topic, h.default_topic_queue_nums, channel, base)
        created = created and topic in ctx.topics
        queue_id = reply_queue = self._queue_id(h, config.write_queue_nums)  # answered even after a DLQ/delay rewrite
        props = decode_properties(h.properties or "")
        reconsume_times = h.reconsume_times or 0

        if topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX):
            group = topic[len(names.RETRY_GROUP_TOPIC_PREFIX):]
            group_config = ctx.groups.find(group)
            if group_config is None:
                raise refuse(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                             f"subscription group not exist, {group} {suggest_todo()}", base)
            max_reconsume = group_config.retry_max_times
            if h.max_reconsume_times is not None:
                max_reconsume = h.max_reconsume_times
            if reconsume_times > max_reconsume:
                props[MessageConst.DELAY_TIME_LEVEL] = "-1"
                topic = names.dlq_topic(group)
                queue_id = 0
                ctx.topics.create_if_absent(topic, DLQ_NUMS_PER_GROUP, Perm.READ | Perm.WRITE)

        msg = MessageExt(
            topic=topic, body=cmd.body, flag=h.flag, properties=props, queue_id=queue_id, sys_flag=h.sys_flag,
            born_timestamp=h.born_timestamp, born_host=peer_host(channel), store_host=ctx.store_host,
            reconsume_times=reconsume_times,
        )
        result = self._put(msg, config, base)
        uniq_key = props[MessageConst.UNIQ_KEY]
        response = then(result, lambda r: put_result_response(ctx, cmd, r, reply_queue, uniq_key, base))
        return after_registration(ctx, created, response)

    def _put(self, msg: MessageExt, config: TopicConfig, base: dict[str, str]) -> Any:
        """The checks of a message whose topic and queue are final, then the store's put (a half message
        to the transaction store, a delayed one parked): a PutMessageResult or a promise of one."""
        pstr, half = self._prepare(msg, config, base)
        return self._put_prepared(msg, pstr, half, base)

    def _prepare(self, msg: MessageExt, config: TopicConfig, base: dict[str, str]) -> tuple[str, bool]:
        """The checks of a message whose topic and queue are final, its properties completed: their
        encoded string and whether it is a half message; raises the Refusal of a check."""
        ctx = self.ctx
        if len(msg.body) > ctx.config.maxMessageSize:
            raise refuse(ResponseCode.MESSAGE_ILLEGAL, illegal_remark(ctx), base)
        if config.topic_filter_type == "MULTI_TAG":
            msg.sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        props = msg.properties
        if not props.get(MessageConst.UNIQ_KEY):
            props[MessageConst.UNIQ_KEY] = _uniq.next()
        props[MessageConst.CLUSTER] = ctx.config.brokerClusterName

        half = props.get(MessageConst.TRANSACTION_PREPARED, "").lower() == "true" and not (
            msg.reconsume_times > 0 and delay_level(props) > 0
        )
        if half:
            if ctx.config.rejectTransactionMessage or ctx.transactions is None:
                raise refuse(ResponseCode.NO_PERMISSION,
                             f"the broker[{ctx.config.brokerIP1 or ctx.store_host[0]}] sending transaction message is forbidden",
                             base)
        pstr = encode_properties(props)
        if len(pstr) > _MAX_PROPERTIES_CHARS and len(pstr.encode()) > MAX_PROPERTIES_LEN:
            raise refuse(ResponseCode.MESSAGE_ILLEGAL, illegal_remark(ctx), base)
        return pstr, half

    def _put_prepared(self, msg: MessageExt, pstr: str, half: bool, base: dict[str, str]) -> Any:
        ctx = self.ctx
        if half:
            return ctx.transactions.prepare_message(msg)  # parks it in RMQ_SYS_TRANS_HALF_TOPIC
        if may_park(msg.properties):
            park(ctx, msg, base)  # timer or delay level: parked until due
            pstr = None  # parking rewrote the properties
        # The encoded string goes to the store as is: encoded once per message, not twice.
        return ctx.store.put_message(msg, pstr)

    # ------------------------------------------------------------------ a client in this process

    def store(self, msg: MessageExt, queue_of: Callable[[int], int], default_topic: str,
              default_topic_queue_nums: int, channel: Any) -> Any:
        """Store ``msg`` for a client of this process (a gateway) with a send's checks and outcome but no
        request to encode, dispatch and answer: ``queue_of(write_queue_nums)`` picks its queue, as the
        client's queue selector over this broker's write queues (one past the topic's queues is refused as
        in a send naming it). Returns the stored PutMessageResult or
        a promise of it (later still for a topic this send created, as a send's answer); a refusal, or a
        put the store did not take, raises (or fails the promise with) a Refusal with the code and remark
        a send would be answered. Not for retry topics, which a send rewrites to their DLQ."""
        ctx = self.ctx
        base = self._base_ext()
        topic = msg.topic
        created = topic not in ctx.topics
        config = self._check(topic, -1, default_topic, default_topic_queue_nums, channel, base)
        created = created and topic in ctx.topics
        if config.write_queue_nums < 1:
            raise refuse(ResponseCode.NO_PERMISSION, f"the topic[{topic}] has no write queue on this broker", base)
        msg.queue_id = queue_of(config.write_queue_nums)
        _check_queue(config, msg.queue_id, channel, base)
        msg.store_host = ctx.store_host
        return after_registration(ctx, created, then(self._put(msg, config, base), self._stored))

    def store_many(self, msgs: list[MessageExt], queue_of: Callable[[int], int], default_topic: str,
                   default_topic_queue_nums: int, channel: Any) -> list[Any]:
        """:meth:`store` for messages of one topic bound for one queue (a device's PUBLISHes of one read to
        one MQTT topic), the topic checked once and the messages written by batch puts: each one an
        ordinary record of its own, exactly as :meth:`store` writes it (its properties string, msgId,
        tag code, index keys; queue offsets consecutive in the order given), the per-call work of a put
        done once for all. A message a single send would refuse is refused alone; a half or delayed one
        is stored alone. Returns, per message in order, what :meth:`store` returns for it (a
        PutMessageResult or a promise of one) or the Refusal it got; raises the Refusal of the topic's
        checks, which refuse every one."""
        ctx = self.ctx
        base = self._base_ext()
        topic = msgs[0].topic
        created = topic not in ctx.topics
        config = self._check(topic, -1, default_topic, default_topic_queue_nums, channel, base)
        created = created and topic in ctx.topics
        if config.write_queue_nums < 1:
            raise refuse(ResponseCode.NO_PERMISSION, f"the topic[{topic}] has no write queue on this broker", base)
        queue_id = queue_of(config.write_queue_nums)
        _check_queue(config, queue_id, channel, base)
        outcomes: list[Any] = [None] * len(msgs)
        run: list[tuple[int, MessageExt, str]] = []  # what the next batch put writes
        room = ctx.config.maxMessageSize
        for i, msg in enumerate(msgs):
            msg.queue_id = queue_id
            msg.store_host = ctx.store_host
            try:
                pstr, half = self._prepare(msg, config, base)
                if half or may_park(msg.properties):
                    outcomes[i] = self._own(self._put_prepared(msg, pstr, half, base))
                    continue
            except Refusal as refusal:
                outcomes[i] = refusal
                continue
            size = len(msg.body) + len(pstr) * 3 + _RECORD_OVERHEAD
            if run and (size > room or not _batchable(run[0][1], msg)):
                self._put_run(topic, queue_id, run, outcomes)
                run, room = [], ctx.config.maxMessageSize
            run.append((i, msg, pstr))
            room -= size
        if run:
            self._put_run(topic, queue_id, run, outcomes)
        if created and ctx.registration_pending is not None:
            outcomes = [o if isinstance(o, Refusal) else after_registration(ctx, created, o) for o in outcomes]
        return outcomes

    def _put_run(self, topic: str, queue_id: int, run: list[tuple[int, MessageExt, str]], outcomes: list[Any]) -> None:
        """One batch put of ``run`` ((index, message, properties string), all :func:`_batchable` with the
        first), each message's outcome set at its index."""
        first = run[0][1]
        if len(run) == 1:
            outcomes[run[0][0]] = self._own(self.ctx.store.put_message(first, run[0][2]))
            return
        body = encode_batch([(msg.flag, msg.body, pstr) for _i, msg, pstr in run])
        put = self.ctx.store.put_batch(topic, queue_id, body, {}, sys_flag=first.sys_flag,
                                       born_timestamp=first.born_timestamp, born_host=first.born_host,
                                       reconsume_times=first.reconsume_times)
        if not isinstance(put, PROMISES):
            for (i, _msg, _pstr), each in zip(run, self._each(put, len(run))):
                outcomes[i] = each
            return
        promises = [Pending() for _ in run]

        def answered(result: Any) -> None:
            each = [result] * len(promises) if isinstance(result, Failure) else self._each(result, len(promises))
            for promise, outcome in zip(promises, each):
                promise.callback(Failure(outcome) if isinstance(outcome, Refusal) else outcome)

        put.addBoth(answered)
        for (i, _msg, _pstr), promise in zip(run, promises):
            outcomes[i] = promise

    def _own(self, put: Any) -> Any:
        """A message's outcome in :meth:`store_many`: the stored put (or its promise), or the refusal."""
        try:
            return then(put, self._stored)
        except Refusal as refusal:
            return refusal

    def _each(self, result: PutMessageResult, count: int) -> list[PutMessageResult | Refusal]:
        """A batch put's outcome as each of its ``count`` messages' own, as if each had been put alone."""
        try:
            self._stored(result)
        except Refusal as refusal:
            return [refusal] * count
        ids = result.msg_id.split(",")
        starts = [int(msg_id[-16:], 16) for msg_id in ids]  # an offset msgId ends with the commit-log offset
        ends = starts[1:] + [result.commitlog_offset + result.wrote_bytes]
        return [PutMessageResult(result.status, start, end - start, result.queue_offset + k, msg_id,
                                 result.store_timestamp, 1)
                for k, (msg_id, start, end) in enumerate(zip(ids, starts, ends))]

    def _stored(self, result: PutMessageResult) -> PutMessageResult:
        if _counted(self.ctx, result) is None:
            code, remark = put_failure(self.ctx, result)
            raise refuse(code, remark, self._base_ext())
        return result

    # ------------------------------------------------------------------ batch

    def _batch_response(self, cmd: RemotingCommand, result: PutMessageResult, queue_id: int,
                        base: dict[str, str]) -> RemotingCommand:
        if result.status is PutMessageStatus.MESSAGE_ILLEGAL and result.remark:  # the body itself is bad
            return cmd.response(ResponseCode.MESSAGE_ILLEGAL, result.remark, base)
        return put_result_response(self.ctx, cmd, result, queue_id, result.uniq_keys or None, base)

    @handles(RequestCode.SEND_BATCH_MESSAGE)
    def send_batch(self, cmd: RemotingCommand, channel: Any, h: SendMessageRequestHeader):
        ctx = self.ctx
        base = self._base_ext()
        created = h.topic not in ctx.topics
        config = self._check(h.topic, h.queue_id, h.default_topic, h.default_topic_queue_nums, channel, base)
        created = created and h.topic in ctx.topics
        if len(h.topic.encode()) > names.TOPIC_MAX_LENGTH:
            raise refuse(ResponseCode.MESSAGE_ILLEGAL, f"message topic length too long {len(h.topic)}", base)
        if h.topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX):
            raise refuse(ResponseCode.MESSAGE_ILLEGAL, "batch request does not support retry group " + h.topic, base)
        if len(cmd.body) > ctx.config.maxMessageSize:
            raise refuse(ResponseCode.MESSAGE_ILLEGAL, illegal_remark(ctx), base)
        queue_id = self._queue_id(h, config.write_queue_nums)
        # The body goes to the store as sent: each entry is checked and written as a record there, its
        # properties string kept and the container's properties it lacks appended (wire/batch.py).
        container = decode_properties(h.properties or "")
        container.pop(MessageConst.UNIQ_KEY, None)
        container[MessageConst.CLUSTER] = ctx.config.brokerClusterName
        sys_flag = h.sys_flag
        if config.topic_filter_type == "MULTI_TAG":
            sys_flag |= MessageSysFlag.MULTI_TAGS_FLAG
        result = ctx.store.put_batch(h.topic, queue_id, cmd.body, container, sys_flag=sys_flag,
                                     born_timestamp=h.born_timestamp, born_host=peer_host(channel),
                                     reconsume_times=h.reconsume_times or 0)
        response = then(result, lambda r: self._batch_response(cmd, r, queue_id, base))
        return after_registration(ctx, created, response)
