"""Each request code declared once: the types of its custom header, its answer's header and its body.

A :class:`Request` is what a code means on the wire, for both sides: servers route a code to a handler
that receives the decoded header (``remoting.dispatch``), clients encode their headers and read the
answers' through the same declaration. SEND_MESSAGE_V2, SEND_BATCH_MESSAGE and SEND_REPLY_MESSAGE_V2
carry :class:`~.headers.SendMessageRequestHeader` under its one-letter keys (``short_keys``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import headers as h
from .bodies import (
    BatchAckMessageRequestBody,
    CheckClientRequestBody,
    DataVersion,
    HeartbeatData,
    LockBatchRequestBody,
    QueryAssignmentRequestBody,
    RegisterBrokerBody,
    SetMessageRequestModeRequestBody,
    SubscriptionGroupConfig,
    SyncStateSet,
    TopicRouteData,
    UnlockBatchRequestBody,
)
from .codes import RequestCode
from .command import RemotingCommand

__all__ = ["REQUESTS", "Request", "decode_request_header", "decode_response_header", "encode_request_header"]

HeaderDecoder = Callable[["dict[str, str] | None"], Any]


def _no_header(_ext: dict[str, str] | None) -> None:
    return None


@dataclass(frozen=True, slots=True)
class Request:
    """One request code: ``header`` is the class of its extFields (None: no fields of its own),
    ``response`` the class of a successful answer's extFields, ``body`` what its body decodes to
    (None: empty, or bytes the handler reads itself)."""

    code: int
    header: type | None = None
    response: type | None = None
    body: type | None = None
    #: The header travels under the one-letter V2 keys (``from_ext_v2``/``to_ext_v2``).
    short_keys: bool = False
    #: ``extFields -> header`` (None for codes without fields); raises MissingField / BadField.
    decode: HeaderDecoder = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.header is None:
            decode = _no_header
        else:
            decode = self.header.from_ext_v2 if self.short_keys else self.header.from_ext
        object.__setattr__(self, "decode", decode)

    def encode(self, header: Any) -> dict[str, str]:
        """extFields carrying ``header`` as this code writes it."""
        return header.to_ext_v2() if self.short_keys else header.to_ext()

    def decode_response(self, ext: dict[str, str] | None) -> Any:
        """The typed header of a successful answer; None when this code's answer has none."""
        return None if self.response is None else self.response.from_ext(ext)


_C = RequestCode

_DECLARED = (
    # ---------------------------------------------------------------- send and pull
    Request(_C.SEND_MESSAGE, h.SendMessageRequestHeader, h.SendMessageResponseHeader),
    Request(_C.SEND_MESSAGE_V2, h.SendMessageRequestHeader, h.SendMessageResponseHeader, short_keys=True),
    Request(_C.SEND_BATCH_MESSAGE, h.SendMessageRequestHeader, h.SendMessageResponseHeader, short_keys=True),
    Request(_C.SEND_REPLY_MESSAGE, h.SendMessageRequestHeader, h.SendMessageResponseHeader),
    Request(_C.SEND_REPLY_MESSAGE_V2, h.SendMessageRequestHeader, h.SendMessageResponseHeader, short_keys=True),
    Request(_C.PUSH_REPLY_MESSAGE_TO_CLIENT, h.ReplyMessageRequestHeader),
    Request(_C.PULL_MESSAGE, h.PullMessageRequestHeader, h.PullMessageResponseHeader),
    Request(_C.LITE_PULL_MESSAGE, h.PullMessageRequestHeader, h.PullMessageResponseHeader),
    Request(_C.POP_MESSAGE, h.PopMessageRequestHeader, h.PopMessageResponseHeader),
    Request(_C.ACK_MESSAGE, h.AckMessageRequestHeader),
    Request(_C.BATCH_ACK_MESSAGE, body=BatchAckMessageRequestBody),
    Request(_C.CHANGE_MESSAGE_INVISIBLETIME, h.ChangeInvisibleTimeRequestHeader, h.ChangeInvisibleTimeResponseHeader),
    Request(_C.QUERY_ASSIGNMENT, body=QueryAssignmentRequestBody),
    Request(_C.SET_MESSAGE_REQUEST_MODE, body=SetMessageRequestModeRequestBody),
    Request(_C.CONSUMER_SEND_MSG_BACK, h.ConsumerSendMsgBackRequestHeader),
    # ---------------------------------------------------------------- offsets
    Request(_C.QUERY_CONSUMER_OFFSET, h.QueryConsumerOffsetRequestHeader, h.QueryConsumerOffsetResponseHeader),
    Request(_C.UPDATE_CONSUMER_OFFSET, h.UpdateConsumerOffsetRequestHeader),
    Request(_C.GET_MAX_OFFSET, h.GetMaxOffsetRequestHeader, h.GetMaxOffsetResponseHeader),
    Request(_C.GET_MIN_OFFSET, h.GetMinOffsetRequestHeader, h.GetMinOffsetResponseHeader),
    Request(_C.GET_EARLIEST_MSG_STORETIME, h.GetEarliestMsgStoretimeRequestHeader,
            h.GetEarliestMsgStoretimeResponseHeader),
    Request(_C.SEARCH_OFFSET_BY_TIMESTAMP, h.SearchOffsetRequestHeader, h.SearchOffsetResponseHeader),
    # ---------------------------------------------------------------- client management
    Request(_C.HEART_BEAT, h.HeartbeatRequestHeader, body=HeartbeatData),
    Request(_C.UNREGISTER_CLIENT, h.UnregisterClientRequestHeader),
    Request(_C.GET_CONSUMER_LIST_BY_GROUP, h.GetConsumerListByGroupRequestHeader),
    Request(_C.CHECK_CLIENT_CONFIG, body=CheckClientRequestBody),
    Request(_C.LOCK_BATCH_MQ, h.LockBatchMqRequestHeader, body=LockBatchRequestBody),
    Request(_C.UNLOCK_BATCH_MQ, h.UnlockBatchMqRequestHeader, body=UnlockBatchRequestBody),
    # ---------------------------------------------------------------- transactions
    Request(_C.END_TRANSACTION, h.EndTransactionRequestHeader),
    Request(_C.CHECK_TRANSACTION_STATE, h.CheckTransactionStateRequestHeader),
    # ---------------------------------------------------------------- name server
    Request(_C.REGISTER_BROKER, h.RegisterBrokerRequestHeader, h.RegisterBrokerResponseHeader, RegisterBrokerBody),
    Request(_C.UNREGISTER_BROKER, h.UnRegisterBrokerRequestHeader),
    Request(_C.BROKER_HEARTBEAT, h.BrokerHeartbeatRequestHeader),
    Request(_C.GET_BROKER_MEMBER_GROUP, h.GetBrokerMemberGroupRequestHeader),
    # ---------------------------------------------------------------- controller (Apache 5.x controller mode)
    Request(_C.CONTROLLER_GET_METADATA_INFO, response=h.GetMetaDataResponseHeader),
    Request(_C.CONTROLLER_GET_NEXT_BROKER_ID, h.GetNextBrokerIdRequestHeader, h.GetNextBrokerIdResponseHeader),
    Request(_C.CONTROLLER_APPLY_BROKER_ID, h.ApplyBrokerIdRequestHeader),
    Request(_C.CONTROLLER_REGISTER_BROKER, h.RegisterBrokerToControllerRequestHeader, h.ReplicaRoleHeader),
    Request(_C.CONTROLLER_ELECT_MASTER, h.ElectMasterRequestHeader, h.ReplicaRoleHeader),
    Request(_C.CONTROLLER_GET_REPLICA_INFO, h.GetReplicaInfoRequestHeader, h.ReplicaRoleHeader),
    Request(_C.CONTROLLER_ALTER_SYNC_STATE_SET, h.AlterSyncStateSetRequestHeader, body=SyncStateSet),
    Request(_C.NOTIFY_BROKER_ROLE_CHANGED, h.ReplicaRoleHeader, body=SyncStateSet),
    Request(_C.GET_BROKER_EPOCH_CACHE),
    Request(_C.GET_ROUTEINFO_BY_TOPIC, h.GetRouteInfoRequestHeader),
    Request(_C.GET_BROKER_CLUSTER_INFO),
    Request(_C.REGISTER_TOPIC_IN_NAMESRV, h.RegisterTopicRequestHeader, body=TopicRouteData),
    Request(_C.DELETE_TOPIC_IN_NAMESRV, h.DeleteTopicFromNamesrvRequestHeader),
    Request(_C.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),
    Request(_C.GET_TOPICS_BY_CLUSTER, h.GetTopicsByClusterRequestHeader),
    Request(_C.GET_SYSTEM_TOPIC_LIST_FROM_NS),
    Request(_C.GET_UNIT_TOPIC_LIST),
    Request(_C.GET_HAS_UNIT_SUB_TOPIC_LIST),
    Request(_C.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST),
    Request(_C.PUT_KV_CONFIG, h.PutKVConfigRequestHeader),
    Request(_C.GET_KV_CONFIG, h.GetKVConfigRequestHeader, h.GetKVConfigResponseHeader),
    Request(_C.DELETE_KV_CONFIG, h.DeleteKVConfigRequestHeader),
    Request(_C.GET_KVLIST_BY_NAMESPACE, h.GetKVListByNamespaceRequestHeader),
    Request(_C.WIPE_WRITE_PERM_OF_BROKER, h.WipeWritePermOfBrokerRequestHeader, h.WipeWritePermOfBrokerResponseHeader),
    Request(_C.ADD_WRITE_PERM_OF_BROKER, h.AddWritePermOfBrokerRequestHeader, h.AddWritePermOfBrokerResponseHeader),
    Request(_C.QUERY_DATA_VERSION, h.QueryDataVersionRequestHeader, h.QueryDataVersionResponseHeader, DataVersion),
    Request(_C.UPDATE_NAMESRV_CONFIG),
    Request(_C.GET_NAMESRV_CONFIG),
    # ---------------------------------------------------------------- server -> client
    Request(_C.NOTIFY_CONSUMER_IDS_CHANGED, h.NotifyConsumerIdsChangedRequestHeader),
    Request(_C.RESET_CONSUMER_CLIENT_OFFSET, h.ResetOffsetRequestHeader),
    Request(_C.GET_CONSUMER_STATUS_FROM_CLIENT, h.GetConsumerStatusRequestHeader),
    Request(_C.GET_CONSUMER_RUNNING_INFO, h.GetConsumerRunningInfoRequestHeader),
    Request(_C.CONSUME_MESSAGE_DIRECTLY, h.ConsumeMessageDirectlyResultRequestHeader),
    # ---------------------------------------------------------------- admin: topics
    Request(_C.UPDATE_AND_CREATE_TOPIC, h.CreateTopicRequestHeader),
    Request(_C.DELETE_TOPIC_IN_BROKER, h.DeleteTopicRequestHeader),
    Request(_C.GET_ALL_TOPIC_CONFIG, h.GetAllTopicConfigRequestHeader, h.GetAllTopicConfigResponseHeader),
    Request(_C.GET_TOPIC_CONFIG, h.GetTopicConfigRequestHeader),
    Request(_C.GET_TOPIC_STATS_INFO, h.GetTopicStatsInfoRequestHeader),
    Request(_C.GET_SYSTEM_TOPIC_LIST_FROM_BROKER),
    # ---------------------------------------------------------------- admin: broker
    Request(_C.GET_BROKER_RUNTIME_INFO),
    Request(_C.GET_BROKER_CONFIG, response=h.GetBrokerConfigResponseHeader),
    # ---------------------------------------------------------------- admin: what a slave copies
    Request(_C.GET_ALL_CONSUMER_OFFSET),
    Request(_C.GET_ALL_DELAY_OFFSET),
    Request(_C.GET_ALL_MESSAGE_REQUEST_MODE),
    Request(_C.GET_TIMER_CHECK_POINT),
    Request(_C.GET_TIMER_METRICS),
    Request(_C.GET_BROKER_HA_STATUS),
    Request(_C.UPDATE_BROKER_CONFIG),
    Request(_C.TRIGGER_DELETE_FILES),
    Request(_C.DELETE_EXPIRED_COMMITLOG),
    Request(_C.CLEAN_EXPIRED_CONSUMEQUEUE),
    Request(_C.VIEW_BROKER_STATS_DATA, h.ViewBrokerStatsDataRequestHeader),
    # ---------------------------------------------------------------- admin: groups, consumers, producers
    Request(_C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, body=SubscriptionGroupConfig),
    Request(_C.DELETE_SUBSCRIPTIONGROUP, h.DeleteSubscriptionGroupRequestHeader),
    Request(_C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, h.GetAllSubscriptionGroupRequestHeader,
            h.GetAllSubscriptionGroupResponseHeader),
    Request(_C.GET_SUBSCRIPTIONGROUP_CONFIG, h.GetSubscriptionGroupConfigRequestHeader),
    Request(_C.GET_CONSUME_STATS, h.GetConsumeStatsRequestHeader),
    Request(_C.GET_BROKER_CONSUME_STATS, h.GetConsumeStatsInBrokerHeader),
    Request(_C.GET_CONSUMER_CONNECTION_LIST, h.GetConsumerConnectionListRequestHeader),
    Request(_C.GET_PRODUCER_CONNECTION_LIST, h.GetProducerConnectionListRequestHeader),
    Request(_C.QUERY_TOPIC_CONSUME_BY_WHO, h.QueryTopicConsumeByWhoRequestHeader),
    Request(_C.QUERY_TOPICS_BY_CONSUMER, h.QueryTopicsByConsumerRequestHeader),
    Request(_C.QUERY_SUBSCRIPTION_BY_CONSUMER, h.QuerySubscriptionByConsumerRequestHeader),
    Request(_C.QUERY_CONSUME_TIME_SPAN, h.QueryConsumeTimeSpanRequestHeader),
    Request(_C.QUERY_CORRECTION_OFFSET, h.QueryCorrectionOffsetHeader),
    Request(_C.QUERY_CONSUME_QUEUE, h.QueryConsumeQueueRequestHeader),
    Request(_C.CLONE_GROUP_OFFSET, h.CloneGroupOffsetRequestHeader),
    Request(_C.INVOKE_BROKER_TO_RESET_OFFSET, h.ResetOffsetRequestHeader),
    Request(_C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS, h.GetConsumerStatusRequestHeader),
    Request(_C.RESUME_CHECK_HALF_MESSAGE, h.ResumeCheckHalfMessageRequestHeader),
    # ---------------------------------------------------------------- messages
    Request(_C.VIEW_MESSAGE_BY_ID, h.ViewMessageRequestHeader),
    Request(_C.QUERY_MESSAGE, h.QueryMessageRequestHeader, h.QueryMessageResponseHeader),
    # ---------------------------------------------------------------- access control: users and ACLs
    Request(_C.AUTH_CREATE_USER, h.AuthUserRequestHeader),
    Request(_C.AUTH_UPDATE_USER, h.AuthUserRequestHeader),
    Request(_C.AUTH_DELETE_USER, h.AuthUserRequestHeader),
    Request(_C.AUTH_GET_USER, h.AuthUserRequestHeader),
    Request(_C.AUTH_LIST_USER, h.ListUsersRequestHeader),
    Request(_C.AUTH_CREATE_ACL, h.AuthAclRequestHeader),
    Request(_C.AUTH_UPDATE_ACL, h.AuthAclRequestHeader),
    Request(_C.AUTH_DELETE_ACL, h.DeleteAclRequestHeader),
    Request(_C.AUTH_GET_ACL, h.AuthAclRequestHeader),
    Request(_C.AUTH_LIST_ACL, h.ListAclsRequestHeader),
)

#: Every declared request, by code.
REQUESTS: Mapping[int, Request] = {int(r.code): r for r in _DECLARED}
assert len(REQUESTS) == len(_DECLARED), "a request code is declared twice"


def decode_request_header(cmd: RemotingCommand) -> Any:
    """The typed header of a request, chosen by ``cmd.code``; None for codes without header fields.

    Raises MissingField / BadField when the extFields do not satisfy the header.
    """
    spec = REQUESTS.get(cmd.code)
    return None if spec is None else spec.decode(cmd.ext_fields)


def decode_response_header(request_code: int, cmd: RemotingCommand) -> Any:
    """The typed header of a response to a request of ``request_code``; None if that answer has none."""
    spec = REQUESTS.get(request_code)
    return None if spec is None else spec.decode_response(cmd.ext_fields)


def encode_request_header(code: int, header: Any) -> dict[str, str]:
    """extFields for sending ``header`` as a request of ``code`` (V2 short keys where the code uses them)."""
    spec = REQUESTS.get(code)
    return header.to_ext() if spec is None else spec.encode(header)
