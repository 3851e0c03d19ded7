"""Admin codes mqadmin uses: topics, groups, stats, connections, runtime info, broker config."""

from __future__ import annotations

from ferrymq.wire import fastjson
from ferrymq.wire.bodies import (
    ConsumeStats,
    ConsumerConnection,
    GroupList,
    KVTable,
    MessageQueue,
    ProducerConnection,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicStatsTable,
)
from ferrymq.wire.codes import CURRENT_VERSION, CURRENT_VERSION_DESC, RequestCode, ResponseCode
from ferrymq.wire.headers import CreateTopicRequestHeader

C = RequestCode


def create(bk, topic, read=8, write=8, perm=6, **kw):
    h = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=read, write_queue_nums=write,
                                 perm=perm, topic_filter_type="SINGLE_TAG", order=False, **kw)
    return bk.call(C.UPDATE_AND_CREATE_TOPIC, h.to_ext())


def test_update_get_and_delete_topic(bk):
    assert create(bk, "AdminT", 2, 3, attributes="+queue.type=Normal").code == 0
    cfg = TopicConfig.decode(bk.call(C.GET_TOPIC_CONFIG, {"topic": "AdminT"}).body)
    assert (cfg.read_queue_nums, cfg.write_queue_nums, cfg.attributes) == (2, 3, {"queue.type": "Normal"})
    wrapper = TopicConfigSerializeWrapper.decode(bk.call(C.GET_ALL_TOPIC_CONFIG).body)
    assert "AdminT" in wrapper.topic_config_table and "TBW102" in wrapper.topic_config_table
    assert create(bk, "bad topic").code == ResponseCode.INVALID_PARAMETER
    sys_resp = create(bk, "SCHEDULE_TOPIC_XXXX")
    assert sys_resp.code == ResponseCode.INVALID_PARAMETER and "conflict with system topic" in sys_resp.remark
    bk.send("AdminT")
    bk.ctx.offsets.commit("g", "AdminT", 0, 1)
    assert bk.call(C.DELETE_TOPIC_IN_BROKER, {"topic": "AdminT"}).code == 0
    assert bk.ctx.topics.get("AdminT") is None and bk.ctx.offsets.query("g", "AdminT", 0) == -1
    assert bk.store.get_max_offset("AdminT", 0) == 0
    missing = bk.call(C.GET_TOPIC_CONFIG, {"topic": "AdminT"})
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST


def test_topic_stats_use_message_queue_object_keys(bk):
    create(bk, "StatT", 2, 2)
    bk.send("StatT", queue_id=1)
    resp = bk.call(C.GET_TOPIC_STATS_INFO, {"topic": "StatT"})
    assert b'{{"brokerName":"broker-a","queueId":0,"topic":"StatT"}:' in resp.body
    table = TopicStatsTable.decode(resp.body).offset_table
    q1 = table[MessageQueue("StatT", "broker-a", 1)]
    assert (q1.min_offset, q1.max_offset) == (0, 1) and q1.last_update_timestamp > 0
    assert bk.call(C.GET_TOPIC_STATS_INFO, {"topic": "Nope"}).code == ResponseCode.TOPIC_NOT_EXIST


def test_consume_stats_connections_and_consume_by_who(bk):
    create(bk, "CT", 1, 1)
    for _ in range(5):
        bk.send("CT")
    bk.heartbeat("cg", "CT")
    bk.ctx.offsets.commit("cg", "CT", 0, 2)
    stats = ConsumeStats.decode(bk.call(C.GET_CONSUME_STATS, {"consumerGroup": "cg", "topic": "CT"}).body)
    w = stats.offset_table[MessageQueue("CT", "broker-a", 0)]
    assert (w.broker_offset, w.consumer_offset) == (5, 2) and w.last_timestamp > 0
    by_offsets = ConsumeStats.decode(bk.call(C.GET_CONSUME_STATS, {"consumerGroup": "cg"}).body)
    assert list(by_offsets.offset_table) == [MessageQueue("CT", "broker-a", 0)]
    conn = ConsumerConnection.decode(bk.call(C.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "cg"}).body)
    assert conn.connection_set[0].client_id == "c1" and conn.connection_set[0].language == "JAVA"
    assert conn.connection_set[0].version == CURRENT_VERSION and conn.message_model == "CLUSTERING"
    assert "CT" in conn.subscription_table
    offline = bk.call(C.GET_CONSUMER_CONNECTION_LIST, {"consumerGroup": "nobody"})
    assert offline.code == ResponseCode.CONSUMER_NOT_ONLINE
    prod = ProducerConnection.decode(bk.call(C.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "pg"}).body)
    assert prod.connection_set[0].client_addr == "127.0.0.1:50001"
    assert bk.call(C.GET_PRODUCER_CONNECTION_LIST, {"producerGroup": "x"}).code == ResponseCode.SYSTEM_ERROR
    who = GroupList.decode(bk.call(C.QUERY_TOPIC_CONSUME_BY_WHO, {"topic": "CT"}).body)
    assert who.group_list == ["cg"]


def test_subscription_groups(bk):
    body = SubscriptionGroupConfig(group_name="sg", retry_max_times=3, consume_broadcast_enable=False).encode()
    assert bk.call(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body).code == 0
    got = SubscriptionGroupConfig.decode(bk.call(C.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": "sg"}).body)
    assert got.retry_max_times == 3
    all_groups = SubscriptionGroupWrapper.decode(bk.call(C.GET_ALL_SUBSCRIPTIONGROUP_CONFIG).body)
    assert "sg" in all_groups.subscription_group_table
    bk.ctx.offsets.commit("sg", "T", 0, 4)
    assert bk.call(C.DELETE_SUBSCRIPTIONGROUP, {"groupName": "sg", "cleanOffset": "true"}).code == 0
    assert bk.ctx.groups.get("sg") is None and bk.ctx.offsets.query("sg", "T", 0) == -1


def test_subscription_group_attributes_are_apaches(bk):
    """Known keys are stored without their sign and edited later; an unknown key, or a removal on creation,
    is refused with Apache's code and remark."""
    def update(group, attributes):
        body = SubscriptionGroupConfig(group_name=group, attributes=attributes).encode()
        return bk.call(C.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, body)

    def stored(group):
        return SubscriptionGroupConfig.decode(bk.call(C.GET_SUBSCRIPTIONGROUP_CONFIG, {"group": group}).body).attributes

    assert update("ga", {"+priority.factor": "5"}).code == 0
    assert stored("ga") == {"priority.factor": "5"}
    assert update("ga", {"+lite.sub.model": "Exclusive", "-priority.factor": ""}).code == 0
    assert stored("ga") == {"lite.sub.model": "Exclusive"}
    refused = update("gb", {"+x": "y"})
    assert (refused.code, refused.remark) == (ResponseCode.SYSTEM_ERROR, (
        "java.lang.RuntimeException: unsupported key: x, "
        "org.apache.rocketmq.common.attribute.AttributeUtil.validateAlter(AttributeUtil.java:117)"))
    assert bk.ctx.groups.get("gb") is None
    refused = update("gc", {"-x": ""})
    assert refused.code == ResponseCode.SYSTEM_ERROR
    assert refused.remark.startswith("java.lang.RuntimeException: only add attribute is supported while creating")
    assert "nonexistent key: lite.bind.topic" in update("ga", {"-lite.bind.topic": ""}).remark


def test_runtime_info_has_the_numbers_mqadmin_parses(bk):
    bk.send("RT")
    table = KVTable.decode(bk.call(C.GET_BROKER_RUNTIME_INFO).body).table
    for key in ("msgPutTotalTodayNow", "msgGetTotalTodayNow", "msgPutTotalYesterdayMorning", "earliestMessageTimeStamp",
                "timerReadBehind", "timerOffsetBehind", "timerCongestNum"):
        int(table[key])
    assert table["getTransferedTps"] == table["getTransferredTps"]  # 4.9.x mqadmin reads the misspelt key
    for key in ("commitLogDiskRatio", "timerEnqueueTps", "timerDequeueTps"):
        float(table[key])
    assert len(table["putTps"].split(" ")) == 3 and table["brokerVersionDesc"] == CURRENT_VERSION_DESC
    assert table["msgPutTotalTodayNow"] == "1"


def test_broker_config_get_and_update(bk):
    resp = bk.call(C.GET_BROKER_CONFIG)
    assert b"brokerName=broker-a\n" in resp.body
    assert fastjson.loads(resp.ext_fields["version"])["counter"] == 0
    assert bk.call(C.UPDATE_BROKER_CONFIG, None, b"longPollingEnable=false\nnoSuchKey=1\n").code == 0
    assert bk.config.longPollingEnable is False
    assert fastjson.loads(bk.call(C.GET_BROKER_CONFIG).ext_fields["version"])["counter"] == 1
    assert bk.call(C.UPDATE_BROKER_CONFIG, None, b"brokerName=other").code == ResponseCode.NO_PERMISSION
    assert bk.call(C.UPDATE_BROKER_CONFIG, None, b"defaultTopicQueueNums=lots").code == ResponseCode.SYSTEM_ERROR
    refused = bk.call(C.UPDATE_BROKER_CONFIG, None, b"brokerRole=SLAVE")
    assert refused.code == ResponseCode.NO_PERMISSION and "brokerRole" in refused.remark
    assert bk.config.brokerRole == "ASYNC_MASTER"


def test_system_topic_list(bk):
    topics = TopicList.decode(bk.call(C.GET_SYSTEM_TOPIC_LIST_FROM_BROKER).body).topic_list
    assert "TBW102" in topics and "SCHEDULE_TOPIC_XXXX" in topics


def test_manual_file_cleaning_is_accepted(bk):
    before = bk.store.cleaner.manual_requests
    for code in (C.TRIGGER_DELETE_FILES, C.DELETE_EXPIRED_COMMITLOG, C.CLEAN_EXPIRED_CONSUMEQUEUE):
        assert bk.call(code).code == 0
    assert bk.store.cleaner.manual_requests == before + 3


def test_a_slave_gets_consumer_and_delay_offsets_as_apache_encodes_them(bk):
    """GET_ALL_CONSUMER_OFFSET / GET_ALL_DELAY_OFFSET (SlaveSynchronize): queue ids and levels as bare keys."""
    bk.ctx.offsets.commit("g", "T", 1, 7)
    bk.ctx.scheduler.offsets = {3: 11}
    offsets = bk.call(C.GET_ALL_CONSUMER_OFFSET)
    assert offsets.code == 0 and offsets.body.startswith(b'{"offsetTable":{"T@g":{1:7}},"dataVersion":{"counter":')
    delay = bk.call(C.GET_ALL_DELAY_OFFSET)
    assert delay.code == 0 and delay.body == b'{"offsetTable":{3:11}}'
    modes = bk.call(C.GET_ALL_MESSAGE_REQUEST_MODE)
    assert modes.code == 0 and modes.body == b'{"messageRequestModeMap":{}}'
