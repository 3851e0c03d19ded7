"""VIEW_MESSAGE_BY_ID (33) and QUERY_MESSAGE (12): what ``mqadmin queryMsgById / queryMsgByKey`` use."""

from __future__ import annotations

from typing import Any

from ferrymq.wire import topics as names
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.headers import QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader

from ferrymq.remoting.dispatch import handles

from ..context import BrokerContext
from .common import ok, refuse

#: Apache's ``defaultQueryMaxNum``: the cap for unique-key lookups.
DEFAULT_QUERY_MAX_NUM = 32


class QueryProcessor:
    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx

    @handles(RequestCode.VIEW_MESSAGE_BY_ID)
    def view_by_id(self, cmd: RemotingCommand, channel: Any, h: ViewMessageRequestHeader):
        raw = self.ctx.store.look_message_by_offset(h.offset)
        if raw is None:
            raise refuse(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}")
        return ok(cmd, body=bytes(raw))

    @handles(RequestCode.QUERY_MESSAGE)
    def query(self, cmd: RemotingCommand, channel: Any, h: QueryMessageRequestHeader):
        max_num = h.max_num
        if cmd.ext(names.UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = DEFAULT_QUERY_MAX_NUM
        result = self.ctx.store.query_message(h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp)
        header = QueryMessageResponseHeader(
            index_last_update_timestamp=result.index_last_update_timestamp,
            index_last_update_phyoffset=result.index_last_update_phyoffset,
        ).to_ext()
        body = result.body()
        if not body:
            raise refuse(ResponseCode.QUERY_NOT_FOUND, "can not find message, maybe time range not correct", header)
        return ok(cmd, header, body)
