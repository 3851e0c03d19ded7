"""Admin codes behind mqadmin: topics, subscription groups, stats, connections, broker config and runtime info.

Bodies and remarks follow Apache's AdminBrokerProcessor: mqadmin prints the remarks and parses
some KVTable values with ``Long.parseLong`` outside any try block, so every number here is a number.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from ferrymq.wire import topics as names
from ferrymq.wire.bodies import (
    Connection,
    ConsumeStats,
    ConsumerConnection,
    DataVersion,
    GroupList,
    KVTable,
    MessageQueue,
    OffsetWrapper,
    ProducerConnection,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    TopicConfig,
    TopicList,
    TopicOffset,
    TopicStatsTable,
)
from ferrymq.wire.bodies.ha import TimerCheckpoint, TimerMetricsWrapper
from ferrymq.wire.codes import CURRENT_VERSION, CURRENT_VERSION_DESC, LanguageCode, RequestCode, ResponseCode
from ferrymq.wire.properties import PropertiesError, parse_properties
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.fastjson import dumps
from ferrymq.wire.msgid import parse_offset_msg_id
from ferrymq.wire.headers import (
    CloneGroupOffsetRequestHeader,
    ConsumeMessageDirectlyResultRequestHeader,
    CreateTopicRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    DeleteSubscriptionGroupRequestHeader,
    DeleteTopicRequestHeader,
    GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetProducerConnectionListRequestHeader,
    GetSubscriptionGroupConfigRequestHeader,
    GetTopicConfigRequestHeader,
    GetTopicStatsInfoRequestHeader,
    QueryTopicConsumeByWhoRequestHeader,
    QueryTopicsByConsumerRequestHeader,
    ResetOffsetRequestHeader,
)

from ferrymq.remoting.dispatch import handles
from ferrymq.server.config import ConfigError, from_properties, to_properties

from ..context import BrokerContext
from ..group_attributes import AttributeRefused, alter_attributes
from ..stats import disk_space
from .common import ok, refuse

log = logging.getLogger("ferrymq.broker.admin")

#: Keys UPDATE_BROKER_CONFIG never changes (Apache's default configBlackList plus paths, identity and role:
#: a role change needs a restart).
CONFIG_BLACKLIST = frozenset(
    {"configBlackList", "brokerConfigPath", "rocketmqHome", "storePathRootDir", "storePathCommitLog",
     "listenPort", "brokerName", "brokerClusterName", "brokerId", "brokerRole", "haListenPort"}
)


def parse_attributes(text: str | None) -> dict[str, str]:
    """``+key=value,-key`` (mqadmin adds the +/- signs) into the attributes to keep."""
    out: dict[str, str] = {}
    for item in (text or "").split(","):
        item = item.strip()
        if not item or item.startswith("-"):
            continue
        key, _, value = item.lstrip("+").partition("=")
        if key:
            out[key] = value
    return out


def format_runtime(boot_ms: int, now_ms: int) -> str:
    secs = max(0, (now_ms - boot_ms) // 1000)
    days, secs = divmod(secs, 86400)
    hours, secs = divmod(secs, 3600)
    minutes, secs = divmod(secs, 60)
    return f"[ {days} days, {hours} hours, {minutes} minutes, {secs} seconds ]"


class AdminProcessor:
    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx
        self.config_version = DataVersion()

    # ------------------------------------------------------------------ topics

    @handles(RequestCode.UPDATE_AND_CREATE_TOPIC)
    def update_topic(self, cmd: RemotingCommand, channel: Any, h: CreateTopicRequestHeader):
        if (remark := names.validate_topic(h.topic)) is not None:
            raise refuse(ResponseCode.INVALID_PARAMETER, remark)
        if names.is_system_topic(h.topic):
            raise refuse(ResponseCode.INVALID_PARAMETER, f"The topic[{h.topic}] is conflict with system topic.")
        config = TopicConfig(
            topic_name=h.topic, read_queue_nums=h.read_queue_nums, write_queue_nums=h.write_queue_nums,
            perm=h.perm, topic_filter_type=h.topic_filter_type or "SINGLE_TAG", topic_sys_flag=h.topic_sys_flag or 0,
            order=h.order, attributes=parse_attributes(h.attributes),
        )
        if config != self.ctx.topics.get(h.topic):
            self.ctx.topics.update(config)
        return ok(cmd)

    @handles(RequestCode.DELETE_TOPIC_IN_BROKER)
    def delete_topic(self, cmd: RemotingCommand, channel: Any, h: DeleteTopicRequestHeader):
        if not h.topic or not h.topic.strip():
            raise refuse(ResponseCode.INVALID_PARAMETER, "The specified topic is blank.")
        if names.is_system_topic(h.topic):
            raise refuse(ResponseCode.INVALID_PARAMETER, f"The topic[{h.topic}] is conflict with system topic.")
        self.ctx.topics.delete(h.topic)
        self.ctx.offsets.remove_topics([h.topic])
        self.ctx.store.delete_topics({h.topic})
        return ok(cmd)

    @handles(RequestCode.GET_ALL_TOPIC_CONFIG, header=False)
    def all_topic_config(self, cmd: RemotingCommand, channel: Any, _header: None):
        """The whole table, whatever the paging fields say (they are not read, so never refused)."""
        return ok(cmd, body=self.ctx.topics.wrapper().encode())

    @handles(RequestCode.GET_TOPIC_CONFIG)
    def topic_config(self, cmd: RemotingCommand, channel: Any, h: GetTopicConfigRequestHeader):
        config = self.ctx.topics.get(h.topic)
        if config is None:
            raise refuse(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {h.topic}")
        return ok(cmd, body=config.encode())

    @handles(RequestCode.GET_TOPIC_STATS_INFO)
    def topic_stats(self, cmd: RemotingCommand, channel: Any, h: GetTopicStatsInfoRequestHeader):
        config = self.ctx.topics.get(h.topic)
        if config is None:
            raise refuse(ResponseCode.TOPIC_NOT_EXIST, f"topic[{h.topic}] not exist")
        store = self.ctx.store
        table = TopicStatsTable()
        for qid in range(config.write_queue_nums):
            max_offset = store.get_max_offset(h.topic, qid)
            last = store.get_store_time(h.topic, qid, max_offset - 1) if max_offset > 0 else 0
            table.offset_table[self._mq(h.topic, qid)] = TopicOffset(
                min_offset=max(0, store.get_min_offset(h.topic, qid)), max_offset=max(0, max_offset),
                last_update_timestamp=max(0, last),
            )
        return ok(cmd, body=table.encode())

    @handles(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_BROKER)
    def system_topics(self, cmd: RemotingCommand, channel: Any, _header: None):
        topics = [t for t in self.ctx.topics.table if names.is_system_topic(t)]
        return ok(cmd, body=TopicList(topic_list=topics).encode())

    def _mq(self, topic: str, qid: int) -> MessageQueue:
        return MessageQueue(topic=topic, broker_name=self.ctx.config.brokerName, queue_id=qid)

    # ------------------------------------------------------------------ broker

    @handles(RequestCode.GET_BROKER_RUNTIME_INFO)
    def runtime_info(self, cmd: RemotingCommand, channel: Any, _header: None):
        ctx, stats, store = self.ctx, self.ctx.stats, self.ctx.store
        now = ctx.now_ms()
        earliest = store.earliest_message_time()
        disk_ratio = disk_space(ctx.config.storePathRootDir).used_ratio
        table = {
            "brokerVersionDesc": CURRENT_VERSION_DESC,
            "brokerVersion": str(CURRENT_VERSION),
            "brokerActive": "true",
            "msgPutTotalYesterdayMorning": str(stats.put_yesterday_morning),
            "msgPutTotalTodayMorning": str(stats.put_today_morning),
            "msgPutTotalTodayNow": str(stats.put.total),
            "msgGetTotalYesterdayMorning": str(stats.get_yesterday_morning),
            "msgGetTotalTodayMorning": str(stats.get_today_morning),
            "msgGetTotalTodayNow": str(stats.get_transferred.total),
            "putTps": (stats.replicated if ctx.config.is_slave else stats.put).tps_text(),
            "getFoundTps": stats.get_found.tps_text(),
            "getMissTps": stats.get_miss.tps_text(),
            "getTransferredTps": stats.get_transferred.tps_text(),
            # mqadmin 4.9.x clusterList reads the old misspelt key (and fails without it)
            "getTransferedTps": stats.get_transferred.tps_text(),
            "getTotalTps": " ".join(
                f"{stats.get_found.tps(w) + stats.get_miss.tps(w):.2f}" for w in (10, 60, 600)
            ),
            "sendThreadPoolQueueSize": "0",
            "sendThreadPoolQueueCapacity": "10000",
            "pullThreadPoolQueueSize": "0",
            "pullThreadPoolQueueCapacity": "100000",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "pageCacheLockTimeMills": "0",
            "dispatchBehindBytes": "0",
            "earliestMessageTimeStamp": str(earliest if earliest > 0 else now),
            "startAcceptSendRequestTimeStamp": "0",
            "commitLogDiskRatio": f"{disk_ratio:.6f}",
            "consumeQueueDiskRatio": f"{disk_ratio:.6f}",
            "commitLogMinOffset": str(store.commitlog_min_offset()),
            "commitLogMaxOffset": str(store.commitlog_max_offset()),
            "bootTimestamp": str(stats.boot_ms),
            "runtime": format_runtime(stats.boot_ms, now),
            **self._timer_figures(),
        }
        return ok(cmd, body=KVTable(table=table).encode())

    def _timer_figures(self) -> dict[str, str]:
        """Apache's timer keys: ms the wheel lags behind due time, parked timers not yet in the wheel,
        timers pending in the wheel, and the 10 s enqueue/fire rates."""
        timer, stats = self.ctx.timer, self.ctx.stats
        if timer is None:
            return {"timerReadBehind": "0", "timerOffsetBehind": "0", "timerCongestNum": "0",
                    "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0"}
        due, now_ms = timer.next_due_ms(), int(timer.clock() * 1000)
        return {
            "timerReadBehind": str(max(0, now_ms - due) if due is not None else 0),
            "timerOffsetBehind": str(max(0, self.ctx.store.get_max_offset(names.TIMER_TOPIC, 0) - timer.scanned)),
            "timerCongestNum": str(timer.pending),
            "timerEnqueueTps": f"{stats.timer_enqueue.tps(10):.1f}",
            "timerDequeueTps": f"{stats.timer_dequeue.tps(10):.1f}",
        }

    @handles(RequestCode.TRIGGER_DELETE_FILES, RequestCode.DELETE_EXPIRED_COMMITLOG, RequestCode.CLEAN_EXPIRED_CONSUMEQUEUE)
    def delete_expired_files(self, cmd: RemotingCommand, channel: Any, _header: None):
        """mqadmin deleteExpiredCommitLog / cleanExpiredCQ: run the retention pass now, ignoring deleteWhen."""
        self.ctx.store.clean_expired_files()
        return ok(cmd)

    @handles(RequestCode.GET_BROKER_CONFIG)
    def get_broker_config(self, cmd: RemotingCommand, channel: Any, _header: None):
        text = to_properties(self.ctx.config) + "\n"
        return ok(cmd, {"version": dumps(self.config_version.to_json()).decode()}, text.encode())

    @handles(RequestCode.UPDATE_BROKER_CONFIG)
    def update_broker_config(self, cmd: RemotingCommand, channel: Any, _header: None):
        try:
            props = parse_properties(cmd.body.decode("utf-8") if cmd.body else "", "UPDATE_BROKER_CONFIG body")
        except (UnicodeDecodeError, PropertiesError) as exc:
            raise refuse(ResponseCode.SYSTEM_ERROR, f"string2Properties error: {exc}") from None
        refused = sorted(k for k in props if k in CONFIG_BLACKLIST)
        if refused:
            raise refuse(ResponseCode.NO_PERMISSION, f"Can not update config in black list: {', '.join(refused)}")
        known = {f.name for f in dataclasses.fields(self.ctx.config)}
        wanted = {k: v for k, v in props.items() if k in known}
        try:
            updated = from_properties(type(self.ctx.config), wanted)
        except ConfigError as exc:
            raise refuse(ResponseCode.SYSTEM_ERROR, str(exc)) from None
        for key in wanted:
            setattr(self.ctx.config, key, getattr(updated, key))
        if wanted:
            log.info("broker config updated by %s: %s", getattr(channel, "remote_address", "?"), wanted)
            self.config_version = DataVersion(self.config_version.counter + 1, self.config_version.state_version)
            if self.ctx.on_config_change is not None:
                self.ctx.on_config_change()
        return ok(cmd)

    # ------------------------------------------------------------------ subscription groups

    @handles(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP)
    def update_group(self, cmd: RemotingCommand, channel: Any, _header: None):
        config = SubscriptionGroupConfig.decode(cmd.body)
        if (remark := names.validate_group(config.group_name)) is not None:
            raise refuse(ResponseCode.INVALID_PARAMETER, remark)
        old = self.ctx.groups.get(config.group_name)
        try:
            config.attributes = alter_attributes(old is None, old.attributes if old else {}, config.attributes or {})
        except AttributeRefused as exc:
            raise refuse(ResponseCode.SYSTEM_ERROR, exc.remark) from None
        self.ctx.groups.update(config)
        return ok(cmd)

    @handles(RequestCode.DELETE_SUBSCRIPTIONGROUP)
    def delete_group(self, cmd: RemotingCommand, channel: Any, h: DeleteSubscriptionGroupRequestHeader):
        self.ctx.groups.delete(h.group_name)
        if h.clean_offset:
            self.ctx.offsets.remove_group(h.group_name)
        return ok(cmd)

    @handles(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, header=False)
    def all_groups(self, cmd: RemotingCommand, channel: Any, _header: None):
        """The whole table, whatever the paging fields say (they are not read, so never refused)."""
        return ok(cmd, body=self.ctx.groups.wrapper().encode())

    # ------------------------------------------------------------------ what a slave copies (SlaveSynchronize)

    @handles(RequestCode.GET_ALL_CONSUMER_OFFSET, header=False)
    def all_consumer_offsets(self, cmd: RemotingCommand, channel: Any, _header: None):
        """consumerOffset.json's content as Apache's ConsumerOffsetManager encodes it (bare queue-id keys).
        Apache's slave assigns the dataVersion without a null check, so one is always sent."""
        obj = {"offsetTable": {key: dict(queues) for key, queues in self.ctx.offsets.offset_table.items()},
               "dataVersion": DataVersion()}
        return ok(cmd, body=dumps(obj, quote_int_keys=False))

    @handles(RequestCode.GET_ALL_MESSAGE_REQUEST_MODE, header=False)
    def all_message_request_modes(self, cmd: RemotingCommand, channel: Any, _header: None):
        """No group has a message request mode here (no POP consumption): an empty table."""
        return ok(cmd, body=dumps({"messageRequestModeMap": {}}))

    @handles(RequestCode.GET_TIMER_CHECK_POINT, header=False)
    def timer_checkpoint(self, cmd: RemotingCommand, channel: Any, _header: None):
        """How far the timer wheel has got, in Apache's TimerCheckpoint layout (an Apache slave asks every
        3 s): delivered through which ms, and how much of the timer queue is in the wheel. There is no
        timer log here, so its flush position is 0; the version moves whenever the wheel does."""
        timer = self.ctx.timer
        if timer is None:
            raise refuse(ResponseCode.SYSTEM_ERROR, "no timer wheel runs on this broker")
        version = DataVersion(counter=timer.enqueued + timer.delivered, timestamp=self.ctx.stats.boot_ms)
        checkpoint = TimerCheckpoint(last_read_time_ms=timer.delivered_through, last_timer_queue_offset=timer.scanned,
                                     master_timer_queue_offset=timer.scanned, data_version=version)
        return ok(cmd, body=checkpoint.encode())

    @handles(RequestCode.GET_TIMER_METRICS, header=False)
    def timer_metrics(self, cmd: RemotingCommand, channel: Any, _header: None):
        """Apache's per-topic counts of pending timers (an Apache slave copies them once a minute). The wheel
        here counts timers, not timers per topic: the table is empty, its version fixed, so a slave keeps
        its own."""
        if self.ctx.timer is None:
            raise refuse(ResponseCode.SYSTEM_ERROR, "no timer wheel runs on this broker")
        wrapper = TimerMetricsWrapper(data_version=DataVersion(timestamp=self.ctx.stats.boot_ms))
        return ok(cmd, body=wrapper.encode())

    @handles(RequestCode.GET_BROKER_HA_STATUS, header=False)
    def ha_status(self, cmd: RemotingCommand, channel: Any, _header: None):
        """``mqadmin haStatus``: a master's slaves and how far each acknowledged, or a slave's replication
        client."""
        runtime_info = self.ctx.ha_runtime_info
        if runtime_info is None:
            raise refuse(ResponseCode.SYSTEM_ERROR, "no replication service runs on this broker")
        return ok(cmd, body=runtime_info().encode())

    @handles(RequestCode.GET_ALL_DELAY_OFFSET, header=False)
    def all_delay_offsets(self, cmd: RemotingCommand, channel: Any, _header: None):
        """delayOffset.json's content (level -> offset in SCHEDULE_TOPIC_XXXX), as Apache encodes it."""
        obj = {"offsetTable": dict(sorted(self.ctx.scheduler.offsets.items()))}
        return ok(cmd, body=dumps(obj, quote_int_keys=False))

    @handles(RequestCode.GET_SUBSCRIPTIONGROUP_CONFIG)
    def group_config(self, cmd: RemotingCommand, channel: Any, h: GetSubscriptionGroupConfigRequestHeader):
        config = self.ctx.groups.get(h.group)
        if config is None:
            raise refuse(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"No group in this broker. group: {h.group}")
        return ok(cmd, body=config.encode())

    # ------------------------------------------------------------------ consumers and producers

    @handles(RequestCode.GET_CONSUME_STATS)
    def consume_stats(self, cmd: RemotingCommand, channel: Any, h: GetConsumeStatsRequestHeader):
        ctx, store = self.ctx, self.ctx.store
        if h.topic_list:
            topics = [t for t in h.topic_list.split(",") if t]
        elif h.topic:
            topics = [h.topic]
        else:
            topics = sorted(ctx.offsets.topics_of_group(h.consumer_group))
        stats = ConsumeStats()
        group_info = ctx.consumers.get(h.consumer_group)
        for topic in topics:
            config = ctx.topics.get(topic)
            if config is None:
                continue
            if group_info is not None and group_info.subscriptions and topic not in group_info.subscriptions:
                continue
            for qid in range(config.read_queue_nums):
                broker_offset = max(0, store.get_max_offset(topic, qid))
                consumer_offset = max(0, ctx.offsets.query(h.consumer_group, topic, qid,
                                                           with_reset=ctx.config.useServerSideResetOffset))
                pull_offset = max(consumer_offset, ctx.offsets.query_pull_offset(h.consumer_group, topic, qid))
                last = store.get_store_time(topic, qid, consumer_offset - 1) if consumer_offset > 0 else 0
                stats.offset_table[self._mq(topic, qid)] = OffsetWrapper(
                    broker_offset=broker_offset, consumer_offset=consumer_offset, pull_offset=pull_offset,
                    last_timestamp=max(0, last),
                )
        return ok(cmd, body=stats.encode())

    @handles(RequestCode.GET_CONSUMER_CONNECTION_LIST)
    def consumer_connections(self, cmd: RemotingCommand, channel: Any, h: GetConsumerConnectionListRequestHeader):
        info = self.ctx.consumers.get(h.consumer_group)
        if info is None or not info.channels:
            raise refuse(ResponseCode.CONSUMER_NOT_ONLINE, f"the consumer group[{h.consumer_group}] not online")
        body = ConsumerConnection(
            connection_set=[_connection(c) for c in info.channels.values()],
            subscription_table=dict(info.subscriptions),
            consume_type=info.consume_type, message_model=info.message_model,
            consume_from_where=info.consume_from_where,
        )
        return ok(cmd, body=body.encode())

    @handles(RequestCode.GET_PRODUCER_CONNECTION_LIST)
    def producer_connections(self, cmd: RemotingCommand, channel: Any, h: GetProducerConnectionListRequestHeader):
        conns = self.ctx.producers.connections(h.producer_group)
        if not conns:
            raise refuse(ResponseCode.SYSTEM_ERROR, f"the producer group[{h.producer_group}] not exist")
        return ok(cmd, body=ProducerConnection(connection_set=[_connection(c) for c in conns]).encode())

    @handles(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO)
    def consume_by_who(self, cmd: RemotingCommand, channel: Any, h: QueryTopicConsumeByWhoRequestHeader):
        groups = set(self.ctx.consumers.groups_of_topic(h.topic)) | self.ctx.offsets.groups_of_topic(h.topic)
        return ok(cmd, body=GroupList(group_list=sorted(groups)).encode())

    @handles(RequestCode.QUERY_TOPICS_BY_CONSUMER)
    def topics_by_consumer(self, cmd: RemotingCommand, channel: Any, h: QueryTopicsByConsumerRequestHeader):
        topics = sorted(self.ctx.offsets.topics_of_group(h.group))
        return ok(cmd, body=TopicList(topic_list=topics, broker_addr=self.ctx.broker_addr).encode())

    @handles(RequestCode.CLONE_GROUP_OFFSET)
    def clone_group_offset(self, cmd: RemotingCommand, channel: Any, h: CloneGroupOffsetRequestHeader):
        topics = [h.topic] if h.topic else sorted(self.ctx.offsets.topics_of_group(h.src_group))
        for topic in topics:
            if self.ctx.topics.get(topic) is not None:
                self.ctx.offsets.clone(h.src_group, h.dest_group, topic)
        return ok(cmd)

    @handles(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET)
    def reset_offset(self, cmd: RemotingCommand, channel: Any, h: ResetOffsetRequestHeader):
        """INVOKE_BROKER_TO_RESET_OFFSET (mqadmin resetOffsetByTime): kept by the broker for the consumers'
        next pulls (``useServerSideResetOffset``, Apache's default) or pushed to the online consumers."""
        log.info("[reset-offset] reset offset started by %s: topic=%s group=%s timestamp=%s force=%s",
                 getattr(channel, "remote_address", "?"), h.topic, h.group, h.timestamp, h.is_force)
        if self.ctx.config.useServerSideResetOffset:
            return self._reset_on_broker(cmd, h)
        return self._reset_on_clients(cmd, h, cmd.language == LanguageCode.CPP)

    def _reset_target(self, topic: str, qid: int, timestamp: int) -> int:
        """A negative timestamp means "the end of the queue", otherwise the first message stored at/after it."""
        store = self.ctx.store
        if timestamp < 0:
            return store.get_max_offset(topic, qid)
        return store.search_offset_by_time(topic, qid, timestamp, False)

    def _reset_on_broker(self, cmd: RemotingCommand, h: ResetOffsetRequestHeader):
        """Apache's resetOffsetInner: every read queue (or one, to an explicit offset or by time) gets a
        pending reset. No consumer needs to be online and no stored offset is needed; the group must exist."""
        ctx = self.ctx
        if ctx.config.brokerRole == "SLAVE":
            raise refuse(ResponseCode.SYSTEM_ERROR, "Can not reset offset in slave broker")
        config = ctx.topics.get(h.topic)
        if config is None:
            raise refuse(ResponseCode.TOPIC_NOT_EXIST, f"Topic {h.topic} does not exist")
        if ctx.groups.get(h.group) is None:
            raise refuse(ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST, f"Group {h.group} does not exist")
        targets: dict[int, int] = {}
        if h.queue_id >= 0:
            if h.offset is not None and h.offset != -1:
                low = ctx.store.get_min_offset(h.topic, h.queue_id)
                high = ctx.store.get_max_offset(h.topic, h.queue_id)
                if (low >= 0 and h.offset < low) or h.offset > high + 1:
                    raise refuse(ResponseCode.SYSTEM_ERROR,
                                 f"Target offset {h.offset} not in consume queue range [{low}-{high}]")
                targets[h.queue_id] = h.offset
            else:
                targets[h.queue_id] = self._reset_target(h.topic, h.queue_id, h.timestamp)
        else:
            for qid in range(config.read_queue_nums):
                targets[qid] = self._reset_target(h.topic, qid, h.timestamp)
        if not targets:
            raise refuse(ResponseCode.SYSTEM_ERROR, "No queues to reset.")
        reset = ResetOffsetBody()
        for qid, target in targets.items():
            ctx.offsets.assign_reset(h.group, h.topic, qid, target)
            reset.offset_table[self._mq(h.topic, qid)] = target
        log.info("reset offset of group %s topic %s: %s", h.group, h.topic, targets)
        return ok(cmd, body=reset.encode())

    def _reset_on_clients(self, cmd: RemotingCommand, h: ResetOffsetRequestHeader, for_cpp: bool):
        """Apache's Broker2Client.resetOffset: compute per write queue (the reset time, or the current offset
        when that is earlier and not forced), refuse a group with no stored offset on any queue, and send
        RESET_CONSUMER_CLIENT_OFFSET to every online consumer; the consumers commit the new offsets."""
        ctx = self.ctx
        config = ctx.topics.get(h.topic)
        if config is None:
            raise refuse(ResponseCode.TOPIC_NOT_EXIST,
                         f"[reset-offset] reset offset failed, no topic in this broker. topic={h.topic}")
        reset = ResetOffsetBody()
        for qid in range(config.write_queue_nums):
            current = ctx.offsets.query(h.group, h.topic, qid, with_reset=False)
            if current == -1:
                raise refuse(ResponseCode.SYSTEM_ERROR, f"THe consumer group <{h.group}> not exist")
            if h.timestamp == -1:
                target = ctx.store.get_max_offset(h.topic, qid)
            else:
                target = ctx.store.search_offset_by_time(h.topic, qid, h.timestamp, False)
            target = max(target, 0)
            reset.offset_table[self._mq(h.topic, qid)] = target if h.is_force or target < current else current
        info = ctx.consumers.get(h.group)
        if info is None or not info.channels:
            raise refuse(ResponseCode.CONSUMER_NOT_ONLINE,
                         f"Consumer not online, so can not reset offset, Group: {h.group} Topic: {h.topic} "
                         f"Timestamp: {h.timestamp}")
        notice = ResetOffsetRequestHeader(topic=h.topic, group=h.group, timestamp=h.timestamp, is_force=h.is_force)
        if for_cpp:
            from ferrymq.wire.bodies import ResetOffsetBodyForC

            body = ResetOffsetBodyForC.from_reset(reset).encode()
        else:
            body = reset.encode()
        for client in info.channels.values():
            try:
                client.channel.invoke_oneway(request(RequestCode.RESET_CONSUMER_CLIENT_OFFSET, notice.to_ext(), body))
            except Exception as exc:  # noqa: BLE001 - a vanished client must not fail the reset
                log.warning("could not send RESET_CONSUMER_CLIENT_OFFSET to %s: %s", client.client_addr, exc)
        return ok(cmd, body=reset.encode())

    @handles(RequestCode.GET_CONSUMER_RUNNING_INFO)
    def consumer_running_info(self, cmd: RemotingCommand, channel: Any, h: GetConsumerRunningInfoRequestHeader):
        """mqadmin consumerStatus: ask the consumer itself over its own connection, relay its answer."""
        return self._call_consumer(cmd, h.consumer_group, h.client_id, dict(cmd.ext_fields or {}), cmd.body)

    @handles(RequestCode.CONSUME_MESSAGE_DIRECTLY)
    def consume_message_directly(self, cmd: RemotingCommand, channel: Any, h: ConsumeMessageDirectlyResultRequestHeader):
        """mqadmin queryMsgById -g -d / consumeMessage: hand the stored message (its offset message id names
        it) to one consumer's listener, with the broker name and the topic's and group's system flags."""
        ext = dict(cmd.ext_fields or {}, brokerName=self.ctx.config.brokerName)
        topic = self.ctx.topics.get(h.topic) if h.topic else None
        if topic is not None:
            ext["topicSysFlag"] = str(topic.topic_sys_flag)
        group = self.ctx.groups.find(h.consumer_group) if h.consumer_group else None
        if group is not None:
            ext["groupSysFlag"] = str(group.group_sys_flag)
        body = b""
        try:
            _, offset = parse_offset_msg_id(h.msg_id or "")
            body = bytes(self.ctx.store.look_message_by_offset(offset) or b"")
        except ValueError:  # not an offset message id: the consumer gets no message, as from Apache
            pass
        return self._call_consumer(cmd, h.consumer_group, h.client_id, ext, body)

    def _call_consumer(self, cmd: RemotingCommand, group: str, client_id: str | None, ext: dict[str, str],
                       body: bytes):
        """Send ``cmd`` on to the consumer over its own connection and relay its answer (Apache's callConsumer)."""
        info = self.ctx.consumers.get(group)
        client = next((c for c in (info.channels.values() if info else ()) if c.client_id == client_id), None)
        if client is None or not getattr(client.channel, "is_active", False):
            raise refuse(ResponseCode.SYSTEM_ERROR, f"The Consumer <{group}> <{client_id}> not online")
        forward = request(cmd.code, ext, body)

        def relay(resp: RemotingCommand) -> RemotingCommand:
            return cmd.response(resp.code, resp.remark, resp.ext_fields, resp.body)

        def failed(f) -> RemotingCommand:
            return cmd.response(ResponseCode.SYSTEM_ERROR,
                                f"invoke the consumer <{group}> <{client_id}> failed: {f.getErrorMessage()}", {})

        return client.channel.invoke(forward, 5.0).addCallbacks(relay, failed)


def _connection(info) -> Connection:
    language = info.language.name if isinstance(info.language, LanguageCode) else str(info.language)
    return Connection(client_id=info.client_id, client_addr=info.client_addr, language=language, version=info.version)
