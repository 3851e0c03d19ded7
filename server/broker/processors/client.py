"""HEART_BEAT (34), UNREGISTER_CLIENT (35), GET_CONSUMER_LIST_BY_GROUP (38), CHECK_CLIENT_CONFIG (46),
LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): what clients say about themselves and their queues."""

from __future__ import annotations

import logging
from typing import Any

from ferrymq.wire import topics as names
from ferrymq.wire.bodies import (
    CheckClientRequestBody,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    LockBatchRequestBody,
    LockBatchResponseBody,
    SubscriptionData,
    UnlockBatchRequestBody,
)
from ferrymq.wire.codes import Perm, RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.headers import (
    GetConsumerListByGroupRequestHeader,
    HeartbeatRequestHeader,
    LockBatchMqRequestHeader,
    UnlockBatchMqRequestHeader,
    UnregisterClientRequestHeader,
)

from ferrymq.remoting.dispatch import handles
from ferrymq.server.sql92 import FilterSyntaxError, compile_expression

from ..clients import ClientChannelInfo
from ..context import BrokerContext
from ..tag_subscriptions import SUB_ALL, build_subscription, is_tag_type
from .common import after_registration, ok, peer_addr, refuse

log = logging.getLogger("ferrymq.broker.client")

#: Sent on every HEART_BEAT answer: Java 5.x reads this map without a null check; "false" keeps
#: clients on full (V1) heartbeats, which is all FerryMQ needs.
HEARTBEAT_EXT = {"IS_SUPPORT_HEART_BEAT_V2": "false", "IS_SUB_CHANGE": "true"}


def normalized(sub: SubscriptionData) -> SubscriptionData:
    """Fill the tag code set from the expression when a client left it empty (it must match by hash)."""
    if is_tag_type(sub.expression_type) and sub.sub_string not in (None, "", SUB_ALL) and not sub.code_set:
        rebuilt = build_subscription(sub.topic, sub.sub_string, sub.expression_type, sub.sub_version)
        sub.tags_set, sub.code_set = rebuilt.tags_set, rebuilt.code_set
    if not sub.expression_type:
        sub.expression_type = "TAG"
    return sub


def _replaces(old: SubscriptionData | None, new: SubscriptionData) -> bool:
    """Whether ``new`` changes what the group's subscription ``old`` selects (a newer version of another
    expression), as the group table takes it."""
    return (old is not None and new.sub_version > old.sub_version
            and (old.sub_string, old.expression_type) != (new.sub_string, new.expression_type))


class ClientProcessor:
    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx

    def _channel_info(self, cmd: RemotingCommand, channel: Any, client_id: str) -> ClientChannelInfo:
        return ClientChannelInfo(
            channel=channel, client_id=client_id, language=cmd.language, version=cmd.version,
            last_update_ms=0, client_addr=peer_addr(channel),
        )

    @handles(RequestCode.HEART_BEAT)
    def heartbeat(self, cmd: RemotingCommand, channel: Any, _header: HeartbeatRequestHeader):
        ctx = self.ctx
        data = HeartbeatData.decode(cmd.body)
        client_id = data.client_id or peer_addr(channel)
        created = False
        for consumer in data.consumer_data_set:
            group = consumer.group_name
            if not group:
                continue
            group_config = ctx.groups.find(group)
            notify = True
            if group_config is not None:
                notify = group_config.notify_consumer_ids_changed_enable
                # Consumers rebalance %RETRY%<group> too: it must exist (and reach the name server).
                retry = names.retry_topic(group)
                created = created or retry not in ctx.topics
                ctx.topics.create_if_absent(retry, group_config.retry_queue_nums, Perm.READ | Perm.WRITE)
            if ctx.filters is not None:  # compiled even while disabled, ready when enablePropertyFilter is set
                for sub in consumer.subscription_data_set:
                    if sub.topic and not is_tag_type(sub.expression_type):
                        ctx.filters.register(group, sub.topic, sub.sub_string or "", sub.sub_version)
            subscriptions = [normalized(s) for s in consumer.subscription_data_set if s.topic]
            resubscribed = {s.topic for s in subscriptions
                            if _replaces(ctx.consumers.find_subscription(group, s.topic), s)}
            changed = ctx.consumers.register(
                group, self._channel_info(cmd, channel, client_id),
                consumer.consume_type or "CONSUME_PASSIVELY", consumer.message_model or "CLUSTERING",
                consumer.consume_from_where or "CONSUME_FROM_LAST_OFFSET", subscriptions, notify,
            )
            if resubscribed and ctx.holder is not None:
                ctx.holder.wake_channel(channel, resubscribed)
            if changed:
                log.info("consumer group %s changed: %s from %s", group, client_id, peer_addr(channel))
        for producer in data.producer_data_set:
            if producer.group_name:
                ctx.producers.register(producer.group_name, self._channel_info(cmd, channel, client_id))
        return after_registration(ctx, created, ok(cmd, dict(HEARTBEAT_EXT)))

    @handles(RequestCode.UNREGISTER_CLIENT)
    def unregister(self, cmd: RemotingCommand, channel: Any, h: UnregisterClientRequestHeader):
        if h.producer_group:
            self.ctx.producers.unregister(h.producer_group, channel)
        if h.consumer_group:
            config = self.ctx.groups.get(h.consumer_group)
            notify = config.notify_consumer_ids_changed_enable if config is not None else True
            self.ctx.consumers.unregister(h.consumer_group, channel, notify)
        return ok(cmd)

    @handles(RequestCode.GET_CONSUMER_LIST_BY_GROUP)
    def consumer_list(self, cmd: RemotingCommand, channel: Any, h: GetConsumerListByGroupRequestHeader):
        ids = self.ctx.consumers.client_ids(h.consumer_group)
        if not ids:
            log.warning("GET_CONSUMER_LIST_BY_GROUP from %s: no consumer online in group %s", peer_addr(channel),
                        h.consumer_group)
            raise refuse(ResponseCode.SYSTEM_ERROR, f"no consumer for this group, {h.consumer_group}")
        return ok(cmd, body=GetConsumerListByGroupResponseBody(ids).encode())

    @handles(RequestCode.CHECK_CLIENT_CONFIG)
    def check_client_config(self, cmd: RemotingCommand, channel: Any, _header: None):
        body = CheckClientRequestBody.decode(cmd.body)
        sub = body.subscription_data
        if sub is not None and not is_tag_type(sub.expression_type):
            if not self.ctx.config.enablePropertyFilter:
                raise refuse(ResponseCode.SYSTEM_ERROR,
                             f"The broker does not support consumer to filter message by {sub.expression_type}")
            try:
                compile_expression(sub.sub_string or "")
            except FilterSyntaxError as exc:
                log.warning("client %s of group %s: SQL92 expression %r does not compile: %s", body.client_id,
                            body.group, sub.sub_string, exc)
                raise refuse(ResponseCode.SUBSCRIPTION_PARSE_FAILED, str(exc))
        return ok(cmd)

    @handles(RequestCode.LOCK_BATCH_MQ)
    def lock(self, cmd: RemotingCommand, channel: Any, _header: LockBatchMqRequestHeader):
        body = LockBatchRequestBody.decode(cmd.body)
        granted = self.ctx.locks.try_lock_batch(body.consumer_group or "", body.mq_set, body.client_id or "")
        locked = [mq for mq in body.mq_set if mq in granted]
        return ok(cmd, body=LockBatchResponseBody(locked).encode())

    @handles(RequestCode.UNLOCK_BATCH_MQ)
    def unlock(self, cmd: RemotingCommand, channel: Any, _header: UnlockBatchMqRequestHeader):
        body = UnlockBatchRequestBody.decode(cmd.body)
        self.ctx.locks.unlock_batch(body.consumer_group or "", body.mq_set, body.client_id or "")
        return ok(cmd)
