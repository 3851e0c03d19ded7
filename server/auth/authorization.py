"""What a request asks to do (the resources and actions Apache's ``DefaultAuthorizationContextBuilder``
derives from each request code), and whether the user's ACL allows it (Apache's user and ACL handlers)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ferrymq.wire.bodies import HeartbeatData, LockBatchRequestBody
from ferrymq.wire.codes import RequestCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.signature import ACCESS_KEY

from .acls import RETRY_PREFIX, Acls, Action, Decision, Resource, ResourceType
from .errors import AuthorizationError
from .users import Users

A, T, C = Action, ResourceType, RequestCode


@dataclass(frozen=True)
class Need:
    """One check: the user must be allowed one of ``actions`` on ``resource``."""

    resource: Resource
    actions: tuple[Action, ...]


@dataclass(frozen=True)
class Rule:
    """The actions a request code needs, on the cluster and/or on the resources its header fields name
    (``(type, field, splitter)``): Apache's ``@RocketMQAction`` / ``@RocketMQResource`` header annotations."""

    actions: tuple[Action, ...]
    cluster: bool
    fields: tuple[tuple, ...]


#: The annotated request headers of Apache 5.5 (codes FerryMQ knows); other codes need no permission.
RULES: dict[int, Rule] = {
    C.ACK_MESSAGE: Rule((A.SUB,), False, ((T.GROUP, "consumerGroup"), (T.TOPIC, "topic"))),
    C.ADD_BROKER: Rule((A.UPDATE,), True, ()),
    C.ADD_WRITE_PERM_OF_BROKER: Rule((A.UPDATE,), True, ()),
    C.AUTH_CREATE_ACL: Rule((A.UPDATE,), True, ()),
    C.AUTH_CREATE_USER: Rule((A.UPDATE,), True, ()),
    C.AUTH_DELETE_ACL: Rule((A.UPDATE,), True, ()),
    C.AUTH_DELETE_USER: Rule((A.UPDATE,), True, ()),
    C.AUTH_GET_ACL: Rule((A.GET,), True, ()),
    C.AUTH_GET_USER: Rule((A.GET,), True, ()),
    C.AUTH_LIST_ACL: Rule((A.GET,), True, ()),
    C.AUTH_LIST_USER: Rule((A.GET,), True, ()),
    C.AUTH_UPDATE_ACL: Rule((A.UPDATE,), True, ()),
    C.AUTH_UPDATE_USER: Rule((A.UPDATE,), True, ()),
    C.BROKER_HEARTBEAT: Rule((A.UPDATE,), True, ((T.CLUSTER, "clusterName"),)),
    C.CHANGE_MESSAGE_INVISIBLETIME: Rule((A.SUB,), False, ((T.GROUP, "consumerGroup"), (T.TOPIC, "topic"))),
    C.CHECK_ROCKSDB_CQ_WRITE_PROGRESS: Rule((A.GET,), False, ((T.TOPIC, "topic"),)),
    C.CHECK_TRANSACTION_STATE: Rule((A.PUB,), False, ((T.TOPIC, "topic"),)),
    C.CLEAN_BROKER_DATA: Rule((A.UPDATE,), True, ((T.CLUSTER, "clusterName"),)),
    C.CLONE_GROUP_OFFSET: Rule((A.UPDATE,), False, ((T.GROUP, "destGroup"), (T.TOPIC, "topic"))),
    C.CONSUME_MESSAGE_DIRECTLY: Rule((A.SUB,), False, ((T.GROUP, "consumerGroup"), (T.TOPIC, "topic"))),
    C.CONTROLLER_ALTER_SYNC_STATE_SET: Rule((A.UPDATE,), True, ()),
    C.CONTROLLER_APPLY_BROKER_ID: Rule((A.UPDATE,), True, ((T.CLUSTER, "clusterName"),)),
    C.CONTROLLER_ELECT_MASTER: Rule((A.UPDATE,), True, ((T.CLUSTER, "clusterName"),)),
    C.CONTROLLER_GET_NEXT_BROKER_ID: Rule((A.GET,), True, ((T.CLUSTER, "clusterName"),)),
    C.CONTROLLER_GET_REPLICA_INFO: Rule((A.GET,), True, ()),
    C.CONTROLLER_REGISTER_BROKER: Rule((A.UPDATE,), True, ((T.CLUSTER, "clusterName"),)),
    C.DELETE_KV_CONFIG: Rule((A.UPDATE,), True, ()),
    C.DELETE_SUBSCRIPTIONGROUP: Rule((A.DELETE,), False, ((T.GROUP, "groupName"),)),
    C.DELETE_TOPIC_IN_BROKER: Rule((A.DELETE,), False, ((T.TOPIC, "topic"),)),
    C.DELETE_TOPIC_IN_NAMESRV: Rule((A.UPDATE,), True, ((T.CLUSTER, "clusterName"),)),
    C.EXCHANGE_BROKER_HA_INFO: Rule((A.UPDATE,), True, ()),
    C.EXPORT_ROCKSDB_CONFIG_TO_JSON: Rule((A.GET,), True, ()),
    C.GET_ALL_PRODUCER_INFO: Rule((A.GET,), True, ()),
    C.GET_BROKER_CONSUME_STATS: Rule((A.GET,), True, ()),
    C.GET_BROKER_MEMBER_GROUP: Rule((A.GET,), False, ((T.CLUSTER, "clusterName"),)),
    C.GET_CONSUMER_CONNECTION_LIST: Rule((A.GET,), False, ((T.GROUP, "consumerGroup"),)),
    C.GET_CONSUMER_RUNNING_INFO: Rule((A.GET,), False, ((T.GROUP, "consumerGroup"),)),
    C.GET_CONSUME_STATS: Rule((A.GET,), False, ((T.GROUP, "consumerGroup"), (T.TOPIC, "topic"),
                                                (T.TOPIC, "topicList", ";"))),
    C.GET_EARLIEST_MSG_STORETIME: Rule((A.GET,), False, ((T.TOPIC, "topic"),)),
    C.GET_KVLIST_BY_NAMESPACE: Rule((A.GET,), True, ()),
    C.GET_KV_CONFIG: Rule((A.GET,), True, ()),
    C.GET_MAX_OFFSET: Rule((A.GET,), False, ((T.TOPIC, "topic"),)),
    C.GET_MIN_OFFSET: Rule((A.GET,), False, ((T.TOPIC, "topic"),)),
    C.GET_PRODUCER_CONNECTION_LIST: Rule((A.GET,), True, ()),
    C.GET_SUBSCRIPTIONGROUP_CONFIG: Rule((A.GET,), False, ((T.GROUP, "group"),)),
    C.GET_TOPIC_CONFIG: Rule((A.GET,), False, ((T.TOPIC, "topic"),)),
    C.GET_TOPIC_STATS_INFO: Rule((A.GET,), False, ((T.TOPIC, "topic"),)),
    C.INVOKE_BROKER_TO_GET_CONSUMER_STATUS: Rule((A.GET,), False, ((T.TOPIC, "topic"), (T.GROUP, "group"))),
    C.INVOKE_BROKER_TO_RESET_OFFSET: Rule((A.UPDATE,), False, ((T.GROUP, "group"), (T.TOPIC, "topic"))),
    C.NOTIFICATION: Rule((A.SUB,), False, ((T.GROUP, "consumerGroup"), (T.TOPIC, "topic"))),
    C.NOTIFY_BROKER_ROLE_CHANGED: Rule((A.UPDATE,), True, ()),
    C.NOTIFY_CONSUMER_IDS_CHANGED: Rule((A.SUB,), False, ((T.GROUP, "consumerGroup"),)),
    C.NOTIFY_MIN_BROKER_ID_CHANGE: Rule((A.UPDATE,), True, ()),
    C.PEEK_MESSAGE: Rule((A.SUB,), False, ((T.TOPIC, "topic"), (T.GROUP, "consumerGroup"))),
    C.POLLING_INFO: Rule((A.GET,), False, ((T.GROUP, "consumerGroup"), (T.TOPIC, "topic"))),
    C.POP_MESSAGE: Rule((A.SUB,), False, ((T.GROUP, "consumerGroup"), (T.TOPIC, "topic"))),
    C.PUSH_REPLY_MESSAGE_TO_CLIENT: Rule((A.SUB,), False, ((T.GROUP, "producerGroup"), (T.TOPIC, "topic"))),
    C.PUT_KV_CONFIG: Rule((A.UPDATE,), True, ()),
    C.QUERY_CONSUME_QUEUE: Rule((A.GET,), False, ((T.TOPIC, "topic"), (T.GROUP, "consumerGroup"))),
    C.QUERY_CONSUME_TIME_SPAN: Rule((A.GET,), False, ((T.TOPIC, "topic"), (T.GROUP, "group"))),
    C.QUERY_CORRECTION_OFFSET: Rule((A.GET,), False, ((T.GROUP, "filterGroups", ","), (T.GROUP, "compareGroup"),
                                                      (T.TOPIC, "topic"))),
    C.QUERY_DATA_VERSION: Rule((A.GET,), True, ((T.CLUSTER, "clusterName"),)),
    C.QUERY_SUBSCRIPTION_BY_CONSUMER: Rule((A.GET,), False, ((T.GROUP, "group"), (T.TOPIC, "topic"))),
    C.QUERY_TOPICS_BY_CONSUMER: Rule((A.GET,), False, ((T.GROUP, "group"),)),
    C.QUERY_TOPIC_CONSUME_BY_WHO: Rule((A.GET,), False, ((T.TOPIC, "topic"),)),
    C.REGISTER_BROKER: Rule((A.UPDATE,), True, ((T.CLUSTER, "clusterName"),)),
    C.REGISTER_TOPIC_IN_NAMESRV: Rule((A.UPDATE,), True, ()),
    C.REMOVE_BROKER: Rule((A.UPDATE,), True, ((T.CLUSTER, "brokerClusterName"),)),
    C.RESET_MASTER_FLUSH_OFFSET: Rule((A.UPDATE,), True, ()),
    C.RESUME_CHECK_HALF_MESSAGE: Rule((A.UPDATE,), False, ((T.TOPIC, "topic"),)),
    C.SEARCH_OFFSET_BY_TIMESTAMP: Rule((A.GET,), False, ((T.TOPIC, "topic"),)),
    C.UNREGISTER_BROKER: Rule((A.UPDATE,), True, ((T.CLUSTER, "clusterName"),)),
    C.UPDATE_AND_CREATE_TOPIC: Rule((A.CREATE,), False, ((T.TOPIC, "topic"),)),
    C.UPDATE_AND_GET_GROUP_FORBIDDEN: Rule((A.UPDATE,), False, ((T.GROUP, "group"), (T.TOPIC, "topic"))),
    C.VIEW_BROKER_STATS_DATA: Rule((A.GET,), True, ()),
    C.VIEW_MESSAGE_BY_ID: Rule((A.GET,), False, ((T.TOPIC, "topic"),)),
    C.WIPE_WRITE_PERM_OF_BROKER: Rule((A.UPDATE,), True, ()),
}


def _is_retry(topic: str | None) -> bool:
    return bool(topic) and topic.startswith(RETRY_PREFIX)


def _topic_or_retry_group(topic: str | None, actions: tuple[Action, ...], group: str | None = None) -> Need:
    """A send to a retry topic is a consumer's: it needs Sub on the group, otherwise ``actions`` on the topic."""
    if _is_retry(topic):
        return Need(Resource.group(group or topic), (A.SUB,))
    return Need(Resource.topic(topic or ""), actions)


def _queue_locks(body: bytes) -> list[Need]:
    req = LockBatchRequestBody.decode(body)
    needs = [Need(Resource.group(req.consumer_group or ""), (A.SUB,))]
    needs += [Need(Resource.topic(mq.topic or ""), (A.SUB,)) for mq in req.mq_set if not _is_retry(mq.topic)]
    return needs


def _heartbeat(body: bytes) -> list[Need]:
    needs = []
    for consumer in HeartbeatData.decode(body).consumer_data_set:
        needs.append(Need(Resource.group(consumer.group_name or ""), (A.SUB,)))
        needs += [Need(Resource.topic(s.topic or ""), (A.SUB,))
                  for s in consumer.subscription_data_set if not _is_retry(s.topic)]
    return needs


def needs_of(cmd: RemotingCommand, cluster: str) -> list[Need]:
    """What ``cmd`` needs: the codes Apache special-cases, else its header's annotations, else nothing."""
    f = cmd.ext_fields or {}
    if not f:
        return []
    code = cmd.code
    if code == C.SEND_MESSAGE:
        return [_topic_or_retry_group(f.get("topic"), (A.PUB,), f.get("producerGroup"))]
    if code in (C.SEND_MESSAGE_V2, C.SEND_BATCH_MESSAGE):
        return [_topic_or_retry_group(f.get("b"), (A.PUB,), f.get("a"))]
    if code == C.GET_ROUTEINFO_BY_TOPIC:
        return [_topic_or_retry_group(f.get("topic"), (A.PUB, A.SUB, A.GET))]
    if code in (C.RECALL_MESSAGE, C.END_TRANSACTION):
        return [Need(Resource.topic(f["topic"]), (A.PUB,))] if f.get("topic") else []
    if code == C.CONSUMER_SEND_MSG_BACK:
        return [Need(Resource.group(f.get("group") or ""), (A.SUB,))]
    if code == C.PULL_MESSAGE:
        topic = [] if _is_retry(f.get("topic")) else [Need(Resource.topic(f.get("topic") or ""), (A.SUB,))]
        return [*topic, Need(Resource.group(f.get("consumerGroup") or ""), (A.SUB,))]
    if code == C.QUERY_MESSAGE:
        return [Need(Resource.topic(f.get("topic") or ""), (A.SUB, A.GET))]
    if code == C.HEART_BEAT:
        return _heartbeat(cmd.body)
    if code == C.UNREGISTER_CLIENT:
        return [Need(Resource.group(f["consumerGroup"]), (A.SUB,))] if (f.get("consumerGroup") or "").strip() else []
    if code == C.GET_CONSUMER_LIST_BY_GROUP:
        return [Need(Resource.group(f.get("consumerGroup") or ""), (A.SUB, A.GET))]
    if code in (C.QUERY_CONSUMER_OFFSET, C.UPDATE_CONSUMER_OFFSET):
        actions = (A.SUB, A.GET) if code == C.QUERY_CONSUMER_OFFSET else (A.SUB, A.UPDATE)
        topic = [] if _is_retry(f.get("topic")) else [Need(Resource.topic(f.get("topic") or ""), actions)]
        return [*topic, Need(Resource.group(f.get("consumerGroup") or ""), actions)]
    if code in (C.LOCK_BATCH_MQ, C.UNLOCK_BATCH_MQ):
        return _queue_locks(cmd.body)
    rule = RULES.get(code)
    return [] if rule is None else _annotated(rule, f, cluster)


def _annotated(rule: Rule, fields: dict[str, str], cluster: str) -> list[Need]:
    needs = []
    for rtype, name, *splitter in rule.fields:
        value = fields.get(name)
        if value is None:
            continue
        for item in (value.split(splitter[0]) if splitter else [value]):
            if splitter and not item:
                continue
            if rtype is T.TOPIC and _is_retry(item):
                needs.append(Need(Resource.group(item), rule.actions))
            else:
                needs.append(Need(Resource(rtype, item), rule.actions))
    if not needs and rule.cluster:
        needs.append(Need(Resource(T.CLUSTER, cluster), rule.actions))
    return needs


class Authorizer:
    """Decides requests for ``users`` from ``acls``; codes in ``whitelist`` are not checked."""

    def __init__(self, users: Users, acls: Acls, cluster: str, whitelist: Iterable[int] = ()):
        self.users = users
        self.acls = acls
        self.cluster = cluster
        self.whitelist = frozenset(whitelist)

    def authorize(self, username: str | None, resource: Resource, actions: Sequence[Action], ip: str) -> None:
        """Raise :class:`AuthorizationError` unless ``username`` may do one of ``actions`` on ``resource``
        from ``ip``: a super user may do anything, others need a matching Allow entry and no closer Deny.
        The entry point the gateways share."""
        if username is None:
            raise AuthorizationError("Authorization failed. Please verify your access rights and try again.")
        user = self.users.get(username)
        if user is None:
            raise AuthorizationError(f"User:{username} not found.")
        if user.is_super:
            return
        acl = self.acls.get(user.subject_key)
        entry = acl.decide(resource, actions, ip) if acl is not None else None
        if entry is None or entry.decision is Decision.DENY:
            detail = "no matched policies." if entry is None else "the decision is deny."
            raise AuthorizationError(
                f"{user.subject_key} has no permission to access {resource.key} from {ip}, {detail}")

    def check(self, cmd: RemotingCommand, remote_address: str) -> None:
        if cmd.code in self.whitelist:
            return
        try:
            needs = needs_of(cmd, self.cluster)
        except Exception as exc:
            raise AuthorizationError("parse authorization context error.") from exc
        if not needs:
            return
        ip = remote_address.rpartition(":")[0].strip("[]")
        username = (cmd.ext_fields or {}).get(ACCESS_KEY)
        for need in needs:
            self.authorize(username, need.resource, need.actions, ip)
