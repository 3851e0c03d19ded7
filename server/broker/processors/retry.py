"""CONSUMER_SEND_MSG_BACK (36): a consumer hands back a message it failed to consume.

The copy goes to ``%RETRY%<group>`` with the delay level ``3 + reconsumeTimes`` (unless the client
chose one), or to ``%DLQ%<group>`` once it was retried ``maxReconsumeTimes`` times. The delay makes it
a SCHEDULE_TOPIC_XXXX message when a scheduler exists (see :func:`ferrymq.server.broker.parking.park`).
"""

from __future__ import annotations

import logging
from typing import Any

from ferrymq.wire import topics as names
from ferrymq.wire.codes import Perm, RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.errors import BodyError
from ferrymq.wire.headers import ConsumerSendMsgBackRequestHeader
from ferrymq.wire.message import MessageConst, MessageExt, decode_record
from ferrymq.wire.msgid import create_offset_msg_id

from ferrymq.remoting.dispatch import handles
from ferrymq.server.store.status import PutMessageStatus

from ..context import BrokerContext, suggest_todo
from .common import ok, refuse, then
from ..parking import park
from .send import DLQ_NUMS_PER_GROUP

log = logging.getLogger("ferrymq.broker.retry")

#: Requests from clients at least this version may override the group's retryMaxTimes (V3_4_9).
MAX_RECONSUME_HEADER_MIN_VERSION = 59


class SendBackProcessor:
    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx

    @handles(RequestCode.CONSUMER_SEND_MSG_BACK)
    def send_back(self, cmd: RemotingCommand, channel: Any, h: ConsumerSendMsgBackRequestHeader):
        ctx = self.ctx
        group_config = ctx.groups.find(h.group)
        if group_config is None:
            raise refuse(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                         f"subscription group not exist, {h.group} {suggest_todo()}")
        if not ctx.broker_writable():
            raise refuse(ResponseCode.NO_PERMISSION,
                         f"the broker[{ctx.config.brokerIP1 or ctx.store_host[0]}] sending message is forbidden")
        if group_config.retry_queue_nums <= 0:
            return ok(cmd)
        topic = names.retry_topic(h.group)
        queue_id = ctx.rng.randrange(group_config.retry_queue_nums)
        topic_config = ctx.topics.create_if_absent(topic, group_config.retry_queue_nums, Perm.READ | Perm.WRITE)
        if not topic_config.perm & Perm.WRITE:
            raise refuse(ResponseCode.NO_PERMISSION, f"the topic[{topic}] sending message is forbidden")
        raw = ctx.store.look_message_by_offset(h.offset)
        if raw is None:
            raise refuse(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        try:
            original, _ = decode_record(raw)
        except BodyError:
            raise refuse(ResponseCode.SYSTEM_ERROR, f"look message by offset failed, {h.offset}")
        props = dict(original.properties)
        props.setdefault(MessageConst.RETRY_TOPIC, original.topic)
        props[MessageConst.WAIT_STORE_MSG_OK] = "false"
        max_reconsume = group_config.retry_max_times
        if cmd.version >= MAX_RECONSUME_HEADER_MIN_VERSION and h.max_reconsume_times is not None:
            max_reconsume = h.max_reconsume_times
        delay = h.delay_level
        if original.reconsume_times >= max_reconsume or delay < 0:
            topic = names.dlq_topic(h.group)
            queue_id = ctx.rng.randrange(DLQ_NUMS_PER_GROUP)
            ctx.topics.create_if_absent(topic, DLQ_NUMS_PER_GROUP, Perm.READ | Perm.WRITE)
            delay = 0
        elif delay == 0:
            delay = 3 + original.reconsume_times
        props[MessageConst.DELAY_TIME_LEVEL] = str(delay)
        if not props.get(MessageConst.ORIGIN_MESSAGE_ID):
            props[MessageConst.ORIGIN_MESSAGE_ID] = create_offset_msg_id(original.store_host, original.commitlog_offset)
        msg = MessageExt(
            topic=topic, body=original.body, flag=original.flag, properties=props, queue_id=queue_id,
            sys_flag=original.sys_flag, born_timestamp=original.born_timestamp, born_host=original.born_host,
            store_host=ctx.store_host, reconsume_times=original.reconsume_times + 1,
        )
        park(ctx, msg)  # the retry waits on its delay level
        log.debug("send back %s of group %s to %s (reconsume %d, delay %d)", h.offset, h.group, msg.topic,
                  msg.reconsume_times, delay)

        def answer(result):
            if result.status is PutMessageStatus.PUT_OK:
                ctx.stats.put.add(1)
                return ok(cmd)
            return cmd.response(ResponseCode.SYSTEM_ERROR, result.status.name, {})

        return then(ctx.store.put_message(msg), answer)
