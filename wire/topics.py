"""Well-known topic and group names and the naming rules, shared by clients and the broker.

Validation follows Apache's TopicValidator: the same characters, lengths and remarks, because
``mqadmin`` and the clients show these remarks to the user.
"""

from __future__ import annotations

import functools
import re

AUTO_CREATE_TOPIC = "TBW102"
SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX"
BENCHMARK_TOPIC = "BenchmarkTest"
TRANS_HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
TRANS_OP_HALF_TOPIC = "RMQ_SYS_TRANS_OP_HALF_TOPIC"
TRANS_CHECK_MAX_TIME_TOPIC = "TRANS_CHECK_MAX_TIME_TOPIC"
TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC"
SELF_TEST_TOPIC = "SELF_TEST_TOPIC"
OFFSET_MOVED_EVENT = "OFFSET_MOVED_EVENT"
ROCKSDB_OFFSET_TOPIC = "CHECKPOINT_TOPIC"
TIMER_TOPIC = "rmq_sys_wheel_timer"
SYSTEM_TOPIC_PREFIX = "rmq_sys_"
SYNC_BROKER_MEMBER_PREFIX = SYSTEM_TOPIC_PREFIX + "SYNC_BROKER_MEMBER_"
REPLY_TOPIC_POSTFIX = "REPLY_TOPIC"
REVIVE_TOPIC_PREFIX = "rmq_sys_REVIVE_LOG_"

RETRY_GROUP_TOPIC_PREFIX = "%RETRY%"
DLQ_GROUP_TOPIC_PREFIX = "%DLQ%"

#: Delay levels live in one queue each of SCHEDULE_TOPIC.
SCHEDULE_TOPIC_QUEUE_NUM = 18

CLIENT_INNER_PRODUCER_GROUP = "CLIENT_INNER_PRODUCER"
TOOLS_CONSUMER_GROUP = "TOOLS_CONSUMER"
DEFAULT_PRODUCER_GROUP = "DEFAULT_PRODUCER"
DEFAULT_CONSUMER_GROUP = "DEFAULT_CONSUMER"
SELF_TEST_PRODUCER_GROUP = "SELF_TEST_P_GROUP"
SELF_TEST_CONSUMER_GROUP = "SELF_TEST_C_GROUP"
TRANS_CHECK_GROUP = "CID_RMQ_SYS_TRANS"
SYS_GROUP_PREFIX = "CID_RMQ_SYS_"
UNIQUE_MSG_QUERY_FLAG = "_UNIQUE_KEY_QUERY"
DEFAULT_REGION = "DefaultRegion"

SYSTEM_TOPICS = frozenset(
    {
        AUTO_CREATE_TOPIC,
        SCHEDULE_TOPIC,
        BENCHMARK_TOPIC,
        TRANS_HALF_TOPIC,
        TRACE_TOPIC,
        TRANS_OP_HALF_TOPIC,
        TRANS_CHECK_MAX_TIME_TOPIC,
        SELF_TEST_TOPIC,
        OFFSET_MOVED_EVENT,
        ROCKSDB_OFFSET_TOPIC,
    }
)
#: The subscription groups Apache creates at start (tools, self test, transaction check).
SYSTEM_GROUPS = (
    TOOLS_CONSUMER_GROUP,
    "FILTERSRV_CONSUMER",
    SELF_TEST_CONSUMER_GROUP,
    "CID_ONS-HTTP-PROXY",
    "CID_ONSAPI_PULL",
    "CID_ONSAPI_PERMISSION",
    "CID_ONSAPI_OWNER",
    "CID_SYS_RMQ_TRANS",
)
#: Topics a producer may never send to directly (answered NO_PERMISSION).
NOT_ALLOWED_SEND_TOPICS = frozenset(
    {SCHEDULE_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC, TRANS_CHECK_MAX_TIME_TOPIC, SELF_TEST_TOPIC, OFFSET_MOVED_EVENT}
)

TOPIC_MAX_LENGTH = 127
RETRY_OR_DLQ_TOPIC_MAX_LENGTH = 255
GROUP_MAX_LENGTH = 120
_ILLEGAL = re.compile(r"[^%|a-zA-Z0-9_-]")


def retry_topic(group: str) -> str:
    return RETRY_GROUP_TOPIC_PREFIX + group


def dlq_topic(group: str) -> str:
    return DLQ_GROUP_TOPIC_PREFIX + group


def is_retry_or_dlq(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or topic.startswith(DLQ_GROUP_TOPIC_PREFIX)


def is_system_topic(topic: str) -> bool:
    return topic in SYSTEM_TOPICS or topic.startswith(SYSTEM_TOPIC_PREFIX)


@functools.lru_cache(maxsize=4096)
def validate_topic(topic: str | None) -> str | None:
    """None when ``topic`` is a legal name, else the remark Apache gives for it. Remembered per name: a
    send checks its topic on the client and again on the broker, and a broker sees few names."""
    if topic is None or not topic.strip():
        return "The specified topic is blank."
    if _ILLEGAL.search(topic):
        return f"The specified topic: {topic}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if is_retry_or_dlq(topic):
        if len(topic) > RETRY_OR_DLQ_TOPIC_MAX_LENGTH:
            return (
                f"The specified topic is DLQ or Retry topic: {topic}, "
                f"and it's longer than topic max length: {RETRY_OR_DLQ_TOPIC_MAX_LENGTH}"
            )
    elif len(topic) > TOPIC_MAX_LENGTH:
        return f"The specified topic: {topic}, is longer than topic max length: {TOPIC_MAX_LENGTH}"
    return None


def validate_group(group: str | None) -> str | None:
    """None when ``group`` is a legal name, else the remark Apache gives for it."""
    if group is None or not group.strip():
        return "The specified group is blank."
    if _ILLEGAL.search(group):
        return f"The specified group: {group}, contains illegal characters, allowing only ^[%|a-zA-Z0-9_-]+$"
    if len(group) > GROUP_MAX_LENGTH:
        return f"The specified group: {group}, is longer than group max length: {GROUP_MAX_LENGTH}"
    return None


#: ExtraInfo's revive queue id of an orderly (FIFO) pop (Apache's KeyBuilder.POP_ORDER_REVIVE_QUEUE).
POP_ORDER_REVIVE_QUEUE = 999


def pop_retry_topic(topic: str, group: str, v2: bool = False) -> str:
    """Where unacked POP messages of ``group`` on ``topic`` come back: ``%RETRY%group_topic``, or with
    ``+`` when the broker's enableRetryTopicV2 is on."""
    return f"{RETRY_GROUP_TOPIC_PREFIX}{group}{'+' if v2 else '_'}{topic}"


def is_pop_retry_topic_v2(topic: str) -> bool:
    return topic.startswith(RETRY_GROUP_TOPIC_PREFIX) and "+" in topic
