"""The broker calls a client makes (Java ``MQClientAPIImpl``): one method per request code, Deferred-based.

Each method builds its request from the typed header in :mod:`wire.headers`, and turns the answer into
plain values or the types of :mod:`sdk_py.message`. Codes a caller must react to (pull 19/20/21, offset
22, send 10/11/12) come back as values; any other unexpected code fails with :class:`MQResponseError`.
"""

from __future__ import annotations

from typing import Any

from twisted.internet import defer

from ferrymq.wire.bodies import (
    CheckClientRequestBody,
    ConsumeMessageDirectlyResult,
    ConsumeStats,
    ConsumerConnection,
    ConsumerRunningInfo,
    GetConsumerListByGroupResponseBody,
    GroupList,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    ResetOffsetBody,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicStatsTable,
    UnlockBatchRequestBody,
)
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.headers import (
    ConsumeMessageDirectlyResultRequestHeader,
    ConsumerSendMsgBackRequestHeader,
    CreateTopicRequestHeader,
    DeleteTopicRequestHeader,
    EndTransactionRequestHeader,
    GetConsumeStatsRequestHeader,
    GetConsumerConnectionListRequestHeader,
    GetConsumerListByGroupRequestHeader,
    GetConsumerRunningInfoRequestHeader,
    GetEarliestMsgStoretimeRequestHeader,
    GetMaxOffsetRequestHeader,
    GetMinOffsetRequestHeader,
    GetTopicStatsInfoRequestHeader,
    PullMessageRequestHeader,
    PullMessageResponseHeader,
    QueryConsumerOffsetRequestHeader,
    QueryMessageRequestHeader,
    QueryMessageResponseHeader,
    QueryTopicConsumeByWhoRequestHeader,
    ResetOffsetRequestHeader,
    SearchOffsetRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
    UpdateConsumerOffsetRequestHeader,
    ViewMessageRequestHeader,
)
from ferrymq.wire.message import MessageConst, MessageExt, decode_records, decompress_body
from ferrymq.wire.properties import parse_properties
from ferrymq.wire.requests import encode_request_header
from ferrymq.wire.topics import UNIQUE_MSG_QUERY_FLAG

from .errors import MQResponseError
from .message import PullResult, PullStatus, SendResult, SendStatus
from ferrymq.remoting import RemotingClient
from ferrymq.remoting.local import LocalPeer

_SEND_STATUS = {
    ResponseCode.SUCCESS: SendStatus.SEND_OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: SendStatus.FLUSH_DISK_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: SendStatus.FLUSH_SLAVE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: SendStatus.SLAVE_NOT_AVAILABLE,
}

_PULL_STATUS = {
    ResponseCode.SUCCESS: PullStatus.FOUND,
    ResponseCode.PULL_NOT_FOUND: PullStatus.NO_NEW_MSG,
    ResponseCode.PULL_RETRY_IMMEDIATELY: PullStatus.NO_MATCHED_MSG,
    ResponseCode.PULL_OFFSET_MOVED: PullStatus.OFFSET_ILLEGAL,
}

#: what QUERY_CONSUMER_OFFSET answers when the group has no offset for the queue
OFFSET_NOT_FOUND = -1


def _send_result(resp: RemotingCommand, topic: str, broker_name: str, uniq_key: str | None) -> SendResult:
    """A send's answer (one of :data:`_SEND_STATUS`'s codes) as a SendResult."""
    h = SendMessageResponseHeader.from_ext(resp.ext_fields or {})
    return SendResult(
        status=_SEND_STATUS[resp.code],
        msg_id=uniq_key,
        offset_msg_id=h.msg_id,
        message_queue=MessageQueue(topic, broker_name, h.queue_id),
        queue_offset=h.queue_offset,
        transaction_id=h.transaction_id,
        region_id=h.msg_region,
        trace_on=h.trace_on is not False,
    )


def _local_send_result(resp: RemotingCommand, operation: str, addr: str, topic: str, broker_name: str,
                       uniq_key: str | None) -> SendResult:
    """:func:`_send_result` of a broker of this process, its refusals checked in the same callback (a
    remote broker's are checked by :meth:`BrokerAPI.call`)."""
    if resp.code not in _SEND_STATUS:
        raise MQResponseError(operation, addr, resp.code, resp.remark)
    return _send_result(resp, topic, broker_name, uniq_key)


class BrokerAPI:
    """Requests to brokers by address, over one shared :class:`RemotingClient`."""

    def __init__(self, client: RemotingClient, timeout: float = 3.0):
        self.client = client
        self.timeout = timeout
        #: brokers of this process by address: sends to them run through their request table, no socket
        self.local_brokers: dict[str, LocalPeer] = {}

    # ------------------------------------------------------------------ plumbing

    def call(
        self, addr: str, cmd: RemotingCommand, *accept: int, timeout: float | None = None
    ) -> defer.Deferred:
        return self._checked(addr, cmd, accept, self.client.invoke(addr, cmd, timeout or self.timeout))

    @staticmethod
    def _checked(addr: str, cmd: RemotingCommand, accept: tuple[int, ...], answer: defer.Deferred) -> defer.Deferred:
        accept = accept or (ResponseCode.SUCCESS,)
        operation = RequestCode(cmd.code).name

        def check(resp: RemotingCommand) -> RemotingCommand:
            if resp.code not in accept:
                raise MQResponseError(operation, addr, resp.code, resp.remark)
            return resp

        return answer.addCallback(check)

    @staticmethod
    def _req(code: int, header: Any = None, body: bytes = b"") -> RemotingCommand:
        return request(code, encode_request_header(code, header) if header is not None else None, body)

    # ------------------------------------------------------------------ send

    def send_message(
        self,
        addr: str,
        broker_name: str,
        header: SendMessageRequestHeader,
        body: bytes,
        *,
        batch: bool = False,
        oneway: bool = False,
        timeout: float | None = None,
        uniq_key: str | None = None,
    ) -> defer.Deferred:
        """SEND_MESSAGE_V2 (or SEND_BATCH_MESSAGE) with the one-letter header, as the Java client sends.

        Fires with a SendResult (status from codes 0/10/11/12), or None for oneway. A broker of
        :attr:`local_brokers` answers through its own request table.
        """
        code = RequestCode.SEND_BATCH_MESSAGE if batch else RequestCode.SEND_MESSAGE_V2
        cmd = self._req(code, header, body)
        if oneway:
            return self.client.invoke_oneway(addr, cmd).addCallback(lambda _: None)
        local = self.local_brokers.get(addr)
        if local is not None:
            return local.invoke(cmd, timeout or self.timeout).addCallback(
                _local_send_result, code.name, addr, header.topic, broker_name, uniq_key)
        answer = self.call(addr, cmd, *_SEND_STATUS, timeout=timeout)
        return answer.addCallback(_send_result, header.topic, broker_name, uniq_key)

    def end_transaction(self, addr: str, header: EndTransactionRequestHeader, remark: str | None = None):
        cmd = self._req(RequestCode.END_TRANSACTION, header)
        cmd.remark = remark
        return self.client.invoke_oneway(addr, cmd)

    # ------------------------------------------------------------------ pull

    def pull_message(
        self, addr: str, header: PullMessageRequestHeader, timeout: float
    ) -> defer.Deferred:
        """Fires with a PullResult whose messages are decoded and their bodies inflated (not yet
        tag-filtered: that is the consumer's business)."""

        def result(resp: RemotingCommand) -> PullResult:
            h = PullMessageResponseHeader.from_ext(resp.ext_fields or {})
            msgs = decode_records(resp.body) if resp.code == ResponseCode.SUCCESS and resp.body else []
            for m in msgs:
                m.body = decompress_body(m.body, m.sys_flag)
                m.properties[MessageConst.MIN_OFFSET] = str(h.min_offset)
                m.properties[MessageConst.MAX_OFFSET] = str(h.max_offset)
            return PullResult(
                _PULL_STATUS[resp.code], h.next_begin_offset, h.min_offset, h.max_offset, msgs,
                h.suggest_which_broker_id,
            )

        cmd = self._req(RequestCode.PULL_MESSAGE, header)
        return self.call(addr, cmd, *_PULL_STATUS, timeout=timeout).addCallback(result)

    # ------------------------------------------------------------------ offsets

    def query_consumer_offset(self, addr: str, group: str, mq: MessageQueue) -> defer.Deferred:
        """Fires with the group's committed offset, or OFFSET_NOT_FOUND (-1) on QUERY_NOT_FOUND."""
        header = QueryConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, broker_name=mq.broker_name)
        d = self.call(addr, self._req(RequestCode.QUERY_CONSUMER_OFFSET, header),
                      ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND)
        return d.addCallback(
            lambda r: int(r.ext("offset")) if r.code == ResponseCode.SUCCESS else OFFSET_NOT_FOUND
        )

    def update_consumer_offset(
        self, addr: str, group: str, mq: MessageQueue, offset: int, *, oneway: bool = True
    ) -> defer.Deferred:
        header = UpdateConsumerOffsetRequestHeader(group, mq.topic, mq.queue_id, offset, broker_name=mq.broker_name)
        cmd = self._req(RequestCode.UPDATE_CONSUMER_OFFSET, header)
        if oneway:
            return self.client.invoke_oneway(addr, cmd)
        return self.call(addr, cmd).addCallback(lambda _: None)

    def get_max_offset(self, addr: str, mq: MessageQueue) -> defer.Deferred:
        header = GetMaxOffsetRequestHeader(mq.topic, mq.queue_id, broker_name=mq.broker_name)
        return self.call(addr, self._req(RequestCode.GET_MAX_OFFSET, header)).addCallback(
            lambda r: int(r.ext("offset"))
        )

    def get_min_offset(self, addr: str, mq: MessageQueue) -> defer.Deferred:
        header = GetMinOffsetRequestHeader(mq.topic, mq.queue_id, broker_name=mq.broker_name)
        return self.call(addr, self._req(RequestCode.GET_MIN_OFFSET, header)).addCallback(
            lambda r: int(r.ext("offset"))
        )

    def get_earliest_msg_store_time(self, addr: str, mq: MessageQueue) -> defer.Deferred:
        header = GetEarliestMsgStoretimeRequestHeader(mq.topic, mq.queue_id, broker_name=mq.broker_name)
        return self.call(addr, self._req(RequestCode.GET_EARLIEST_MSG_STORETIME, header)).addCallback(
            lambda r: int(r.ext("timestamp"))
        )

    def search_offset(self, addr: str, mq: MessageQueue, timestamp_ms: int, boundary: str | None = None):
        """The offset of the first message stored at or after ``timestamp_ms`` (``boundary`` lower/upper)."""
        header = SearchOffsetRequestHeader(mq.topic, mq.queue_id, timestamp_ms, boundary, broker_name=mq.broker_name)
        return self.call(addr, self._req(RequestCode.SEARCH_OFFSET_BY_TIMESTAMP, header)).addCallback(
            lambda r: int(r.ext("offset"))
        )

    # ------------------------------------------------------------------ clients

    def send_heartbeat(self, addr: str, data: HeartbeatData) -> defer.Deferred:
        """Fires with the broker's response command (its ``version`` is the broker's version)."""
        return self.call(addr, self._req(RequestCode.HEART_BEAT, None, data.encode()))

    def unregister_client(
        self, addr: str, client_id: str, producer_group: str | None = None, consumer_group: str | None = None
    ) -> defer.Deferred:
        header = UnregisterClientRequestHeader(client_id, producer_group, consumer_group)
        return self.call(addr, self._req(RequestCode.UNREGISTER_CLIENT, header)).addCallback(lambda _: None)

    def get_consumer_ids(self, addr: str, group: str) -> defer.Deferred:
        """Client ids of the group's live consumers as that broker knows them."""
        cmd = self._req(RequestCode.GET_CONSUMER_LIST_BY_GROUP, GetConsumerListByGroupRequestHeader(group))
        return self.call(addr, cmd).addCallback(
            lambda r: GetConsumerListByGroupResponseBody.decode(r.body).consumer_id_list if r.body else []
        )

    def consumer_send_msg_back(
        self,
        addr: str,
        group: str,
        commitlog_offset: int,
        delay_level: int,
        origin_msg_id: str | None,
        origin_topic: str | None,
        max_reconsume_times: int,
        broker_name: str | None = None,
    ) -> defer.Deferred:
        header = ConsumerSendMsgBackRequestHeader(
            offset=commitlog_offset,
            group=group,
            delay_level=delay_level,
            origin_msg_id=origin_msg_id,
            origin_topic=origin_topic,
            unit_mode=False,
            max_reconsume_times=max_reconsume_times,
            broker_name=broker_name,
        )
        return self.call(addr, self._req(RequestCode.CONSUMER_SEND_MSG_BACK, header)).addCallback(lambda _: None)

    def check_client_config(self, addr: str, client_id: str, group: str, sub) -> defer.Deferred:
        """CHECK_CLIENT_CONFIG: does the broker accept this (SQL92) subscription? Fails with the broker's
        code and remark (1: property filtering disabled, 23: the expression does not parse)."""
        body = CheckClientRequestBody(client_id, group, sub).encode()
        return self.call(addr, self._req(RequestCode.CHECK_CLIENT_CONFIG, None, body)).addCallback(lambda _: None)

    def lock_batch_mq(self, addr: str, group: str, client_id: str, mqs: list[MessageQueue]) -> defer.Deferred:
        """Fires with the set of queues the broker now holds locked for this client."""
        body = LockBatchRequestBody(group, client_id, False, list(mqs)).encode()
        d = self.call(addr, self._req(RequestCode.LOCK_BATCH_MQ, None, body))
        return d.addCallback(lambda r: set(LockBatchResponseBody.decode(r.body).lock_ok_mq_set) if r.body else set())

    def unlock_batch_mq(
        self, addr: str, group: str, client_id: str, mqs: list[MessageQueue], *, oneway: bool = False
    ) -> defer.Deferred:
        body = UnlockBatchRequestBody(group, client_id, False, list(mqs)).encode()
        cmd = self._req(RequestCode.UNLOCK_BATCH_MQ, None, body)
        if oneway:
            return self.client.invoke_oneway(addr, cmd)
        return self.call(addr, cmd).addCallback(lambda _: None)

    # ------------------------------------------------------------------ admin

    def create_topic(
        self,
        addr: str,
        topic: str,
        read_queue_nums: int = 8,
        write_queue_nums: int = 8,
        perm: int = 6,
        *,
        order: bool = False,
        default_topic: str = "TBW102",
        topic_sys_flag: int = 0,
        attributes: str | None = None,
    ) -> defer.Deferred:
        """UPDATE_AND_CREATE_TOPIC on one broker (it registers the topic with its name servers).

        ``attributes`` is mqadmin's comma-joined form: ``+key=value`` sets, ``-key`` removes."""
        header = CreateTopicRequestHeader(
            topic=topic,
            default_topic=default_topic,
            read_queue_nums=read_queue_nums,
            write_queue_nums=write_queue_nums,
            perm=perm,
            topic_filter_type="SINGLE_TAG",
            order=order,
            topic_sys_flag=topic_sys_flag,
            attributes=attributes,
        )
        return self.call(addr, self._req(RequestCode.UPDATE_AND_CREATE_TOPIC, header)).addCallback(lambda _: None)

    def delete_topic(self, addr: str, topic: str) -> defer.Deferred:
        """DELETE_TOPIC_IN_BROKER: the broker drops the topic's config and queues."""
        cmd = self._req(RequestCode.DELETE_TOPIC_IN_BROKER, DeleteTopicRequestHeader(topic))
        return self.call(addr, cmd).addCallback(lambda _: None)

    def get_topic_stats(self, addr: str, topic: str) -> defer.Deferred:
        """GET_TOPIC_STATS_INFO: min/max offset and last store time of each of the topic's queues there."""
        cmd = self._req(RequestCode.GET_TOPIC_STATS_INFO, GetTopicStatsInfoRequestHeader(topic))
        return self.call(addr, cmd).addCallback(lambda r: TopicStatsTable.decode(r.body))

    def query_topic_consume_by_who(self, addr: str, topic: str) -> defer.Deferred:
        """QUERY_TOPIC_CONSUME_BY_WHO: the consumer groups of ``topic`` that broker knows."""
        cmd = self._req(RequestCode.QUERY_TOPIC_CONSUME_BY_WHO, QueryTopicConsumeByWhoRequestHeader(topic))
        return self.call(addr, cmd).addCallback(lambda r: GroupList.decode(r.body).group_list if r.body else [])

    def get_runtime_info(self, addr: str) -> defer.Deferred:
        """GET_BROKER_RUNTIME_INFO: the broker's runtime statistics as a dict of strings."""
        cmd = self._req(RequestCode.GET_BROKER_RUNTIME_INFO)
        return self.call(addr, cmd).addCallback(lambda r: KVTable.decode(r.body).table)

    def get_broker_config(self, addr: str) -> defer.Deferred:
        """GET_BROKER_CONFIG: the broker's configuration, in the order the broker wrote it."""
        cmd = self._req(RequestCode.GET_BROKER_CONFIG)
        return self.call(addr, cmd).addCallback(lambda r: parse_properties(r.body.decode()) if r.body else {})

    def update_broker_config(self, addr: str, settings: dict[str, str]) -> defer.Deferred:
        """UPDATE_BROKER_CONFIG: the broker applies and persists ``settings`` (key=value lines)."""
        body = "".join(f"{key}={value}\n" for key, value in settings.items()).encode()
        cmd = self._req(RequestCode.UPDATE_BROKER_CONFIG, None, body)
        return self.call(addr, cmd).addCallback(lambda _: None)

    def create_subscription_group(self, addr: str, config: SubscriptionGroupConfig) -> defer.Deferred:
        """UPDATE_AND_CREATE_SUBSCRIPTIONGROUP: create or replace the group's settings on one broker."""
        cmd = self._req(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.encode())
        return self.call(addr, cmd).addCallback(lambda _: None)

    def get_all_subscription_groups(self, addr: str) -> defer.Deferred:
        """GET_ALL_SUBSCRIPTIONGROUP_CONFIG: every subscription group that broker keeps settings for."""
        cmd = self._req(RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG)
        return self.call(addr, cmd).addCallback(lambda r: SubscriptionGroupWrapper.decode(r.body))

    def get_consumer_connections(self, addr: str, group: str) -> defer.Deferred:
        """GET_CONSUMER_CONNECTION_LIST: the group's live clients and subscriptions as that broker knows them
        (fails with code 206, CONSUMER_NOT_ONLINE, when none is connected)."""
        cmd = self._req(RequestCode.GET_CONSUMER_CONNECTION_LIST, GetConsumerConnectionListRequestHeader(group))
        return self.call(addr, cmd).addCallback(lambda r: ConsumerConnection.decode(r.body))

    def get_consume_stats(self, addr: str, group: str, topic: str | None = None) -> defer.Deferred:
        """GET_CONSUME_STATS: the group's broker/consumer offsets per queue on that broker (of ``topic``
        only, when given) and its consume rate there."""
        cmd = self._req(RequestCode.GET_CONSUME_STATS, GetConsumeStatsRequestHeader(group, topic))
        # the broker walks every queue of the group: mqadmin allows three times the usual timeout
        return self.call(addr, cmd, timeout=self.timeout * 3).addCallback(lambda r: ConsumeStats.decode(r.body))

    def get_consumer_running_info(self, addr: str, group: str, client_id: str) -> defer.Deferred:
        """GET_CONSUMER_RUNNING_INFO: the broker asks the consumer itself (its queues, subscriptions, rates)."""
        header = GetConsumerRunningInfoRequestHeader(group, client_id)
        cmd = self._req(RequestCode.GET_CONSUMER_RUNNING_INFO, header)
        return self.call(addr, cmd).addCallback(lambda r: ConsumerRunningInfo.decode(r.body))

    def consume_message_directly(self, addr: str, group: str, client_id: str, topic: str,
                                 offset_msg_id: str) -> defer.Deferred:
        """CONSUME_MESSAGE_DIRECTLY: the broker hands the message stored at ``offset_msg_id`` to one consumer's
        listener and relays how it went (a ConsumeMessageDirectlyResult)."""
        header = ConsumeMessageDirectlyResultRequestHeader(group, client_id, offset_msg_id, topic=topic)
        cmd = self._req(RequestCode.CONSUME_MESSAGE_DIRECTLY, header)
        return self.call(addr, cmd).addCallback(lambda r: ConsumeMessageDirectlyResult.decode(r.body))

    def reset_offset(self, addr: str, topic: str, group: str, timestamp_ms: int, force: bool = True,
                     queue_id: int = -1, offset: int | None = None) -> defer.Deferred:
        """INVOKE_BROKER_TO_RESET_OFFSET: move the group's offsets on that broker to the first message stored
        at or after ``timestamp_ms`` (-1: the end); fires with the new offset of each queue. Fails with
        code 206 (CONSUMER_NOT_ONLINE) when the broker resets through consumers and none is online."""
        header = ResetOffsetRequestHeader(topic, group, timestamp_ms, force, queue_id, offset)
        cmd = self._req(RequestCode.INVOKE_BROKER_TO_RESET_OFFSET, header)
        return self.call(addr, cmd).addCallback(
            lambda r: ResetOffsetBody.decode(r.body).offset_table if r.body else {})

    # ------------------------------------------------------------------ messages by id and key

    def view_message(self, addr: str, commitlog_offset: int, topic: str | None = None) -> defer.Deferred:
        """VIEW_MESSAGE_BY_ID: the message stored at that commit-log offset (what an offset message id
        names), its body inflated."""
        cmd = self._req(RequestCode.VIEW_MESSAGE_BY_ID, ViewMessageRequestHeader(commitlog_offset, topic))
        return self.call(addr, cmd).addCallback(lambda r: _inflated(decode_records(r.body))[0])

    def query_message(self, addr: str, header: QueryMessageRequestHeader, *, unique_key: bool = False,
                      timeout: float | None = None) -> defer.Deferred:
        """QUERY_MESSAGE: messages the broker's index holds under ``header.key`` (a unique key with
        ``unique_key``); fires with ``(index last update time, messages)``, no messages on QUERY_NOT_FOUND.
        The index may hold other keys of the same hash: callers filter."""
        cmd = self._req(RequestCode.QUERY_MESSAGE, header)
        if unique_key:
            cmd.ext_fields[UNIQUE_MSG_QUERY_FLAG] = "true"

        def result(resp: RemotingCommand) -> tuple[int, list[MessageExt]]:
            if resp.code != ResponseCode.SUCCESS:
                return 0, []
            h = QueryMessageResponseHeader.from_ext(resp.ext_fields or {})
            return h.index_last_update_timestamp, _inflated(decode_records(resp.body) if resp.body else [])

        return self.call(addr, cmd, ResponseCode.SUCCESS, ResponseCode.QUERY_NOT_FOUND,
                         timeout=timeout).addCallback(result)


def _inflated(msgs: list[MessageExt]) -> list[MessageExt]:
    for m in msgs:
        m.body = decompress_body(m.body, m.sys_flag)
    return msgs
