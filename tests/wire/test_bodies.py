"""Bodies: every class round-trips, the literal examples of bodies.md decode, bad bodies say what is wrong."""

from __future__ import annotations

import dataclasses
import json
import types
import typing
import zlib
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ferrymq.wire.bodies as bodies
from ferrymq.wire import fastjson
from ferrymq.wire.bodies import (
    BrokerData,
    CheckClientRequestBody,
    ClusterInfo,
    Connection,
    ConsumeStats,
    ConsumerConnection,
    ConsumerData,
    DataVersion,
    GetConsumerStatusBody,
    HeartbeatData,
    KVTable,
    LockBatchRequestBody,
    LockBatchResponseBody,
    MessageQueue,
    OffsetWrapper,
    ProducerConnection,
    ProducerData,
    QueueData,
    RegisterBrokerBody,
    ResetOffsetBody,
    ResetOffsetBodyForC,
    SubscriptionData,
    SubscriptionGroupConfig,
    SubscriptionGroupWrapper,
    TopicConfig,
    TopicConfigSerializeWrapper,
    TopicList,
    TopicOffset,
    TopicRouteData,
    TopicStatsTable,
)
from ferrymq.wire.errors import BodyError

# ------------------------------------------------------------------ strategies from the annotations

_TEXT = st.text(max_size=8)
_SCALARS = {
    str: _TEXT,
    int: st.integers(-(2**63), 2**63 - 1),
    float: st.floats(allow_nan=False, allow_infinity=False, width=64),
    bool: st.booleans(),
    Any: st.dictionaries(_TEXT, st.integers(-(2**63), 2**63 - 1) | _TEXT, max_size=2),
}


def strategy(tp: Any) -> st.SearchStrategy:
    if tp in _SCALARS:
        return _SCALARS[tp]
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [a for a in args if a is not type(None)]
        return st.none() | strategy(inner)
    if origin in (list, set, frozenset, tuple):
        return st.lists(strategy(args[0]), max_size=3)
    if origin is dict:
        return st.dictionaries(strategy(args[0]), strategy(args[1]), max_size=3)
    if hasattr(tp, "__body__"):
        hints = typing.get_type_hints(tp)
        return st.builds(tp, **{f.name: strategy(hints[f.name]) for f in dataclasses.fields(tp)})
    raise TypeError(tp)


BODY_CLASSES = sorted(
    (obj for obj in vars(bodies).values() if isinstance(obj, type) and hasattr(obj, "__body__")),
    key=lambda cls: cls.__name__,
)


def test_the_body_classes_are_all_exported():
    names = {cls.__name__ for cls in BODY_CLASSES}
    assert {"TopicRouteData", "RegisterBrokerBody", "ClusterInfo", "KVTable", "TopicList", "DataVersion"} <= names


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda c: c.__name__)
@pytest.mark.parametrize("standard", [True, False], ids=["standard", "legacy"])
def test_every_body_round_trips(cls, standard):
    @settings(max_examples=60, deadline=None)
    @given(strategy(cls))
    def check(instance):
        data = instance.encode(standard)
        assert cls.decode(data) == instance

    check()


# ------------------------------------------------------------------ literal examples (bodies.md)

ROUTE_STANDARD = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"192.168.1.10:10911","1":"192.168.1.11:10911"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":'
    b'"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
ROUTE_LEGACY = ROUTE_STANDARD.replace(b'"0":', b"0:").replace(b'"1":', b"1:")
ROUTE = TopicRouteData(
    queue_datas=[QueueData("broker-a", 4, 4, 6, 0)],
    broker_datas=[BrokerData("DefaultCluster", "broker-a", {0: "192.168.1.10:10911", 1: "192.168.1.11:10911"})],
)


def test_route_both_forms_decode_and_encode_byte_for_byte():
    assert TopicRouteData.decode(ROUTE_STANDARD) == ROUTE
    assert TopicRouteData.decode(ROUTE_LEGACY) == ROUTE
    assert ROUTE.encode(standard_json=True) == ROUTE_STANDARD
    assert ROUTE.encode(standard_json=False) == ROUTE_LEGACY


def _go_split_broker_addrs(route_json: bytes) -> dict[str, str]:
    """What the Go client does with ``brokerAddrs``: strip braces, split on ',' then the first ':', drop quotes."""
    text = route_json.decode()
    start = text.index('"brokerAddrs":') + len('"brokerAddrs":')
    raw = text[start : text.index("}", start) + 1]
    out = {}
    for item in raw[1:-1].split(","):
        key, _, value = item.partition(":")
        out[key.replace('"', "")] = value.replace('"', "")
    return out


@pytest.mark.parametrize("standard", [True, False])
def test_route_survives_go_hand_parser(standard):
    assert _go_split_broker_addrs(ROUTE.encode(standard)) == {"0": "192.168.1.10:10911", "1": "192.168.1.11:10911"}


def test_cluster_info_example():
    text = (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"192.168.1.10:10911"},"brokerName":"broker-a",'
        b'"cluster":"DefaultCluster","enableActingMaster":false}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )
    info = ClusterInfo.decode(text)
    assert info == ClusterInfo(
        {"broker-a": BrokerData("DefaultCluster", "broker-a", {0: "192.168.1.10:10911"})},
        {"DefaultCluster": ["broker-a"]},
    )
    assert info.encode(standard_json=False) == text


def test_small_bodies_examples():
    assert TopicList.decode(b'{"topicList":["TopicTest","%RETRY%g1"]}') == TopicList(["TopicTest", "%RETRY%g1"])
    assert TopicList(["a"], "1.2.3.4:10911").encode() == b'{"brokerAddr":"1.2.3.4:10911","topicList":["a"]}'
    assert KVTable.decode(b'{"table":{"k":"v"}}') == KVTable({"k": "v"})
    assert DataVersion.decode(b'{"counter":3,"stateVersion":0,"timestamp":1732200000000}') == DataVersion(3, 0, 1732200000000)
    assert DataVersion(3, 0, 1732200000000).encode() == b'{"counter":3,"stateVersion":0,"timestamp":1732200000000}'


REGISTER = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":5,"stateVersion":0,'
    b'"timestamp":1732200000000},"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,'
    b'"readQueueNums":4,"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}'
)


def test_register_broker_json_example():
    body = RegisterBrokerBody.decode(REGISTER)
    wrapper = body.topic_config_serialize_wrapper
    assert wrapper.data_version == DataVersion(5, 0, 1732200000000)
    assert wrapper.topic_config_table == {"TopicTest": TopicConfig("TopicTest", 4, 4, 6, "SINGLE_TAG", 0, False, {})}
    assert body.filter_server_list == []
    assert body.encode() == REGISTER


def test_register_broker_accepts_5x_mapping_members():
    text = REGISTER[:-2] + b',"topicQueueMappingInfoMap":{},"topicQueueMappingDetailMap":{},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1}}}'
    wrapper = RegisterBrokerBody.decode(text).topic_config_serialize_wrapper
    assert wrapper.mapping_data_version == DataVersion(0, 0, 1)
    assert wrapper.topic_queue_mapping_info_map == {}


def test_topic_config_text_form():
    config = TopicConfig("T", 8, 4, 6, "SINGLE_TAG", attributes={"+message.type": "NORMAL"})
    assert config.to_text() == 'T 8 4 6 SINGLE_TAG {"+message.type":"NORMAL"}'
    assert TopicConfig.from_text(config.to_text()) == config
    assert TopicConfig.from_text("T 8 4 6 SINGLE_TAG ") == TopicConfig("T", 8, 4, 6, "SINGLE_TAG")
    with pytest.raises(BodyError, match="at least 5"):
        TopicConfig.from_text("T 8 4")


_topic_names = st.text(alphabet="abcdefgXYZ0123456789_-%|", min_size=1, max_size=12)
_topic_configs = st.builds(
    TopicConfig,
    topic_name=_topic_names,
    read_queue_nums=st.integers(0, 1024),
    write_queue_nums=st.integers(0, 1024),
    perm=st.integers(0, 7),
    topic_filter_type=st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
    attributes=st.dictionaries(st.text(alphabet="abc.+-", max_size=6), st.text(alphabet="xyz", max_size=5), max_size=2),
)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(_topic_configs, max_size=6, unique_by=lambda c: c.topic_name),
    st.builds(DataVersion, st.integers(0, 2**40), st.integers(0, 9), st.integers(0, 2**42)),
    st.lists(st.text(max_size=10), max_size=2),
)
def test_compressed_register_broker_body_round_trips(configs, version, filters):
    body = RegisterBrokerBody(TopicConfigSerializeWrapper({c.topic_name: c for c in configs}, version), filters)
    data = body.encode(compressed=True)
    assert data[:1] == b"\x78"  # a zlib stream, as Java's Deflater writes
    assert RegisterBrokerBody.decode(data, compressed=True) == body


def test_compressed_register_broker_body_without_the_5x_mapping_count():
    """4.x brokers stop after the filter-server list; the reader must not require the mapping count."""
    dv = b'{"counter":1,"stateVersion":0,"timestamp":2}'
    topic = b"T 4 4 6 SINGLE_TAG {}"
    filters = b"[]"
    raw = b"".join(len(x).to_bytes(4, "big") + x if x is not None else b"" for x in (dv,)) + (1).to_bytes(4, "big")
    raw += len(topic).to_bytes(4, "big") + topic + len(filters).to_bytes(4, "big") + filters
    body = RegisterBrokerBody.decode(zlib.compress(raw), compressed=True)
    assert body.topic_config_serialize_wrapper.topic_config_table == {"T": TopicConfig("T", 4, 4, 6, "SINGLE_TAG")}
    assert body.topic_config_serialize_wrapper.data_version == DataVersion(1, 0, 2)


def test_compressed_register_broker_body_garbage():
    with pytest.raises(BodyError, match="zlib"):
        RegisterBrokerBody.decode(b"not zlib", compressed=True)
    with pytest.raises(BodyError, match="overruns"):
        RegisterBrokerBody.decode(zlib.compress(b"\x00\x00\x01\x00{}"), compressed=True)


# ------------------------------------------------------------------ leniency and errors


def test_numbers_and_booleans_as_strings_are_accepted():
    data = b'{"queueDatas":[{"brokerName":"b","perm":"6","readQueueNums":"4","writeQueueNums":4}],"brokerDatas":[{"brokerAddrs":{"0":"a"},"enableActingMaster":"true"}]}'
    route = TopicRouteData.decode(data)
    assert route.queue_datas[0].perm == 6 and route.queue_datas[0].read_queue_nums == 4
    assert route.broker_datas[0].enable_acting_master is True


def test_nulls_and_unknown_fields_fall_back_to_defaults():
    route = TopicRouteData.decode(b'{"queueDatas":null,"brokerDatas":[{"brokerName":null,"x":1}],"topicSynFlag":3}')
    assert route == TopicRouteData(broker_datas=[BrokerData()])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"queueDatas":[{"perm":"rw"}]}', r"queueDatas\[0\]\.perm"),
        (b'{"queueDatas":5}', r"queueDatas must be array"),
        (b'{"brokerDatas":[{"brokerAddrs":{"master":"x"}}]}', r"brokerAddrs"),
        (b"[1,2]", r"must be object"),
        (b"", r"empty"),
        (b"{oops", r"not JSON"),
    ],
)
def test_bad_bodies_name_the_problem(data, message):
    with pytest.raises(BodyError, match=message) as info:
        TopicRouteData.decode(data)
    assert "TopicRouteData" in str(info.value) or "JSON" in str(info.value)


def test_fastjson_roundtrip_of_encoded_body_matches_to_json():
    assert fastjson.loads(ROUTE.encode()) == fastjson.loads(ROUTE_STANDARD)


# ------------------------------------------------------------------ client bodies (bodies.md §2, §6, §10, §12)


JAVA_HEARTBEAT = (
    b'{"clientID":"192.168.1.5@4211#92871234567","consumerDataSet":[{"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    b'"consumeType":"CONSUME_PASSIVELY","groupName":"g1","messageModel":"CLUSTERING","subscriptionDataSet":[{'
    b'"classFilterMode":false,"codeSet":[2598919,2598920],"expressionType":"TAG","subString":"TagA || TagB",'
    b'"subVersion":1732200000123,"tagsSet":["TagA","TagB"],"topic":"TopicTest"},{"classFilterMode":false,"codeSet":[],'
    b'"expressionType":"TAG","subString":"*","subVersion":1732200000124,"tagsSet":[],"topic":"%RETRY%g1"}],'
    b'"unitMode":false}],"heartbeatFingerprint":0,"producerDataSet":[{"groupName":"CLIENT_INNER_PRODUCER"}],'
    b'"withoutSub":false}'
)
GO_HEARTBEAT = (
    b'{"clientID":"192.168.1.5@4211","producerDataSet":[{"groupName":"pg"}],"consumerDataSet":[{"groupName":"g1",'
    b'"consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING","consumeFromWhere":"CONSUME_FROM_LAST_OFFSET",'
    b'"subscriptionDataSet":[{"classFilterMode":false,"topic":"TopicTest","subString":"TagA||TagB","tagsSet":["TagA",'
    b'"TagB"],"codeSet":["2598919","2598920"],"subVersion":1732200000123456789,"expressionType":"TAG"}],"unitMode":false}]}'
)


def test_java_heartbeat_example():
    hb = HeartbeatData.decode(JAVA_HEARTBEAT)
    assert hb.client_id == "192.168.1.5@4211#92871234567"
    assert hb.producer_data_set == [ProducerData("CLIENT_INNER_PRODUCER")]
    (consumer,) = hb.consumer_data_set
    assert (consumer.group_name, consumer.consume_type, consumer.message_model, consumer.consume_from_where) == (
        "g1", "CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    assert consumer.subscription_data_set[0] == SubscriptionData(
        "TopicTest", "TagA || TagB", ["TagA", "TagB"], [2598919, 2598920], 1732200000123, "TAG", False)
    assert consumer.subscription_data_set[1].topic == "%RETRY%g1"
    assert hb.encode() == JAVA_HEARTBEAT  # fastjson's alphabetical, compact form


def test_go_heartbeat_example_with_quoted_code_set():
    hb = HeartbeatData.decode(GO_HEARTBEAT)
    assert hb.client_id == "192.168.1.5@4211"
    assert hb.producer_data_set == [ProducerData("pg")]
    sub = hb.consumer_data_set[0].subscription_data_set[0]
    assert sub.code_set == [2598919, 2598920]
    assert sub.sub_version == 1732200000123456789
    assert (hb.heartbeat_fingerprint, hb.without_sub) == (0, False)


def test_go_nil_slices_arrive_as_null():
    hb = HeartbeatData.decode(b'{"clientID":"c","producerDataSet":null,"consumerDataSet":[{"groupName":"g","subscriptionDataSet":[{"topic":"T","tagsSet":null,"codeSet":null,"expressionType":""}]}]}')
    sub = hb.consumer_data_set[0].subscription_data_set[0]
    assert (hb.producer_data_set, sub.tags_set, sub.code_set, sub.expression_type) == ([], [], [], "")


def test_heartbeat_with_bad_code_set_is_rejected_with_its_path():
    with pytest.raises(BodyError, match=r"codeSet\[0\]"):
        HeartbeatData.decode(b'{"consumerDataSet":[{"subscriptionDataSet":[{"codeSet":["TagA"]}]}]}')


def test_consumer_connection_example():
    text = (
        b'{"connectionSet":[{"clientAddr":"192.168.1.5:53412","clientId":"192.168.1.5@4211","language":"JAVA","version":479}],'
        b'"consumeFromWhere":"CONSUME_FROM_LAST_OFFSET","consumeType":"CONSUME_PASSIVELY","messageModel":"CLUSTERING",'
        b'"subscriptionTable":{"TopicTest":{"classFilterMode":false,"codeSet":[],"expressionType":"TAG","subString":"*",'
        b'"subVersion":1732200000123,"tagsSet":[],"topic":"TopicTest"}}}'
    )
    conn = ConsumerConnection.decode(text)
    assert conn.connection_set == [Connection("192.168.1.5@4211", "192.168.1.5:53412", "JAVA", 479)]
    assert conn.subscription_table["TopicTest"] == SubscriptionData("TopicTest", "*", [], [], 1732200000123)
    assert conn.encode() == text
    assert ProducerConnection(conn.connection_set).encode().startswith(b'{"connectionSet":[{"clientAddr"')


MQ0 = MessageQueue("TopicTest", "broker-a", 0)
MQ1 = MessageQueue("TopicTest", "broker-a", 1)


def test_message_queue_json_and_hashing():
    assert MQ0.encode() == b'{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}'
    assert {MQ0: 1}[MessageQueue("TopicTest", "broker-a", 0)] == 1
    assert MessageQueue.decode(b'{"topic":"TopicTest","brokerName":"broker-a","queueId":0}') == MQ0


def test_topic_stats_table_example():
    text = (
        b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:{"lastUpdateTimestamp":1732200000000,'
        b'"maxOffset":120,"minOffset":0},{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:{"lastUpdateTimestamp":0,'
        b'"maxOffset":0,"minOffset":0}},"topicPutTps":0.0}'
    )
    table = TopicStatsTable.decode(text)
    assert table == TopicStatsTable({MQ0: TopicOffset(0, 120, 1732200000000), MQ1: TopicOffset(0, 0, 0)}, 0.0)
    assert table.encode() == text


def test_consume_stats_example():
    text = (
        b'{"consumeTps":0.0,"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:{"brokerOffset":120,'
        b'"consumerOffset":100,"lastTimestamp":1732200000000,"pullOffset":110}}}'
    )
    stats = ConsumeStats.decode(text)
    assert stats == ConsumeStats({MQ0: OffsetWrapper(120, 100, 110, 1732200000000)}, 0.0)
    assert stats.encode() == text
    assert stats.encode(standard_json=False) == text


RESET = b'{"offsetTable":{{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}:57,{"brokerName":"broker-a","queueId":1,"topic":"TopicTest"}:60}}'


def _go_parse_reset_offset(data: bytes) -> dict[tuple, int]:
    """The Go client's hand parser for the fastjson form: drop '{{' and the last '}', split on ',{' then '}:'."""
    text = data.decode()
    raw = text[len('{"offsetTable":') : -1]
    out = {}
    for piece in raw[2:-1].split(",{"):
        mq_text, _, offset = piece.partition("}:")
        mq = fastjson.loads("{" + mq_text + "}")
        out[(mq["topic"], mq["brokerName"], mq["queueId"])] = int(offset)
    return out


def test_reset_offset_body_example_and_go_hand_parser():
    body = ResetOffsetBody.decode(RESET)
    assert body == ResetOffsetBody({MQ0: 57, MQ1: 60})
    assert body.encode() == RESET
    assert _go_parse_reset_offset(body.encode()) == {("TopicTest", "broker-a", 0): 57, ("TopicTest", "broker-a", 1): 60}


def test_reset_offset_body_gson_and_string_key_forms_are_read():
    gson = b'{"offsetTable":[[{"topic":"TopicTest","brokerName":"broker-a","queueId":0},57]]}'
    assert ResetOffsetBody.decode(gson) == ResetOffsetBody({MQ0: 57})
    browser = b'{"offsetTable":{"{\\"brokerName\\":\\"broker-a\\",\\"queueId\\":0,\\"topic\\":\\"TopicTest\\"}":57}}'
    assert ResetOffsetBody.decode(browser) == ResetOffsetBody({MQ0: 57})
    with pytest.raises(BodyError, match="MessageQueue"):
        ResetOffsetBody.decode(b'{"offsetTable":{{"queueId":"x"}:1}}')


def test_reset_offset_body_for_c():
    body = ResetOffsetBodyForC.from_reset(ResetOffsetBody({MQ0: 57}))
    assert body.encode() == b'{"offsetTable":[{"brokerName":"broker-a","offset":57,"queueId":0,"topic":"TopicTest"}]}'


def test_go_consumer_status_body_written_by_hand():
    body = GetConsumerStatusBody.decode(b'{"messageQueueTable":{{"topic":"T","brokerName":"b","queueId":0}:12}}')
    assert body.message_queue_table == {MessageQueue("T", "b", 0): 12}
    nested = GetConsumerStatusBody(consumer_table={"c1": {MQ0: 5}})
    assert GetConsumerStatusBody.decode(nested.encode()) == nested


def test_lock_bodies_example():
    req = LockBatchRequestBody.decode(
        b'{"consumerGroup":"g1","clientId":"192.168.1.5@4211","onlyThisBroker":false,"mqSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}]}'
    )
    assert req == LockBatchRequestBody("g1", "192.168.1.5@4211", False, [MQ0])
    assert LockBatchResponseBody([MQ0]).encode() == b'{"lockOKMQSet":[{"brokerName":"broker-a","queueId":0,"topic":"TopicTest"}]}'
    assert LockBatchRequestBody.decode(b'{"consumerGroup":"g1","clientId":"c","mqSet":[]}').only_this_broker is False


def test_check_client_body_example():
    body = CheckClientRequestBody.decode(
        b'{"clientId":"c","group":"g1","namespace":null,"subscriptionData":{"classFilterMode":false,"codeSet":[],'
        b'"expressionType":"SQL92","subString":"a > 5","subVersion":1,"tagsSet":[],"topic":"TopicTest"}}'
    )
    assert body.namespace is None
    assert body.subscription_data == SubscriptionData("TopicTest", "a > 5", [], [], 1, "SQL92")


def test_subscription_group_defaults_and_wrapper():
    config = SubscriptionGroupConfig.decode(b'{"groupName":"g1"}')
    assert (config.consume_enable, config.retry_queue_nums, config.retry_max_times, config.broker_id) == (True, 1, 16, 0)
    assert config.which_broker_when_consume_slowly == 1 and config.consume_timeout_minute == 15
    assert config.group_retry_policy == {"type": "CUSTOMIZED"}
    wrapper = SubscriptionGroupWrapper({"g1": config}, {}, DataVersion(1, 0, 2))
    data = wrapper.encode()
    assert json.loads(data)["subscriptionGroupTable"]["g1"]["retryMaxTimes"] == 16  # standard JSON for Go
    assert SubscriptionGroupWrapper.decode(data) == wrapper


def test_consumer_data_defaults():
    assert ConsumerData.decode(b"{}") == ConsumerData()


# ------------------------------------------------------------------ hostile input: only BodyError, never a crash

_any_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(["offsetTable", "queueDatas", "brokerDatas", "brokerAddrs", "codeSet", "table", "x", "0"]), inner, max_size=3),
    max_leaves=10,
)


@pytest.mark.parametrize("cls", BODY_CLASSES, ids=lambda c: c.__name__)
def test_hostile_bodies_raise_body_error_only(cls):
    @settings(max_examples=40, deadline=None)
    @given(st.binary(max_size=40) | _any_json.map(lambda v: fastjson.dumps(v)))
    def check(data):
        try:
            cls.decode(data)
        except BodyError:
            pass

    check()


def test_deep_nesting_is_a_body_error():
    with pytest.raises(BodyError):
        TopicRouteData.decode(b"[" * 100000)
    with pytest.raises(BodyError):
        TopicRouteData.decode(b"{0:" * 100000)


def test_consumer_running_info_as_go_writes_it():
    from ferrymq.wire.bodies import ConsumerRunningInfo, ConsumeStatus, ProcessQueueInfo

    text = (
        b'{"properties":{"PROP_CONSUME_TYPE":"CONSUME_PASSIVELY","PROP_CONSUMER_START_TIMESTAMP":1732200000000},'
        b'"statusTable":{"T":{"pullRT":1.5,"pullTPS":2,"consumeRT":0,"consumeOKTPS":0,"consumeFailedTPS":0,"consumeFailedMsgs":0}},'
        b'"subscriptionSet":[{"topic":"T","subString":"*","tagsSet":[],"codeSet":[],"subVersion":1,"expressionType":"TAG","classFilterMode":false}],'
        b'"mqTable":{{"topic":"T","brokerName":"b","queueId":0}:{"commitOffset":5,"locked":false,"droped":false}}}'
    )
    info = ConsumerRunningInfo.decode(text)
    assert info.properties == {"PROP_CONSUME_TYPE": "CONSUME_PASSIVELY", "PROP_CONSUMER_START_TIMESTAMP": "1732200000000"}
    assert info.status_table == {"T": ConsumeStatus(pull_rt=1.5, pull_tps=2.0)}
    assert info.mq_table == {MessageQueue("T", "b", 0): ProcessQueueInfo(commit_offset=5)}
    assert info.subscription_set == [SubscriptionData("T", "*", [], [], 1)]
    assert b'"pullRT":1.5' in info.encode() and b'{{"brokerName":"b","queueId":0,"topic":"T"}:{' in info.encode()


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b'{"offsetTable":{"":false}}', r"offsetTable"),
        (b'{"offsetTable":{{"topic":"T"}:{"brokerOffset":"x"}}}', r'offsetTable\.\{"topic":"T"\}\.brokerOffset'),
        (b'{"offsetTable":[[{"topic":"T"},5]]}', r"offsetTable\[0\]\[1\]"),
        (b'{"offsetTable":[[{"topic":"T"}]]}', r"offsetTable\[0\]"),
    ],
)
def test_message_queue_keyed_values_are_validated(data, message):
    with pytest.raises(BodyError, match=message):
        ConsumeStats.decode(data)
