"""POP over remoting: POP_MESSAGE (200050), ACK_MESSAGE (200051), BATCH_ACK_MESSAGE (200151),
CHANGE_MESSAGE_INVISIBLETIME (200053),
and the load balancing that turns a push consumer into a popping one: QUERY_ASSIGNMENT (400) and
SET_MESSAGE_REQUEST_MODE (401, ``mqadmin setConsumeMode``).

The handlers translate headers to :class:`~server.broker.pop.PopService` calls and back. A POP answer
carries the records as stored (a retried one re-encoded under its original topic with its POP_CK) and
the offset summaries the Java client builds each message's ExtraInfo from.
"""

from __future__ import annotations

import logging
from typing import Any

from ferrymq.remoting.dispatch import handles
from ferrymq.wire import topics as names
from ferrymq.wire.bodies import (
    BatchAckMessageRequestBody,
    MessageQueue,
    MessageQueueAssignment,
    QueryAssignmentRequestBody,
    QueryAssignmentResponseBody,
    SetMessageRequestModeRequestBody,
)
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.extra_info import ReceiptHandle
from ferrymq.wire.headers import (
    AckMessageRequestHeader,
    ChangeInvisibleTimeRequestHeader,
    ChangeInvisibleTimeResponseHeader,
    PopMessageRequestHeader,
    PopMessageResponseHeader,
)

from ..context import BrokerContext, suggest_todo
from ..pop import PopError, PopResult
from .common import ok, refuse, then

log = logging.getLogger("ferrymq.broker.pop")

_POP_ERRORS = {
    "topic": ResponseCode.TOPIC_NOT_EXIST,
    "group": ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
    "perm": ResponseCode.NO_PERMISSION,
    "param": ResponseCode.INVALID_PARAMETER,
    "filter": ResponseCode.SUBSCRIPTION_PARSE_FAILED,
}


def allocate_averagely(mq_all: list, cid_all: list[str], cid: str) -> list:
    """Apache's AllocateMessageQueueAveragely: consecutive runs, the first ``len % n`` clients one more."""
    if cid not in cid_all or not mq_all:
        return []
    index, n, size = cid_all.index(cid), len(cid_all), len(mq_all)
    mod = size % n
    average = 1 if size <= n else (size // n + 1 if mod > 0 and index < mod else size // n)
    start = index * average if mod > 0 and index < mod else index * average + mod
    return [mq_all[(start + i) % size] for i in range(min(average, size - start))]


def allocate_by_circle(mq_all: list, cid_all: list[str], cid: str) -> list:
    """Apache's AllocateMessageQueueAveragelyByCircle: every n-th queue."""
    if cid not in cid_all:
        return []
    index = cid_all.index(cid)
    return [mq for i, mq in enumerate(mq_all) if i % len(cid_all) == index]


STRATEGIES = {"AVG": allocate_averagely, "AVG_BY_CIRCLE": allocate_by_circle}


class PopProcessor:
    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx

    # ------------------------------------------------------------------ pop, ack, invisibility

    @handles(RequestCode.POP_MESSAGE)
    def pop(self, cmd: RemotingCommand, channel: Any, h: PopMessageRequestHeader):
        ctx = self.ctx
        if not ctx.broker_readable():
            raise refuse(ResponseCode.NO_PERMISSION,
                         f"the broker[{ctx.config.brokerIP1 or ctx.store_host[0]}] pop message is forbidden")
        if h.max_msg_nums > 32:
            raise refuse(ResponseCode.INVALID_PARAMETER,
                         f"the broker[{ctx.config.brokerIP1 or ctx.store_host[0]}] pop message's num is greater than 32")
        try:
            result = ctx.pop.pop(
                h.consumer_group, h.topic, h.queue_id, max(1, h.max_msg_nums), h.invisible_time,
                expression=h.exp or "*", expression_type=h.exp_type or "TAG", fifo=bool(h.order),
                poll_ms=h.poll_time, init_mode=h.init_mode, alive=lambda: getattr(channel, "is_active", True),
            )
        except PopError as exc:
            remark = str(exc)
            if exc.kind in ("topic", "group"):
                remark += ", " + suggest_todo()
            raise refuse(_POP_ERRORS[exc.kind], remark) from None
        return then(result, lambda r: self._answer(cmd, r))

    def _answer(self, cmd: RemotingCommand, result: PopResult) -> RemotingCommand:
        header = PopMessageResponseHeader(
            pop_time=result.pop_time, invisible_time=result.invisible_ms, revive_qid=result.revive_qid,
            rest_num=result.rest_num, start_offset_info=result.start_offset_info,
            msg_offset_info=result.msg_offset_info, order_count_info=result.order_count_info or None,
        )
        if not result.found:
            return cmd.response(ResponseCode.POLLING_TIMEOUT, "NO_MESSAGE_IN_QUEUE", header.to_ext())
        self.ctx.stats.get_found.add(len(result.messages))
        self.ctx.stats.get_transferred.add(len(result.messages))
        return cmd.response(ResponseCode.SUCCESS, "FOUND", header.to_ext(),
                            b"".join(m.record for m in result.messages))

    @staticmethod
    def _handle(extra_info: str) -> ReceiptHandle:
        try:
            return ReceiptHandle.parse(extra_info)
        except ValueError as exc:
            raise refuse(ResponseCode.SYSTEM_ERROR, str(exc)) from None

    @handles(RequestCode.ACK_MESSAGE)
    def ack(self, cmd: RemotingCommand, channel: Any, h: AckMessageRequestHeader):
        """A stale handle is answered SUCCESS too (as Apache, whose acks are appended and reconciled later)."""
        ctx = self.ctx
        if ctx.topics.get(h.topic) is None:
            raise refuse(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!{suggest_todo()}")
        status = ctx.pop.ack(h.consumer_group, h.topic, self._handle(h.extra_info))
        log.debug("ack of %s %s queue %d offset %d: %s", h.consumer_group, h.topic, h.queue_id, h.offset, status.name)
        return ok(cmd)

    @handles(RequestCode.BATCH_ACK_MESSAGE)
    def batch_ack(self, cmd: RemotingCommand, channel: Any, _header: None):
        """The acks of several pops at once (Apache's proxy and MQClientAPIImpl.batchAckMessageAsync)."""
        ctx = self.ctx
        body = BatchAckMessageRequestBody.decode(cmd.body)
        for a in body.acks:
            try:
                offsets = a.offsets()
            except ValueError:
                raise refuse(ResponseCode.SYSTEM_ERROR, f"bad bit set {a.bit_set!r}") from None
            for offset in offsets:
                handle = ReceiptHandle(a.start_offset, a.pop_time, a.invisible_time, a.revive_queue_id,
                                       a.retry or "0", body.broker_name or "", a.queue_id, offset)
                ctx.pop.ack(a.consumer_group or "", a.topic or "", handle)
        return ok(cmd)

    @handles(RequestCode.CHANGE_MESSAGE_INVISIBLETIME)
    def change_invisible(self, cmd: RemotingCommand, channel: Any, h: ChangeInvisibleTimeRequestHeader):
        ctx = self.ctx
        if ctx.topics.get(h.topic) is None:
            raise refuse(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist, apply first please!{suggest_todo()}")
        handle = self._handle(h.extra_info)
        renewed = ctx.pop.change_invisible(h.consumer_group, h.topic, handle, h.invisible_time)
        if renewed is None:
            renewed = handle.renewed(ctx.now_ms(), h.invisible_time)
        return ok(cmd, ChangeInvisibleTimeResponseHeader(
            pop_time=renewed.pop_time, invisible_time=renewed.invisible_ms, revive_qid=renewed.revive_qid).to_ext())

    # ------------------------------------------------------------------ assignment

    @handles(RequestCode.QUERY_ASSIGNMENT)
    def query_assignment(self, cmd: RemotingCommand, channel: Any, _header: None):
        """This broker's queues of the topic, balanced over the group's clients, each with the mode
        setConsumeMode chose (POP: every client may pop every queue unless popShareQueueNum says else)."""
        ctx = self.ctx
        body = QueryAssignmentRequestBody.decode(cmd.body)
        topic, group = body.topic or "", body.consumer_group or ""
        mode = ctx.request_modes.get(topic, group)
        if mode is None:
            default = "PULL" if topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX) else ctx.config.defaultMessageRequestMode
            mode = SetMessageRequestModeRequestBody(topic=topic, consumer_group=group, mode=default,
                                                    pop_share_queue_num=ctx.config.defaultPopShareQueueNum
                                                    if default == "POP" else 0)
        queues = self._assign(topic, group, body.client_id or "", body.message_model or "CLUSTERING",
                              body.strategy_name or "AVG", mode)
        if queues is None:
            return ok(cmd, body=b'{"messageQueueAssignments":null}')
        answer = QueryAssignmentResponseBody([MessageQueueAssignment(mq, mode.mode) for mq in queues])
        return ok(cmd, body=answer.encode())

    def _assign(self, topic: str, group: str, client_id: str, model: str, strategy_name: str,
                mode: SetMessageRequestModeRequestBody) -> list[MessageQueue] | None:
        ctx = self.ctx
        config = ctx.topics.get(topic)
        if config is None:
            return None
        mq_all = [MessageQueue(topic, ctx.config.brokerName, i) for i in range(config.read_queue_nums)]
        if model == "BROADCASTING" or not ctx.config.serverLoadBalancerEnable:
            return mq_all
        cid_all = sorted(ctx.consumers.client_ids(group))
        strategy = STRATEGIES.get(strategy_name)
        if not cid_all or strategy is None:
            log.warning("QUERY_ASSIGNMENT of group %s topic %s: no clients or unknown strategy %r", group, topic,
                        strategy_name)
            return None
        if mode.mode != "POP":
            return strategy(mq_all, cid_all, client_id)
        share = mode.pop_share_queue_num
        if share <= 0 or share >= len(cid_all) - 1:  # every client pops every queue
            return [MessageQueue(topic, ctx.config.brokerName, -1)]
        if len(cid_all) > len(mq_all):
            index = cid_all.index(client_id) if client_id in cid_all else -1
            return [mq_all[index % len(mq_all)]] if index >= 0 else []
        out = list(strategy(mq_all, cid_all, client_id))
        if client_id in cid_all:
            index = cid_all.index(client_id)
            for i in range(1, share + 1):
                out.extend(strategy(mq_all, cid_all, cid_all[(index + i) % len(cid_all)]))
        return out

    @handles(RequestCode.SET_MESSAGE_REQUEST_MODE)
    def set_mode(self, cmd: RemotingCommand, channel: Any, _header: None):
        ctx = self.ctx
        body = SetMessageRequestModeRequestBody.decode(cmd.body)
        topic = body.topic or ""
        if topic.startswith(names.RETRY_GROUP_TOPIC_PREFIX):
            raise refuse(ResponseCode.NO_PERMISSION, "retry topic is not allowed to set mode")
        if ctx.topics.get(topic) is None:
            raise refuse(ResponseCode.TOPIC_NOT_EXIST, f"topic[{topic}] not exist")
        if ctx.groups.find(body.consumer_group or "") is None:
            raise refuse(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, "subscription group does not exist")
        ctx.request_modes.set(body)
        log.info("consume mode of group %s on topic %s set to %s (popShareQueueNum %d)", body.consumer_group, topic,
                 body.mode, body.pop_share_queue_num)
        return ok(cmd)
