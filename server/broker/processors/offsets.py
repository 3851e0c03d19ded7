"""Consumer offsets and queue offsets: QUERY/UPDATE_CONSUMER_OFFSET (14/15), GET_MAX/MIN_OFFSET (30/31),
GET_EARLIEST_MSG_STORETIME (32), SEARCH_OFFSET_BY_TIMESTAMP (29).

With ``useServerSideResetOffset`` a pending admin reset wins: queries return it and the consumer's
commits of that queue are acknowledged but dropped until its next pull has taken the reset."""

from __future__ import annotations

from typing import Any

from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.headers import (
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    QueryConsumerOffsetRequestHeader,
    SearchOffsetRequestHeader,
    UpdateConsumerOffsetRequestHeader,
)

from ferrymq.remoting.dispatch import handles

from ..context import BrokerContext
from .common import ok, refuse


class OffsetProcessor:
    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx

    @handles(RequestCode.QUERY_CONSUMER_OFFSET)
    def query_consumer_offset(self, cmd: RemotingCommand, channel: Any, h: QueryConsumerOffsetRequestHeader):
        store = self.ctx.store
        offset = self.ctx.offsets.query(h.consumer_group, h.topic, h.queue_id,
                                        with_reset=self.ctx.config.useServerSideResetOffset)
        if offset >= 0:
            return ok(cmd, {"offset": str(offset)})
        if h.set_zero_if_not_found is False:
            raise refuse(ResponseCode.QUERY_NOT_FOUND, "Not found, do not set to zero, maybe this group boot first")
        # A new group on a young queue (first message still hot) starts from 0 instead of the end.
        if store.get_min_offset(h.topic, h.queue_id) <= 0 and store.is_in_memory(h.topic, h.queue_id, 0):
            return ok(cmd, {"offset": "0"})
        raise refuse(ResponseCode.QUERY_NOT_FOUND, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first")

    @handles(RequestCode.UPDATE_CONSUMER_OFFSET)
    def update_consumer_offset(self, cmd: RemotingCommand, channel: Any, h: UpdateConsumerOffsetRequestHeader):
        if self.ctx.groups.get(h.consumer_group) is None:
            raise refuse(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {h.consumer_group} not exist!")
        if self.ctx.topics.get(h.topic) is None:
            raise refuse(ResponseCode.TOPIC_NOT_EXIST, f"Topic {h.topic} not exist!")
        if self.ctx.config.useServerSideResetOffset and self.ctx.offsets.has_reset(h.consumer_group, h.topic,
                                                                                    h.queue_id):
            # The consumer does not know of the reset yet: its offset is stale (Apache answers success).
            return cmd.response(ResponseCode.SUCCESS, "Offset has been previously reset", {})
        self.ctx.offsets.commit(h.consumer_group, h.topic, h.queue_id, h.commit_offset)
        return ok(cmd)

    @handles(RequestCode.GET_MAX_OFFSET)
    def max_offset(self, cmd: RemotingCommand, channel: Any, h: GetMaxOffsetRequestHeader):
        return ok(cmd, {"offset": str(self.ctx.store.get_max_offset(h.topic, h.queue_id))})

    @handles(RequestCode.GET_MIN_OFFSET)
    def min_offset(self, cmd: RemotingCommand, channel: Any, h: GetMinOffsetRequestHeader):
        return ok(cmd, {"offset": str(self.ctx.store.get_min_offset(h.topic, h.queue_id))})

    @handles(RequestCode.GET_EARLIEST_MSG_STORETIME)
    def earliest_time(self, cmd: RemotingCommand, channel: Any, h: GetEarliestMsgStoretimeRequestHeader):
        store = self.ctx.store
        ts = store.get_store_time(h.topic, h.queue_id, store.get_min_offset(h.topic, h.queue_id))
        return ok(cmd, {"timestamp": str(ts)})

    @handles(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP)
    def search_by_time(self, cmd: RemotingCommand, channel: Any, h: SearchOffsetRequestHeader):
        upper = (h.boundary_type or "lower").lower() == "upper"
        return ok(cmd, {"offset": str(self.ctx.store.search_offset_by_time(h.topic, h.queue_id, h.timestamp, upper))})
