"""The consumer methods of the v2 service, on the broker's POP (:class:`ferrymq.server.broker.pop.PopService`).

ReceiveMessage pops from every queue of the topic on this broker (queue id -1, as the proxy asks its
broker), long polling as the proxy computes it; AckMessage, ChangeInvisibleDuration and
ForwardMessageToDeadLetterQueue take back the handle a received message carries (:mod:`.receipts`);
QueryAssignment tells a PushConsumer which queues to receive from. Every call on the broker's state runs
in the reactor thread (:func:`.reactor.in_reactor`). A message received with ``auto_renew`` (the
PushConsumer's receives) is kept invisible for its client until handed back (:mod:`.renewals`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from ferrymq.server.broker.pop import PopError, PopResult
from ferrymq.server.broker.pop.service import INIT_MAX, MAX_POP_NUMS
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request as new_request
from ferrymq.wire.extra_info import real_topic
from ferrymq.wire.headers import ConsumerSendMsgBackRequestHeader
from ferrymq.wire.message import decode_record
from ferrymq.wire.requests import encode_request_header
from ferrymq.wire.topics import SYS_GROUP_PREFIX, validate_group

from . import route
from .calls import check_topic, metadata, peer
from .messages import fill_message, timestamp
from .protocol import Code, pb, service
from .reactor import in_reactor
from .receipts import GrpcReceipt, check_current, parse
from .renewals import Held, Renewal, Renewals
from .settings import ConsumerPolicy, retry_delay_ms
from .status import OK, Refused, from_remoting, status

log = logging.getLogger("ferrymq.grpc")

#: the client version from which a too-short deadline is refused ILLEGAL_POLLING_TIME (BAD_REQUEST before)
ILLEGAL_POLLING_TIME_SINCE = "5.0.3"
#: the header naming the client's SDK version
CLIENT_VERSION = "x-mq-client-version"

_POP_REFUSALS = {
    "topic": Code.TOPIC_NOT_FOUND,
    "group": Code.CONSUMER_GROUP_NOT_FOUND,
    "perm": Code.FORBIDDEN,
    "param": Code.BAD_REQUEST,
    "filter": Code.ILLEGAL_FILTER_EXPRESSION,
}


def check_group(group: pb.Resource) -> None:
    problem = validate_group(group.name)
    if problem:
        raise Refused(Code.ILLEGAL_CONSUMER_GROUP, problem)
    if group.name.startswith(SYS_GROUP_PREFIX):
        raise Refused(Code.ILLEGAL_CONSUMER_GROUP, "cannot use system consumer group")


def check_invisible_time(millis: int, minimum: int, policy: ConsumerPolicy) -> None:
    if millis < minimum:
        raise Refused(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too small. min is {minimum}")
    if 0 < policy.maxInvisibleTimeMills < millis:
        raise Refused(Code.ILLEGAL_INVISIBLE_TIME, f"the invisibleTime is too large. max is {policy.maxInvisibleTimeMills}")


def _millis(duration) -> int:
    return duration.seconds * 1000 + duration.nanos // 1_000_000


def _now_ms() -> int:
    return int(time.time() * 1000)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) if part.isdigit() else 0 for part in text.split("-")[0].split("."))


def polling_time(request: service.ReceiveMessageRequest, settings: pb.Settings, remaining_ms: int | None,
                 client_version: str, policy: ConsumerPolicy) -> int:
    """How long a receive waits for messages: the request's long-polling timeout, else what its deadline
    leaves after half the client's request timeout; within the proxy's bounds and the deadline."""
    if request.HasField("long_polling_timeout"):
        poll = _millis(request.long_polling_timeout)
    elif remaining_ms is not None:
        poll = remaining_ms - _millis(settings.request_timeout) // 2
    else:
        poll = policy.grpcClientConsumerMaxLongPollingTimeoutMillis
    poll = min(max(poll, policy.grpcClientConsumerMinLongPollingTimeoutMillis),
               policy.grpcClientConsumerMaxLongPollingTimeoutMillis)
    if remaining_ms is not None and poll > remaining_ms:
        if remaining_ms < policy.grpcClientConsumerMinLongPollingTimeoutMillis:
            old = not client_version or _version(client_version) < _version(ILLEGAL_POLLING_TIME_SINCE)
            raise Refused(Code.BAD_REQUEST if old else Code.ILLEGAL_POLLING_TIME,
                          "The deadline time remaining is not enough for polling, please check network condition")
        poll = remaining_ms
    return poll


class ConsumerMethods:
    """ReceiveMessage, AckMessage, ChangeInvisibleDuration, ForwardMessageToDeadLetterQueue and
    QueryAssignment of :class:`.service.MessagingService`."""

    consumer: ConsumerPolicy
    renewals: Renewals
    #: the task renewing the held messages, while there are some
    _renewing: asyncio.Task | None = None

    # ------------------------------------------------------------------ receive

    async def ReceiveMessage(self, request, context):
        """A status, then the messages (if any), then the delivery timestamp, as the proxy streams them."""
        try:
            responses = await self._receive(request, context)
        except Refused as refused:
            responses = [service.ReceiveMessageResponse(status=refused.status())]
        except Exception as exc:  # noqa: BLE001 - answered, as the proxy answers its own failures
            log.exception("gRPC ReceiveMessage failed")
            responses = [service.ReceiveMessageResponse(status=status(Code.INTERNAL_SERVER_ERROR, repr(exc)))]
        for response in responses:
            yield response
        yield service.ReceiveMessageResponse(delivery_timestamp=timestamp(_now_ms()))

    async def _receive(self, request, context) -> list:
        client_id = self._client_id(context)
        client = self.clients.get(client_id)
        settings = client.settings if client is not None else None
        if settings is None or not settings.HasField("subscription"):
            # the proxy fails on the missing settings: an internal error
            raise Refused(Code.INTERNAL_SERVER_ERROR, "cannot find client settings for this client")
        remaining = context.time_remaining()
        poll_ms = polling_time(request, settings, None if remaining is None else int(remaining * 1000),
                               metadata(context, CLIENT_VERSION), self.consumer)
        check_topic(request.message_queue.topic)
        check_group(request.group)
        topic, group = request.message_queue.topic.name, request.group.name
        if request.auto_renew:
            invisible_ms = self.consumer.defaultInvisibleTimeMills
        else:
            invisible_ms = _millis(request.invisible_duration)
            check_invisible_time(invisible_ms, self.consumer.minInvisibleTimeMillsForRecv, self.consumer)
        expression = request.filter_expression
        expression_type = "SQL92" if expression.type == pb.SQL else "TAG"
        gone = []
        context.add_done_callback(lambda _context: gone.append(True))
        pop = self.broker.pop

        def receive():
            group_config = self.broker.groups.find(group)
            fifo = group_config is not None and group_config.consume_message_orderly
            return pop.pop(group, topic, -1, min(request.batch_size, MAX_POP_NUMS), invisible_ms,
                           expression=expression.expression or "*", expression_type=expression_type, fifo=fifo,
                           poll_ms=poll_ms, init_mode=INIT_MAX, alive=lambda: not gone)

        try:
            result: PopResult = await in_reactor(receive)
        except PopError as exc:
            raise Refused(_POP_REFUSALS.get(exc.kind, Code.INTERNAL_SERVER_ERROR), str(exc)) from None
        if not result.found:
            return [service.ReceiveMessageResponse(status=status(Code.MESSAGE_NOT_FOUND, "no new message"))]
        responses = [service.ReceiveMessageResponse(status=OK)]
        now = _now_ms()
        for popped in result.messages:
            msg, _ = decode_record(popped.record)
            receipt = GrpcReceipt(popped.handle, msg.commitlog_offset)
            response = service.ReceiveMessageResponse()
            fill_message(response.message, msg, str(receipt), popped.attempts + 1)
            if request.auto_renew:
                self.renewals.hold(client_id, group, response.message.system_properties.message_id,
                                   Held(topic, receipt, now, popped.attempts))
            responses.append(response)
        if request.auto_renew and self._renewing is None:
            self._renewing = asyncio.ensure_future(self._renew_held())
        return responses

    # ------------------------------------------------------------------ auto-renew

    async def _renew_held(self) -> None:
        """Every renewSchedulePeriodMillis while messages are held: hand back those of clients gone, renew
        those due."""
        try:
            while self.renewals:
                await asyncio.sleep(self.renewals.policy.renewSchedulePeriodMillis / 1000)
                for client_id in self.renewals.client_ids():
                    if client_id not in self.clients:
                        await self._renew(self.renewals.clear(client_id))
                await self._renew(self.renewals.due(_now_ms(), self._retry_delay_ms))
        except Exception:  # noqa: BLE001 - the next receive with auto_renew starts it again
            log.exception("gRPC auto-renew failed")
        finally:
            self._renewing = None

    def _retry_delay_ms(self, group: str, reconsume_times: int) -> int:
        return retry_delay_ms(self.broker.groups.table.get(group), reconsume_times)  # a dict lookup

    async def _renew(self, renewals: list[Renewal]) -> None:
        if not renewals:
            return
        pop = self.broker.pop

        def change():
            return [pop.change_invisible(r.group, r.held.topic, r.held.receipt.handle, r.invisible_ms)
                    for r in renewals]

        for renewal, handle in zip(renewals, await in_reactor(change), strict=True):
            if handle is None or renewal.last:
                self.renewals.forget(renewal)
            else:
                self.renewals.renewed(renewal, GrpcReceipt(handle, renewal.held.receipt.commit_log_offset))

    def _held_receipt(self, client_id: str, group: str, message_id: str, handle: str) -> GrpcReceipt:
        """The receipt to act on for a handle the client hands back: the latest one of a held message."""
        held = self.renewals.release(client_id, group, message_id, handle)
        return held.receipt if held is not None else parse(handle)

    # ------------------------------------------------------------------ ack, invisibility, DLQ

    def _consumer_request(self, request, context) -> tuple[str, str, str]:
        client_id = self._client_id(context)
        check_topic(request.topic)
        check_group(request.group)
        return client_id, request.group.name, request.topic.name

    async def AckMessage(self, request, context):
        try:
            client_id, group, topic = self._consumer_request(request, context)
        except Refused as refused:
            return service.AckMessageResponse(status=refused.status())
        now = _now_ms()
        statuses: list[pb.Status | None] = []
        handles = []
        for entry in request.entries:
            try:
                receipt = self._held_receipt(client_id, group, entry.message_id, entry.receipt_handle)
                check_current(receipt, now)
                statuses.append(None)
                handles.append(receipt.handle)
            except Refused as refused:
                statuses.append(refused.status())
        pop, topics = self.broker.pop, self.broker.topics

        def ack() -> bool:
            if topics.get(topic) is None:
                return False
            for handle in handles:
                pop.ack(group, topic, handle)  # a stale handle changes nothing, and is answered OK as Apache's
            return True

        acked = await in_reactor(ack) if handles else True
        failed = status(Code.INTERNAL_SERVER_ERROR, "ack failed: status is abnormal")
        entries = [service.AckMessageResultEntry(message_id=entry.message_id, receipt_handle=entry.receipt_handle,
                                                 status=outcome or (OK if acked else failed))
                   for entry, outcome in zip(request.entries, statuses)]
        codes = {entry.status.code for entry in entries}
        if len(codes) > 1:
            overall = status(Code.MULTIPLE_RESULTS)
        elif codes:
            overall = status(codes.pop())
        else:
            overall = status(Code.INTERNAL_SERVER_ERROR, "ack message result is empty")
        return service.AckMessageResponse(status=overall, entries=entries)

    async def ChangeInvisibleDuration(self, request, context):
        try:
            client_id, group, topic = self._consumer_request(request, context)
            invisible_ms = _millis(request.invisible_duration)
            check_invisible_time(invisible_ms, 0, self.consumer)
            receipt = self._held_receipt(client_id, group, request.message_id, request.receipt_handle)
            check_current(receipt, _now_ms())
        except Refused as refused:
            return service.ChangeInvisibleDurationResponse(status=refused.status())
        pop, topics = self.broker.pop, self.broker.topics

        def change():
            if topics.get(topic) is None:
                return None
            renewed = pop.change_invisible(group, topic, receipt.handle, invisible_ms)
            # a stale handle is renewed all the same, as Apache's broker answers it
            return renewed or receipt.handle.renewed(pop.ctx.now_ms(), invisible_ms)

        renewed = await in_reactor(change)
        if renewed is None:
            return service.ChangeInvisibleDurationResponse(
                status=status(Code.INTERNAL_SERVER_ERROR, "changeInvisibleDuration failed: status is abnormal"))
        return service.ChangeInvisibleDurationResponse(
            status=OK, receipt_handle=str(GrpcReceipt(renewed, receipt.commit_log_offset)))

    async def ForwardMessageToDeadLetterQueue(self, request, context):
        """The message to the group's DLQ through the broker's CONSUMER_SEND_MSG_BACK (no attempts left),
        then acked, as the proxy does."""
        try:
            client_id, group, topic = self._consumer_request(request, context)
            receipt = self._held_receipt(client_id, group, request.message_id, request.receipt_handle)
            if receipt.commit_log_offset < 0:
                raise Refused(Code.INVALID_RECEIPT_HANDLE, "commit log offset is empty")
        except Refused as refused:
            return service.ForwardMessageToDeadLetterQueueResponse(status=refused.status())
        header = ConsumerSendMsgBackRequestHeader(
            offset=receipt.commit_log_offset, group=group, delay_level=-1, origin_msg_id=request.message_id,
            origin_topic=real_topic(topic, group, receipt.handle.mark), max_reconsume_times=0)
        cmd = new_request(RequestCode.CONSUMER_SEND_MSG_BACK,
                          encode_request_header(RequestCode.CONSUMER_SEND_MSG_BACK, header))
        broker = self.broker

        def forward():
            def acked(reply):
                if reply.code == ResponseCode.SUCCESS:
                    broker.pop.ack(group, topic, receipt.handle)
                return reply

            return broker.call(cmd, peer(context)).addCallback(acked)

        reply = await in_reactor(forward)
        return service.ForwardMessageToDeadLetterQueueResponse(
            status=status(from_remoting(reply.code), reply.remark or str(reply.code)))

    # ------------------------------------------------------------------ assignment

    async def QueryAssignment(self, request, context):
        """The queues a PushConsumer receives from (:func:`.route.assignments`), on every broker of the topic
        at the endpoints asked with; FIFO for a group with ``consumeMessageOrderly``."""
        try:
            check_topic(request.topic)
            check_group(request.group)
            config = self._topic(request.topic.name)
        except Refused as refused:
            return service.QueryAssignmentResponse(status=refused.status())
        groups = self.broker.groups
        group_config: Any = await in_reactor(groups.find, request.group.name)
        fifo = group_config is not None and group_config.consume_message_orderly
        brokers = await self._cluster_queues(request.topic.name, config)
        assignments = route.assignments(brokers, request.topic, request.endpoints, fifo)
        if not assignments:
            return service.QueryAssignmentResponse(status=status(Code.FORBIDDEN, "no readable queue"))
        return service.QueryAssignmentResponse(status=OK, assignments=assignments)

