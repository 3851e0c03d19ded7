"""PULL_MESSAGE (11) and LITE_PULL_MESSAGE (361), with long polling.

Every answer on 0/19/20/21 carries nextBeginOffset, minOffset, maxOffset and suggestWhichBrokerId:
Java unboxes all four. Push consumers send no subscription (sysFlag bit 2 clear), so the broker
filters with what the group's HEART_BEAT registered; a pull that finds nothing and may suspend is
held (see :mod:`server.broker.longpoll`) instead of answered.
"""

from __future__ import annotations

import functools
import logging
from typing import Any

from ferrymq.wire.codes import PullSysFlag, RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand, parts_response
from ferrymq.wire.headers import PullMessageRequestHeader, PullMessageResponseHeader
from ferrymq.wire.requests import REQUESTS

from ferrymq.remoting.dispatch import handles
from ferrymq.server.store.status import GetMessageResult, GetMessageStatus

from ..context import PERM_READ, BrokerContext, suggest_todo
from ferrymq.server.sql92 import FilterSyntaxError, compile_expression

from ..tag_subscriptions import TagFilter, build_subscription, is_tag_type
from ..sql_subscriptions import RetrySqlFilter, SqlMessageFilter, is_retry_topic
from .common import peer_addr, refuse, then
from .send import topic_not_exist_remark

log = logging.getLogger("ferrymq.broker.pull")

_SUBSCRIPTION, _SUSPEND, _COMMIT_OFFSET = (int(PullSysFlag.SUBSCRIPTION), int(PullSysFlag.SUSPEND),
                                          int(PullSysFlag.COMMIT_OFFSET))
#: Largest maxMsgBytes honoured (Apache caps one pull at 128 MiB as well).
MAX_PULL_BYTES = 128 * 1024 * 1024
SAME_GROUP_DIFFERENT_TOPIC_URL = "https://rocketmq.apache.org/docs/bestPractice/06FAQ"

_CODES = {
    GetMessageStatus.FOUND: ResponseCode.SUCCESS,
    GetMessageStatus.MESSAGE_WAS_REMOVING: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.NO_MATCHED_MESSAGE: ResponseCode.PULL_RETRY_IMMEDIATELY,
    GetMessageStatus.OFFSET_FOUND_NULL: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_ONE: ResponseCode.PULL_NOT_FOUND,
    GetMessageStatus.OFFSET_OVERFLOW_BADLY: ResponseCode.PULL_OFFSET_MOVED,
    GetMessageStatus.OFFSET_TOO_SMALL: ResponseCode.PULL_OFFSET_MOVED,
}


def pull_code(status: GetMessageStatus, requested_offset: int) -> int:
    """Apache's status -> response code mapping (an empty or unknown queue is 19 only at offset 0)."""
    if status in (GetMessageStatus.NO_MATCHED_LOGIC_QUEUE, GetMessageStatus.NO_MESSAGE_IN_QUEUE):
        return ResponseCode.PULL_OFFSET_MOVED if requested_offset != 0 else ResponseCode.PULL_NOT_FOUND
    return _CODES[status]


def slave_read(config: Any, group_config: Any, result: GetMessageResult, code: int) -> tuple[int, int]:
    """Apache's suggestWhichBrokerId: (response code, broker id the consumer should pull from next).

    With slaveReadEnable a consumer far behind (its data no longer in memory) is sent to the group's
    whichBrokerWhenConsumeSlowly, any other to the group's brokerId. A slave sends a consumer that is not
    far behind back to the master (in classic replication Apache's lowest id of a group stays 0), turning
    an answer without messages into PULL_RETRY_IMMEDIATELY; it never corrects an offset out of range
    (offsetCheckInSlave=false) but answers PULL_RETRY_IMMEDIATELY to the group's brokerId.
    """
    suggest = 0
    if config.slaveReadEnable:
        suggest = (group_config.which_broker_when_consume_slowly if result.suggest_pulling_from_slave
                   else group_config.broker_id)
    if config.brokerId and not result.suggest_pulling_from_slave:
        suggest = 0
        if code != ResponseCode.SUCCESS:
            code = ResponseCode.PULL_RETRY_IMMEDIATELY
    if config.brokerId and code == ResponseCode.PULL_OFFSET_MOVED:
        suggest, code = group_config.broker_id, ResponseCode.PULL_RETRY_IMMEDIATELY
    return code, suggest


#: Pulls that carry their SQL92 expression (lite pull consumers) send the same one every time: compile once.
_compiled = functools.lru_cache(maxsize=512)(compile_expression)


class PullProcessor:
    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx

    @handles(RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)
    def pull(self, cmd: RemotingCommand, channel: Any, h: PullMessageRequestHeader):
        return self.process(cmd, channel, h, allow_suspend=True)

    def repull(self, cmd: RemotingCommand, channel: Any):
        """What the hold service runs on wake-up: the same pull, never suspended again."""
        return self.process(cmd, channel, REQUESTS[cmd.code].decode(cmd.ext_fields), allow_suspend=False)

    def process(self, cmd: RemotingCommand, channel: Any, h: PullMessageRequestHeader, allow_suspend: bool):
        ctx = self.ctx
        broker_ip = ctx.config.brokerIP1 or ctx.store_host[0]
        if not ctx.broker_readable():
            raise refuse(ResponseCode.NO_PERMISSION, f"the broker[{broker_ip}] pulling message is forbidden",
                         {"forbiddenType": "1"})
        group_config = ctx.groups.find(h.consumer_group)
        if group_config is None:
            raise refuse(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST,
                         f"subscription group [{h.consumer_group}] does not exist, {suggest_todo()}")
        if not group_config.consume_enable:
            raise refuse(ResponseCode.NO_PERMISSION, f"subscription group no permission, {h.consumer_group}",
                         {"forbiddenType": "2"})
        topic_config = ctx.topics.get(h.topic)
        if topic_config is None:
            raise refuse(ResponseCode.TOPIC_NOT_EXIST, topic_not_exist_remark(h.topic))
        if not topic_config.perm & PERM_READ:
            raise refuse(ResponseCode.NO_PERMISSION, f"the topic[{h.topic}] pulling message is forbidden",
                         {"forbiddenType": "3"})
        if h.queue_id < 0 or h.queue_id >= topic_config.read_queue_nums:
            raise refuse(ResponseCode.INVALID_PARAMETER,
                         f"queueId[{h.queue_id}] is illegal, topic:[{h.topic}] topicConfig.readQueueNums:"
                         f"[{topic_config.read_queue_nums}] consumer:[{peer_addr(channel)}]")

        if h.sys_flag & _SUBSCRIPTION:
            sub = build_subscription(h.topic, h.subscription, h.expression_type, h.sub_version)
        else:
            group_info = ctx.consumers.get(h.consumer_group)
            if group_info is None:
                raise refuse(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                             "the consumer's group info not exist" + suggest_todo(SAME_GROUP_DIFFERENT_TOPIC_URL))
            if not group_config.consume_broadcast_enable and group_info.message_model == "BROADCASTING":
                raise refuse(ResponseCode.NO_PERMISSION,
                             f"the consumer group[{h.consumer_group}] can not consume by broadcast way",
                             {"forbiddenType": "5"})
            sub = group_info.subscriptions.get(h.topic)
            if sub is None:
                raise refuse(ResponseCode.SUBSCRIPTION_NOT_EXIST,
                             "the consumer's subscription not exist" + suggest_todo(SAME_GROUP_DIFFERENT_TOPIC_URL))
            if sub.sub_version < h.sub_version:
                log.warning("subscription of %s to %s is not the latest (%d < %d)", h.consumer_group, h.topic,
                            sub.sub_version, h.sub_version)
                raise refuse(ResponseCode.SUBSCRIPTION_NOT_LATEST, "the consumer's subscription not latest")
        if not is_tag_type(sub.expression_type) and not ctx.config.enablePropertyFilter:
            raise refuse(ResponseCode.SYSTEM_ERROR,
                         f"The broker does not support consumer to filter message by {sub.expression_type}")
        message_filter = self._sql_filter(h, sub)
        if message_filter is None:
            tag_filter = TagFilter(sub)
            message_filter = None if tag_filter.matches_all else tag_filter
        # A pending server-side reset is handed out once, instead of messages (Apache takes it even when
        # the feature is off; the table is then empty).
        reset = ctx.offsets.take_reset(h.consumer_group, h.topic, h.queue_id)
        if reset is not None and ctx.config.useServerSideResetOffset:
            return self._answer_reset(cmd, channel, h, reset, topic_config, group_config, allow_suspend)
        max_bytes = min(h.max_msg_bytes or MAX_PULL_BYTES, MAX_PULL_BYTES)
        result = ctx.store.get_message(
            h.topic, h.queue_id, h.queue_offset, max(1, h.max_msg_nums), max_bytes, message_filter,
        )
        return then(result, lambda r: self._answer(cmd, channel, h, r, topic_config, group_config, message_filter,
                                                   allow_suspend))

    def _sql_filter(self, h: PullMessageRequestHeader, sub):
        """The store filter of a SQL92 subscription (None for tags), or a refusal (Apache's order of checks)."""
        ctx = self.ctx
        if is_tag_type(sub.expression_type):
            if ctx.config.filterSupportRetry and ctx.filters is not None and is_retry_topic(h.topic):
                group = h.consumer_group
                lookup = lambda topic: (d.selector if (d := ctx.filters.get(group, topic)) else None)  # noqa: E731
                return RetrySqlFilter(lookup)
            return None
        if h.sys_flag & _SUBSCRIPTION:
            try:
                selector = _compiled(sub.sub_string or "")
            except FilterSyntaxError as exc:
                log.warning("pull of group %s: SQL92 subscription %r does not compile: %s", h.consumer_group,
                            sub.sub_string, exc)
                raise refuse(ResponseCode.SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed") from None
            return SqlMessageFilter(selector)
        data = ctx.filters.get(h.consumer_group, h.topic) if ctx.filters is not None else None
        if data is None:
            raise refuse(ResponseCode.FILTER_DATA_NOT_EXIST,
                         "The broker's consumer filter data is not exist!Your expression may be wrong!")
        if data.version < h.sub_version:
            raise refuse(ResponseCode.FILTER_DATA_NOT_LATEST, "the consumer's consumer filter data not latest")
        return SqlMessageFilter(data.selector)

    def _answer_reset(self, cmd, channel, h: PullMessageRequestHeader, reset: int, topic_config, group_config,
                      allow_suspend: bool):
        """PULL_OFFSET_MOVED to the reset offset (remark OFFSET_RESET, Apache's status name): the Java and Go
        clients adopt nextBeginOffset as the queue's offset and commit it."""
        ctx = self.ctx
        header = PullMessageResponseHeader(
            suggest_which_broker_id=0,
            next_begin_offset=reset,
            min_offset=ctx.store.get_min_offset(h.topic, h.queue_id),
            max_offset=ctx.store.get_max_offset(h.topic, h.queue_id),
            topic_sys_flag=topic_config.topic_sys_flag,
            group_sys_flag=group_config.group_sys_flag,
        )
        log.info("pull of group %s topic %s queue %d at %d: the queue was reset to %d", h.consumer_group, h.topic,
                 h.queue_id, h.queue_offset, reset)
        self._track_offsets(h, reset, allow_suspend)
        ctx.stats.get_miss.add(1)
        return cmd.response(ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET", header.to_ext())

    def _track_offsets(self, h: PullMessageRequestHeader, next_begin_offset: int, allow_suspend: bool) -> None:
        """Apache's tryCommitOffset: remember how far the group pulled; commit the piggy-backed offset
        only on a first arrival that may suspend."""
        ctx = self.ctx
        ctx.offsets.commit_pull_offset(h.consumer_group, h.topic, h.queue_id, next_begin_offset)
        if allow_suspend and h.sys_flag & _COMMIT_OFFSET:
            ctx.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)

    def _answer(self, cmd, channel, h: PullMessageRequestHeader, result: GetMessageResult, topic_config,
                group_config, message_filter, allow_suspend: bool):
        ctx = self.ctx
        code = pull_code(result.status, h.queue_offset)
        suggest = 0
        if ctx.config.slaveReadEnable or ctx.config.brokerId:
            code, suggest = slave_read(ctx.config, group_config, result, code)
        header = PullMessageResponseHeader(
            suggest_which_broker_id=suggest,
            next_begin_offset=result.next_begin_offset,
            min_offset=result.min_offset,
            max_offset=result.max_offset,
            topic_sys_flag=topic_config.topic_sys_flag,
            group_sys_flag=group_config.group_sys_flag,
        )
        if code == ResponseCode.PULL_OFFSET_MOVED:
            log.info("pull offset moved: group %s topic %s queue %d requested %d, next %d (min %d max %d) from %s",
                     h.consumer_group, h.topic, h.queue_id, h.queue_offset, result.next_begin_offset,
                     result.min_offset, result.max_offset, peer_addr(channel))
        self._track_offsets(h, result.next_begin_offset, allow_suspend)

        if code == ResponseCode.SUCCESS:
            ctx.stats.get_found.add(result.message_count)
            ctx.stats.get_transferred.add(result.message_count)
            return parts_response(cmd, code, result.status.name, header.to_ext(), result.spans)
        ctx.stats.get_miss.add(1)
        if code == ResponseCode.PULL_NOT_FOUND and allow_suspend and h.sys_flag & _SUSPEND \
                and ctx.holder is not None:
            timeout = h.suspend_timeout_millis if ctx.config.longPollingEnable else ctx.config.shortPollingTimeMills
            return ctx.holder.hold(cmd, channel, h.topic, h.queue_id, h.queue_offset, timeout,
                                   message_filter.is_matched_by_consume_queue if message_filter else None)
        return cmd.response(code, result.status.name, header.to_ext())
