"""``ferrymq admin``: option parsing, mqadmin's text formats (checked against lines mqadmin 5.5.0
printed), and each command against a name server and broker running in the SDK's reactor thread."""

from __future__ import annotations

import io
import time

import orjson
import pytest

from ferrymq.sdk import BlockingProducer, BlockingPushConsumer, Message, MessageQueue, reactor_thread
from ferrymq.sdk.admin_cli import main as admin_main
from ferrymq.sdk.admin_cli.cluster import (
    BASE_HEADER,
    BASE_ROW,
    all_addrs,
    base_columns,
    broker_name_of,
    master_addrs,
    masters_and_slaves,
    more_columns,
)
from ferrymq.sdk.admin_cli.command import COMMANDS, CommandError, command
from ferrymq.sdk.admin_cli.consumer import consume_stats_text, group_row, subscription_group, subscription_group_text
from ferrymq.sdk.admin_cli.java_text import (
    capacity_after_puts,
    capacity_of_put_all,
    fastjson_pretty,
    hashmap_order,
    human_time2,
    java_double,
    java_hashmap,
    java_map,
    mq_hash,
    perm_string,
)
from ferrymq.sdk.admin_cli.message import MessageTrack, direct_result_text, key_table, message_text, send_result_text
from ferrymq.sdk.admin_cli.offset import Rollback, parse_timestamp, reset_table, rollback_text
from ferrymq.sdk.admin_cli.topic import parse_attributes, route_json, route_list, topic_config_text
from ferrymq.wire.bodies import (
    BrokerData,
    ClusterInfo,
    Connection,
    ConsumerConnection,
    ConsumeStats,
    OffsetWrapper,
    QueueData,
    SubscriptionGroupConfig,
    TopicRouteData,
)
from ferrymq.wire.codes import CURRENT_VERSION_DESC
from ferrymq.wire.message import MessageExt

# ---------------------------------------------------------------- what mqadmin 5.5.0 printed

#: ``mqadmin clusterList`` of a FerryMQ broker just started
MQADMIN_CLUSTER_LIST = (
    '#Cluster Name           #Broker Name            #BID  #Addr                  #Version              #InTPS(LOAD)                   #OutTPS(LOAD)  #Timer(Progress)        #PCWait(ms)  #Hour         #SPACE    #ACTIVATED\n'
    'FeatureCluster          feature-broker-a        0     127.0.0.1:26942        V5_5_0                 0.00(0,0ms)               0.00(0,0ms|N,Nms)  0-0(0.0w, 0.0, 0.0)               0  0.00          0.0706          true\n'
)
#: ``mqadmin topicRoute -t ProbeT`` (3 read / 3 write queues)
MQADMIN_ROUTE_JSON = (
    '{\n'
    '\t"brokerDatas":[\n'
    '\t\t{\n'
    '\t\t\t"brokerAddrs":{\n'
    '\t\t\t\t0:"127.0.0.1:14155"\n'
    '\t\t\t},\n'
    '\t\t\t"brokerName":"feature-broker-a",\n'
    '\t\t\t"cluster":"FeatureCluster",\n'
    '\t\t\t"enableActingMaster":false\n'
    '\t\t}\n'
    '\t],\n'
    '\t"filterServerTable":{},\n'
    '\t"queueDatas":[\n'
    '\t\t{\n'
    '\t\t\t"brokerName":"feature-broker-a",\n'
    '\t\t\t"perm":6,\n'
    '\t\t\t"readQueueNums":3,\n'
    '\t\t\t"topicSysFlag":0,\n'
    '\t\t\t"writeQueueNums":3\n'
    '\t\t}\n'
    '\t]\n'
    '}\n'
)
#: ``mqadmin topicRoute -t ProbeT -l``
MQADMIN_ROUTE_LIST = (
    '#ClusterName                                  #BrokerName                      #BrokerAddrs                                       #ReadQueue #WriteQueue #Perm\n'
    'FeatureCluster                                feature-broker-a                 {0=127.0.0.1:14155}                                3          3           6    \n'
    '--------------------------------------------------------------------------------------------------------------------------------------------------------------\n'
    'Total:                                        1                                                                                   3          3                \n'
)
#: ``mqadmin updateTopic -b ... -t ProbeT -r 3 -w 3``, its second line
MQADMIN_TOPIC_CONFIG = ("TopicConfig [topicName=ProbeT, readQueueNums=3, writeQueueNums=3, perm=RW-, "
                        "topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false, attributes={}]")

#: ``mqadmin updateSubGroup -b ... -g g3 -p <an exponential policy>``, its second line
MQADMIN_SUB_GROUP_G3 = (
    'SubscriptionGroupConfig{groupName=g3, consumeEnable=true, consumeFromMinEnable=false, consumeBroadcastEnable=f'
    'alse, consumeMessageOrderly=false, retryQueueNums=1, retryMaxTimes=16, groupRetryPolicy=GroupRetryPolicy{type=EXPONENTIAL, exponentialRetryPolicy=ExponentialRetryPolicy{initial=5000, max=7200000, multiplier=2}, customizedRetryPolicy=null}, brokerId=0, whichBrokerWhenConsumeSlowly=1, notifyConsumerIdsChangedEnable=true, groupSysFlag=0, consumeTimeoutMinute=15, subscriptionDataSet=null, attributes={}}'
)
#: ``mqadmin updateSubGroup -c ... -g g2`` with every option given, its second line
MQADMIN_SUB_GROUP_G2 = (
    'SubscriptionGroupConfig{groupName=g2, consumeEnable=false, consumeFromMinEnable=true, consumeBroadcastEnable=t'
    'rue, consumeMessageOrderly=true, retryQueueNums=2, retryMaxTimes=5, groupRetryPolicy=GroupRetryPolicy{type=CUSTOMIZED, exponentialRetryPolicy=null, customizedRetryPolicy=null}, brokerId=1, whichBrokerWhenConsumeSlowly=2, notifyConsumerIdsChangedEnable=false, groupSysFlag=0, consumeTimeoutMinute=15, subscriptionDataSet=null, attributes={+x=y}}'
)

PROBE_ROUTE = TopicRouteData(
    queue_datas=[QueueData("feature-broker-a", 3, 3, 6, 0)],
    broker_datas=[BrokerData("FeatureCluster", "feature-broker-a", {0: "127.0.0.1:14155"})],
)


def test_cluster_list_row_is_mqadmins():
    """The header and a row built from runtime info match mqadmin's line character for character."""
    stats = {"brokerVersionDesc": "V5_5_0", "putTps": "0.0 0.0 0.0", "getTransferredTps": "0.0 0.0 0.0",
             "sendThreadPoolQueueSize": "0", "sendThreadPoolQueueHeadWaitTimeMills": "0",
             "pullThreadPoolQueueSize": "0", "pullThreadPoolQueueHeadWaitTimeMills": "0",
             "pageCacheLockTimeMills": "0", "commitLogDiskRatio": "0.070600", "brokerActive": "true",
             "earliestMessageTimeStamp": "1000000", "timerReadBehind": "0", "timerOffsetBehind": "0",
             "timerCongestNum": "0", "timerEnqueueTps": "0.0", "timerDequeueTps": "0.0"}
    text = BASE_HEADER % ("#Cluster Name", "#Broker Name", "#BID", "#Addr", "#Version", "#InTPS(LOAD)",
                          "#OutTPS(LOAD)", "#Timer(Progress)", "#PCWait(ms)", "#Hour", "#SPACE", "#ACTIVATED")
    text += BASE_ROW % ("FeatureCluster", "feature-broker-a", 0, "127.0.0.1:26942",
                        *base_columns(stats, now=1000.0))
    assert text == MQADMIN_CLUSTER_LIST


def test_cluster_list_row_of_a_silent_broker():
    """A broker that does not answer keeps its row: empty values, zero rates, not activated."""
    assert base_columns(None, now=0.0) == ("", "     0.00(,ms)", "     0.00(,ms|,ms)", "0-0(0.0w, 0.0, 0.0)", "",
                                           "0.00", "0.0000", "false")


def test_cluster_list_hours_and_rates():
    stats = {"putTps": "12.5 10.0 9.0", "getTransferredTps": "3.25", "earliestMessageTimeStamp": "0",
             "commitLogDiskRatio": "0.5", "brokerActive": "true"}
    version, in_tps, out_tps, _, page_cache, hours, space, active = base_columns(stats, now=7200.0)
    assert (version, in_tps, page_cache) == ("null", "    12.50(null,nullms)", "null")
    assert out_tps == "     3.25(null,nullms|N,Nms)"
    assert (hours, space, active) == ("2.00", "0.5000", "true")


def test_cluster_list_more_stats():
    stats = {"msgPutTotalYesterdayMorning": "10", "msgPutTotalTodayMorning": "15", "msgPutTotalTodayNow": "22",
             "msgGetTotalYesterdayMorning": "1", "msgGetTotalTodayMorning": "4", "msgGetTotalTodayNow": "4"}
    assert more_columns(stats) == (5, 3, 7, 0)
    assert more_columns(None) == more_columns({}) == (0, 0, 0, 0)


def test_route_json_is_fastjsons():
    assert route_json(PROBE_ROUTE) + "\n" == MQADMIN_ROUTE_JSON


def test_route_list_is_mqadmins():
    assert route_list(PROBE_ROUTE) == MQADMIN_ROUTE_LIST


def test_topic_config_text_is_mqadmins():
    assert topic_config_text("ProbeT", 3, 3, 6, 0, False, {}) == MQADMIN_TOPIC_CONFIG
    assert topic_config_text("T", 8, 8, 4, 3, True, {"+a": "b", "-c": ""}).endswith(
        "perm=R--, topicFilterType=SINGLE_TAG, topicSysFlag=3, order=true, attributes={+a=b, -c=}]")


def test_subscription_group_text_is_mqadmins():
    """The group updateSubGroup builds from its options, echoed as mqadmin echoes it."""
    policy = '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}}'
    parse = COMMANDS["updateSubGroup"].parse
    g3 = subscription_group(parse(["-b", "h:1", "-g", "g3", "-p", policy]))
    assert subscription_group_text(g3) == MQADMIN_SUB_GROUP_G3
    g2 = subscription_group(parse(["-c", "C", "-g", "g2", "-s", "false", "-m", "true", "-d", "true", "-o", "true",
                                   "-q", "2", "-r", "5", "-i", "1", "-w", "2", "-a", "false", "--attributes", "+x=y"]))
    assert subscription_group_text(g2) == MQADMIN_SUB_GROUP_G2
    assert (g2.retry_queue_nums, g2.broker_id, g2.attributes) == (2, 1, {"+x": "y"})
    customized = subscription_group(parse(["-b", "h:1", "-g", "g", "-p", '{"customizedRetryPolicy":{}}']))
    assert "customizedRetryPolicy=CustomizedRetryPolicy{next=[1000, 5000, 10000, 30000, 60000," in \
        subscription_group_text(customized)


def test_fastjson_pretty_layout():
    assert fastjson_pretty({"a": [], "b": {}, "c": [1, True, None, "x\"y"], 7: {"k": 1.5}}) == (
        '{\n\t"a":[],\n\t"b":{},\n\t"c":[\n\t\t1,\n\t\ttrue,\n\t\tnull,\n\t\t"x\\"y"\n\t],\n\t7:{\n\t\t"k":1.5\n\t}\n}'
    )


@pytest.mark.parametrize(("value", "text"), [
    (0.0, "0.0"), (1.5, "1.5"), (0.001, "0.001"), (9999999.0, "9999999.0"), (1e7, "1.0E7"),
    (12345678.9, "1.23456789E7"), (0.0001, "1.0E-4"), (-2.5e20, "-2.5E20"), (float("nan"), "NaN"),
])
def test_java_double(value, text):
    assert java_double(value) == text


def test_small_java_texts(monkeypatch):
    assert [perm_string(p) for p in (2, 4, 6, 7, 0)] == ["-W-", "R--", "RW-", "RWX", "---"]
    assert java_map({0: "a:1", 1: "b:2"}) == "{0=a:1, 1=b:2}" and java_map({}) == "{}"
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    try:
        assert human_time2(1_795_642_328_437) == "2026-11-25 21:32:08,437"
    finally:
        monkeypatch.undo()
        time.tzset()


def test_parse_attributes():
    assert parse_attributes("+a=b,-c,+d=e") == {"+a": "b", "-c": "", "+d": "e"}
    assert parse_attributes("") == {}
    for bad, why in (("a=b", "add/alter"), ("c", "delete"), ("+a=1,+a=2", "duplication")):
        with pytest.raises(CommandError, match=why):
            parse_attributes(bad)


# ---------------------------------------------------------------- cluster lookups

CLUSTERS = ClusterInfo(
    broker_addr_table={
        "b": BrokerData("C1", "b", {0: "h:2", 1: "h:3"}),
        "a": BrokerData("C1", "a", {0: "h:1"}),
        "orphan": BrokerData("C2", "orphan", {2: "h:9"}),
    },
    cluster_addr_table={"C1": ["b", "a"], "C2": ["orphan"]},
)


def test_cluster_lookups():
    assert master_addrs(CLUSTERS, "C1") == ["h:1", "h:2"]
    assert master_addrs(CLUSTERS, "C2") == []
    assert all_addrs(CLUSTERS, "C1") == ["h:1", "h:2", "h:3"]
    assert masters_and_slaves(CLUSTERS, "C1") == {"h:1": [], "h:2": ["h:3"]}
    assert masters_and_slaves(CLUSTERS, "C2") == {None: ["h:9"]}
    assert master_addrs(CLUSTERS, "nope") is all_addrs(CLUSTERS, "nope") is masters_and_slaves(CLUSTERS, "nope") is None
    assert broker_name_of(CLUSTERS, "h:3") == "b"
    with pytest.raises(CommandError, match="h:7"):
        broker_name_of(CLUSTERS, "h:7")


# ---------------------------------------------------------------- command lines


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = admin_main(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def test_options_use_mqadmins_letters_and_names():
    opts = COMMANDS["topicRoute"].parse(["-t", " T1 ", "-l", "-n", "h:1"])
    assert (opts.topic, opts.list, opts.namesrvAddr) == ("T1", True, "h:1")
    opts = COMMANDS["updateTopic"].parse(["--clusterName", "C", "--topic", "T", "--readQueueNums", "2", "-w4"])
    assert (opts.clusterName, opts.brokerAddr, opts.readQueueNums, opts.writeQueueNums) == ("C", None, "2", "4")
    assert COMMANDS["topicList"].parse(["-c"]).clusterModel is True
    assert COMMANDS["clusterList"].parse(["-c", "C"]).clusterName == "C"


@pytest.mark.parametrize(("argv", "why"), [
    (["updateTopic", "-t", "T"], "one of the arguments -b/--brokerAddr -c/--clusterName is required"),
    (["updateTopic", "-t", "T", "-b", "h:1", "-c", "C"], "not allowed with argument"),
    (["topicStatus"], "the following arguments are required: -t/--topic"),
    (["topicRoute", "-t", "T", "--top", "U"], "unrecognized arguments"),
])
def test_bad_command_lines(argv, why, capsys):
    code, _, _ = run(*argv)
    assert code == 2 and why in capsys.readouterr().err


def test_usage_lists_every_command():
    code, out, _ = run()
    assert code == 0
    for name in ("clusterList", "topicList", "topicRoute", "topicStatus", "updateTopic", "deleteTopic",
                 "getBrokerConfig", "brokerStatus", "queryMsgById", "queryMsgByKey", "resetOffsetByTime"):
        assert f"   {name:<35} {COMMANDS[name].description}\n" in out


def test_unknown_command_and_missing_name_server(monkeypatch):
    assert run("topicLsit") == (1, "", "The sub command topicLsit not exist.\n")
    monkeypatch.delenv("NAMESRV_ADDR", raising=False)
    code, _, err = run("clusterList")
    assert code == 1 and "give -n host:port or set NAMESRV_ADDR" in err
    assert run("clusterList", "-n", " ; ")[0] == 1


def test_a_command_is_declared_once():
    with pytest.raises(ValueError, match="declared twice"):
        command("topicList", "again")(lambda ctx, opts: None)


# ---------------------------------------------------------------- against a running name server and broker


def test_cluster_list_against_broker(cluster):
    code, out, err = run("clusterList", "-n", cluster.namesrv_addr)
    assert code == 0, err
    header, row, *rest = out.splitlines()
    assert rest == []
    cols = row.split()
    assert cols[:5] == [cluster.broker.config.brokerClusterName, "broker-sdk", "0", cluster.broker.addr, "V5_5_0"]
    assert len(cols) == len(MQADMIN_CLUSTER_LIST.splitlines()[1].split()) and cols[-1] == "true"
    assert header == MQADMIN_CLUSTER_LIST.splitlines()[0]


def test_topic_lifecycle_against_broker(cluster, monkeypatch):
    """updateTopic, topicRoute, topicStatus, topicList and deleteTopic on one topic, the name server named
    by NAMESRV_ADDR."""
    monkeypatch.setenv("NAMESRV_ADDR", cluster.namesrv_addr)
    broker, name = cluster.broker.addr, cluster.broker.config.brokerClusterName
    code, out, err = run("updateTopic", "-b", broker, "-t", "AdminCliT", "-r", "3", "-w", "3")
    assert (code, err) == (0, "")
    assert out == f"create topic to {broker} success.\n" + MQADMIN_TOPIC_CONFIG.replace("ProbeT", "AdminCliT") + "\n"

    code, out, err = run("topicRoute", "-t", "AdminCliT")
    route = orjson.loads(out.replace('\t\t\t\t0:"', '\t\t\t\t"0":"'))
    assert route["queueDatas"] == [{"brokerName": "broker-sdk", "perm": 6, "readQueueNums": 3, "topicSysFlag": 0,
                                    "writeQueueNums": 3}]
    assert route["brokerDatas"][0]["brokerAddrs"] == {"0": broker}

    code, out, err = run("topicStatus", "-t", "AdminCliT")
    lines = out.splitlines()
    assert code == 0 and lines[0].startswith("#Broker Name") and lines[-1] == "Topic Put TPS: 0.0"
    assert [line.split()[:4] for line in lines[1:4]] == [["broker-sdk", str(q), "0", "0"] for q in range(3)]

    assert "AdminCliT" in run("topicList")[1].splitlines()
    code, out, err = run("deleteTopic", "-c", name, "-t", "AdminCliT")
    assert (code, err) == (0, "")
    assert out == (f"delete topic [AdminCliT] from cluster [{name}] success.\n"
                   "delete topic [AdminCliT] from NameServer success.\n")
    assert "AdminCliT" not in run("topicList")[1].splitlines()


def test_update_topic_in_cluster_with_order(cluster):
    ns, name = cluster.namesrv_addr, cluster.broker.config.brokerClusterName
    code, out, err = run("updateTopic", "-n", ns, "-c", name, "-t", "AdminCliOrder", "-o", "true", "-w", "2")
    assert (code, err) == (0, "")
    assert out.splitlines()[:2] == [f"create topic to {cluster.broker.addr} success.",
                                    "set cluster orderConf. isOrder=true, orderConf=[broker-sdk:2]"]
    assert reactor_thread.call(cluster.admin.namesrv.get_kv, "ORDER_TOPIC_CONFIG", "AdminCliOrder") == "broker-sdk:2"


def test_unknown_cluster_is_mqadmins_error_line(cluster):
    code, out, _ = run("deleteTopic", "-n", cluster.namesrv_addr, "-c", "NoCluster", "-t", "x")
    assert code == 0 and out.startswith("[error] Make sure the specified clusterName exists")


def test_broker_config_and_status(cluster):
    ns, addr = cluster.namesrv_addr, cluster.broker.addr
    code, out, err = run("getBrokerConfig", "-n", ns, "-b", addr)
    lines = out.splitlines()
    assert code == 0 and lines[0] == f"============{addr}============" and lines[-1] == ""
    assert f"{'brokerName':<50}=  broker-sdk" in lines
    code, out, err = run("getBrokerConfig", "-n", ns, "-c", cluster.broker.config.brokerClusterName)
    assert out.splitlines()[0] == f"============Master: {addr}============"

    code, out, err = run("brokerStatus", "-n", ns, "-b", addr)
    keys = [line.partition(":")[0] for line in out.splitlines()]
    assert code == 0 and all(len(key) >= 32 for key in keys)
    keys = [key.rstrip() for key in keys]
    assert keys == sorted(keys) and "brokerVersionDesc" in keys
    code, out, err = run("brokerStatus", "-n", ns, "-c", cluster.broker.config.brokerClusterName)
    assert all(line.startswith(f"{addr:<24} ") for line in out.splitlines()) and out


def test_failures_are_one_line(cluster):
    code, out, err = run("topicRoute", "-n", cluster.namesrv_addr, "-t", "NoSuchTopic")
    assert (code, out) == (1, "")
    assert err.startswith("ferrymq admin topicRoute: ") and err.count("\n") == 1 and "17" in err
    code, out, err = run("updateTopic", "-n", cluster.namesrv_addr, "-b", cluster.broker.addr, "-t", "T", "-r", "x")
    assert (code, err) == (1, "ferrymq admin updateTopic: --readQueueNums must be an integer, not 'x'\n")


def test_update_sub_group_against_broker(cluster):
    ns, addr = cluster.namesrv_addr, cluster.broker.addr
    code, out, err = run("updateSubGroup", "-n", ns, "-b", addr, "-g", "admin_cli_group", "-r", "3")
    assert (code, err) == (0, "")
    first, second = out.splitlines()
    assert first == f"create subscription group to {addr} success."
    assert second.startswith("SubscriptionGroupConfig{groupName=admin_cli_group, consumeEnable=true,")
    group = reactor_thread.call(cluster.broker.ctx.groups.find, "admin_cli_group")
    assert (group.retry_max_times, group.consume_broadcast_enable) == (3, False)
    code, out, err = run("updateSubGroup", "-n", ns, "-b", addr, "-g", "g", "-p", "[1]")
    assert (code, err) == (1, "ferrymq admin updateSubGroup: --groupRetryPolicy must be a JSON object\n")


def test_update_broker_config_against_broker(cluster):
    ns, addr = cluster.namesrv_addr, cluster.broker.addr
    code, out, err = run("updateBrokerConfig", "-n", ns, "-b", addr, "-k", "flushConsumerOffsetInterval", "-v", "4321")
    assert (code, out, err) == (0, f"update broker config success, {addr}\n", "")
    code, out, err = run("updateBrokerConfig", "-n", ns, "-c", cluster.broker.config.brokerClusterName, "-k",
                         "flushConsumerOffsetInterval", "-v", "4322")
    assert (code, out) == (0, f"update broker config success, {addr}\n")
    assert f"{'flushConsumerOffsetInterval':<50}=  4322" in run("getBrokerConfig", "-n", ns, "-b", addr)[1]
    code, _, err = run("updateBrokerConfig", "-n", ns, "-k", "a", "-v", "b")
    assert code == 1 and "-b brokerAddr" in err


def test_consumer_connection_against_broker(cluster, topic):
    """consumerConnection lists a live push consumer of the group and its subscriptions; a group without
    consumers is one error line."""
    consumer = BlockingPushConsumer("admin_cli_consumers", cluster.namesrv_addr)
    consumer.subscribe(topic, "TagA || TagB")
    consumer.register_listener(lambda msgs, context: None)
    consumer.start()
    try:
        code, out, err = run("consumerConnection", "-n", cluster.namesrv_addr, "-g", "admin_cli_consumers")
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert lines[0] == f"{'#ClientId':<36} {'#ClientAddr':<22} {'#Language':<10} #Version"
        client_id, client_addr, language, version = lines[1].split()
        assert client_id == consumer.instance.client_id and client_addr.startswith("127.0.0.1:")
        assert (language, version) == ("PYTHON", CURRENT_VERSION_DESC)
        assert lines[2:5] == ["", "Below is subscription:", f"{'#Topic':<20} #SubExpression"]
        assert sorted(lines[5:7]) == sorted([f"{'%RETRY%admin_cli_consumers':<20} *", f"{topic:<20} TagA || TagB"])
        assert lines[7:] == ["", "ConsumeType: CONSUME_PASSIVELY", "MessageModel: CLUSTERING",
                             "ConsumeFromWhere: CONSUME_FROM_LAST_OFFSET"]
        code, out, err = run("consumerConnection", "-n", cluster.namesrv_addr, "-g", "admin_cli_consumers", "-b",
                             cluster.broker.addr)
        assert code == 0 and lines[1] in out.splitlines()
    finally:
        consumer.shutdown()
    code, out, err = run("consumerConnection", "-n", cluster.namesrv_addr, "-g", "nobody_here", "-b",
                         cluster.broker.addr)
    assert (code, out) == (1, "") and "CONSUMER_NOT_ONLINE" in err


def test_consume_stats_text():
    """consumerProgress -g: rows by topic, broker and queue id in mqadmin's widths, then the totals."""
    stats = ConsumeStats(offset_table={
        MessageQueue("T", "b", 1): OffsetWrapper(broker_offset=10, consumer_offset=4, pull_offset=6,
                                                 last_timestamp=1_795_642_328_437),
        MessageQueue("T", "b", 0): OffsetWrapper(broker_offset=3, consumer_offset=3, pull_offset=3),
    }, consume_tps=1.5)
    text = consume_stats_text(stats, time.gmtime)
    assert text.splitlines() == [
        f"{'#Topic':<64}  {'#Broker Name':<32}  #QID  {'#Broker Offset':<20}  {'#Consumer Offset':<20}  "
        f"{'#Diff':<20} {'#Inflight':<20}#LastTime",
        f"{'T':<64}  {'b':<32}  0     {3:<20}  {3:<20}  {0:<20} {0:<20} N/A",
        f"{'T':<64}  {'b':<32}  1     {10:<20}  {4:<20}  {6:<20} {2:<20} 2026-11-25 21:32:08",
        "", "Consume TPS: 1.50", "Consume Diff Total: 6", "Consume Inflight Total: 2",
    ]


def test_group_row():
    conn = ConsumerConnection(connection_set=[Connection("c1", "h:1", "JAVA", 513), Connection("c2", "h:2", "GO", 409)],
                              consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING")
    stats = ConsumeStats({MessageQueue("T", "b", 0): OffsetWrapper(9, 4, 4)}, consume_tps=2.7)
    assert group_row("g", stats, conn) == ("g", 2, "V4_9_8", "PUSH", "CLUSTERING", 2, 5)
    conn.consume_type = "CONSUME_ACTIVELY"
    assert group_row("g", None, conn)[3:] == ("PULL", "", 0, 0)
    assert group_row("g", None, None) == ("g", 0, "OFFLINE", "", "", 0, 0)


def test_consumer_progress_against_broker(cluster, topic):
    """A group that consumed everything: its queue row has no diff; without -g the group is listed online."""
    producer = BlockingProducer("admin_cli_progress_producer", cluster.namesrv_addr)
    producer.start()
    for i in range(3):
        producer.send(Message(topic, b"m%d" % i))
    producer.shutdown()
    received = []
    consumer = BlockingPushConsumer("admin_cli_progress", cluster.namesrv_addr)
    consumer.subscribe(topic, "*")
    consumer.register_listener(lambda msgs, context: received.extend(msgs))
    consumer.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            code, out, err = run("consumerProgress", "-n", cluster.namesrv_addr, "-g", "admin_cli_progress")
            # the consumer commits its offsets every few seconds; until then the table is empty
            if code == 0 and f"{topic} " in out and "Consume Diff Total: 0" in out:
                break
            time.sleep(0.2)
        assert (code, err) == (0, ""), err
        rows = [line.split() for line in out.splitlines() if line.startswith(topic)]
        assert [row[:5] for row in rows] == [[topic, "broker-sdk", "0", "3", "3"]], out
        assert "Consume Diff Total: 0" in out
        code, out, err = run("consumerProgress", "-n", cluster.namesrv_addr)
        row = next(line for line in out.splitlines() if line.startswith("admin_cli_progress "))
        assert row.split()[1:5] == ["1", CURRENT_VERSION_DESC, "PUSH", "CLUSTERING"]
        # -s true: the IP of the client holding each queue, as the consumer itself reports its queues
        code, out, err = run("consumerProgress", "-n", cluster.namesrv_addr, "-g", "admin_cli_progress", "-s", "true")
        assert (code, err) == (0, "")
        assert "#Client IP" in out.splitlines()[0]
        rows = [line.split() for line in out.splitlines() if line.startswith(topic)]
        assert [row[5] for row in rows] == [consumer.instance.client_id.split("@")[0]]
    finally:
        consumer.shutdown()


# ---------------------------------------------------------------- what mqadmin 5.5.0 printed: messages and offsets

#: ``mqadmin queryMsgByKey -t Probe_b29626a8 -k k1``, its header and first row
MQADMIN_KEY_TABLE = (
    "#Message ID                                        #QID                                  #Offset #IndexKey" + " " * 191
    + "\nC000020243025908665080A483950000                      0                                        0 "
    "1795647600000@Probe_b29626a8@K@k1@C000020243025908665080A483950000@0" + " " * 132 + "\n"
)
#: ``mqadmin queryMsgById -t Probe_b29626a8 -i 7F000001000028B400000000000000F7 -f UTF-8`` (TZ=UTC)
MQADMIN_MESSAGE = (
    "OffsetID:            7F000001000028B400000000000000F7\nTopic:               Probe_b29626a8\n"
    "Tags:                [TagA]\nKeys:                [k1 key1]\nQueue ID:            1\nQueue Offset:        0\n"
    "CommitLog Offset:    247\nReconsume Times:     0\nBorn Timestamp:      2026-11-25 23:31:05,274\n"
    "Store Timestamp:     2026-11-25 23:31:05,278\nBorn Host:           127.0.0.1:58738\n"
    "Store Host:          127.0.0.1:10420\nSystem Flag:         0\n"
    "Properties:          {MSG_REGION=DefaultRegion, UNIQ_KEY=C000020243025908665080A483BA0001, CLUSTER=FeatureCluster,"
    " TAGS=TagA, KEYS=k1 key1, WAIT=true, TRACE_ON=true}\n"
    "Message Body Path:   /tmp/rocketmq/msgbodys/C000020243025908665080A483BA0001\nMessage Body:        body1\n"
    "\n\nWARN: No Consumer"
)
#: ``mqadmin resetOffsetByTime -g probe_c_c54c1a -t Probe_b29626a8 -s now -f false`` (the broker's reset)
MQADMIN_RESET = (
    "#brokerName                               #queueId                                  #offset                                 \n"
    "feature-broker-a                          1                                         1                                       \n"
    "feature-broker-a                          0                                         2                                       \n"
)
#: the same with the broker resetting through consumers and none online (mqadmin sets the offsets itself)
MQADMIN_ROLLBACK = (
    "reset consumer offset by specified consumerGroup[probe_c_5b6f33], topic[Probe_09a978a6], force[false], "
    "timestamp(string)[now], timestamp(long)[1795649614834]\n"
    "#brokerName           #queueId              #brokerOffset         #consumerOffset       #timestampOffset      #resetOffset        \n"
    "feature-broker-a      1                     2                     0                     2                     0                   \n"
    "feature-broker-a      0                     1                     0                     1                     0                   \n"
)
#: ``mqadmin consumerProgress -g probe_c_c54c1a -s true``, header and first row
MQADMIN_PROGRESS_WITH_IP = (
    "#Topic                                                            #Broker Name                      #QID  #Broker Offset        #Consumer Offset      #Client IP           #Diff                #Inflight           #LastTime\n"
    "Probe_b29626a8                                                    feature-broker-a                  0     2                     2                     192.0.2.2            0                    0                    2026-11-25 23:31:05\n"
)


def _message(**kw) -> MessageExt:
    props = {"MSG_REGION": "DefaultRegion", "UNIQ_KEY": "C000020243025908665080A483BA0001", "TRACE_ON": "true",
             "CLUSTER": "FeatureCluster", "WAIT": "true", "TAGS": "TagA", "KEYS": "k1 key1"}
    fields = {"topic": "Probe_b29626a8", "body": b"body1", "properties": props, "queue_id": 1, "queue_offset": 0,
              "commitlog_offset": 247, "born_timestamp": 1_795_649_465_274, "born_host": ("127.0.0.1", 58738),
              "store_timestamp": 1_795_649_465_278, "store_host": ("127.0.0.1", 10420)}
    return MessageExt(**{**fields, **kw})


@pytest.fixture
def utc(monkeypatch):
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_message_text_is_mqadmins(utc):
    """The detail block: offset id, fields, properties in Java HashMap order (whatever order they came in)."""
    msg = _message()
    path = "/tmp/rocketmq/msgbodys/C000020243025908665080A483BA0001"
    assert message_text(msg, path, "UTF-8", []) == MQADMIN_MESSAGE
    tracks = ["MessageTrack [consumerGroup=g, trackType=CONSUMED, exceptionDesc=null]"]
    text = message_text(msg, path, None, tracks)
    assert "Message Body:" not in text and text.endswith("Message Body Path:   " + path + "\n\n\n" + tracks[0] + "\n")
    assert message_text(_message(properties={}), path, None, []).splitlines()[2:4] == \
        ["Tags:                [null]", "Keys:                [null]"]


def test_small_message_texts():
    """MessageTrack, ConsumeMessageDirectlyResult and SendResult as Java's toString writes them."""
    from ferrymq.sdk.message import SendResult, SendStatus
    from ferrymq.wire.bodies import ConsumeMessageDirectlyResult

    assert str(MessageTrack("g", "NOT_ONLINE", "CODE:206 DESC:x")) == \
        "MessageTrack [consumerGroup=g, trackType=NOT_ONLINE, exceptionDesc=CODE:206 DESC:x]"
    assert str(MessageTrack("g", "PULL")) == "MessageTrack [consumerGroup=g, trackType=PULL, exceptionDesc=null]"
    assert direct_result_text(ConsumeMessageDirectlyResult(consume_result="CR_SUCCESS", spent_time_mills=3)) == \
        "ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS, remark=null, spentTimeMills=3]"
    result = SendResult(SendStatus.SEND_OK, "U1", "7F00", MessageQueue("T", "b", 2), 7)
    assert send_result_text(result) == ("SendResult [sendStatus=SEND_OK, msgId=U1, offsetMsgId=7F00, messageQueue="
                                        "MessageQueue [topic=T, brokerName=b, queueId=2], queueOffset=7, recallHandle=null]")


def test_key_table_is_mqadmins():
    msg = _message(properties={"UNIQ_KEY": "C000020243025908665080A483950000", "KEYS": "k1 key0"}, queue_id=0,
                   commitlog_offset=0, store_timestamp=1_795_649_465_258)
    assert key_table([msg], "Probe_b29626a8", "K", "k1") == MQADMIN_KEY_TABLE


def test_java_hashmap_order():
    """HashMap walks buckets (hash with its high half folded in) in order; a bucket in insertion order."""
    props = {"WAIT": "true", "TAGS": "A", "KEYS": "k", "UNIQ_KEY": "U", "CLUSTER": "C", "MSG_REGION": "R",
             "TRACE_ON": "true"}
    assert java_hashmap(props, 128) == "{MSG_REGION=R, UNIQ_KEY=U, CLUSTER=C, TAGS=A, KEYS=k, WAIT=true, TRACE_ON=true}"
    queues = [MessageQueue("Probe_b29626a8", "feature-broker-a", q) for q in (0, 1)]
    assert [q.queue_id for q in hashmap_order(queues, mq_hash, capacity_of_put_all(2))] == [1, 0]
    assert mq_hash(MessageQueue("T", "b", 3)) == ((31 * (31 + 98) + 3) * 31 + 84)
    same_bucket = [1, 17, 33]  # int keys hash to themselves: all in bucket 1 of 16
    assert hashmap_order(same_bucket + [0], lambda k: k, 16) == [0, 1, 17, 33]
    assert (capacity_after_puts(12), capacity_after_puts(13), capacity_of_put_all(8)) == (16, 32, 16)


def test_reset_texts_are_mqadmins():
    queues = [MessageQueue("Probe_b29626a8", "feature-broker-a", q) for q in (1, 0)]
    assert reset_table([(queues[0], 1), (queues[1], 2)]) == MQADMIN_RESET
    rollbacks = [Rollback("feature-broker-a", 1, 2, 0, 2, 0), Rollback("feature-broker-a", 0, 1, 0, 1, 0)]
    assert rollback_text("probe_c_5b6f33", "Probe_09a978a6", False, "now", 1795649614834, rollbacks) == \
        MQADMIN_ROLLBACK


def test_parse_timestamp(utc):
    assert parse_timestamp("now", 42) == 42
    assert parse_timestamp("1577836800123", 0) == 1577836800123
    assert parse_timestamp("2020-01-01#00:00:00:007", 0) == 1577836800007
    for bad in ("yesterday", "2020-01-01 00:00:00", "2020-01-01#00:00:00:7"):
        with pytest.raises(CommandError, match="yyyy-MM-dd#HH:mm:ss:SSS"):
            parse_timestamp(bad, 0)


def test_consume_stats_text_with_client_ips():
    mq = MessageQueue("Probe_b29626a8", "feature-broker-a", 0)
    stats = ConsumeStats({mq: OffsetWrapper(2, 2, 2, last_timestamp=1_795_649_465_000),
                          MessageQueue("Probe_b29626a8", "feature-broker-a", 1): OffsetWrapper(1, 1, 1)})
    lines = consume_stats_text(stats, time.gmtime, {mq: "192.0.2.2"}).splitlines()
    assert lines[:2] == MQADMIN_PROGRESS_WITH_IP.splitlines()
    assert lines[2].split()[5] == "N/A"


# ---------------------------------------------------------------- messages and offsets against a broker


@pytest.fixture
def keyed_topic(cluster, topic):
    """Three messages with keys k1 and one of their own, tagged TagA; their send results."""
    producer = BlockingProducer("admin_cli_keys_producer", cluster.namesrv_addr)
    producer.start()
    try:
        sent = [producer.send(Message(topic, b"body%d" % i, tags="TagA", keys=["k1", f"key{i}"])) for i in range(3)]
    finally:
        producer.shutdown()
    return topic, sent


def test_query_msg_by_key_against_broker(cluster, keyed_topic):
    topic, sent = keyed_topic
    ns = cluster.namesrv_addr
    code, out, err = run("queryMsgByKey", "-n", ns, "-t", topic, "-k", "k1")
    assert (code, err) == (0, "")
    rows = [line.split() for line in out.splitlines()[1:]]
    assert [row[0] for row in rows] == [r.msg_id for r in sent]  # in commit-log order
    assert [row[3].split("@")[1:5] for row in rows] == [[topic, "K", "k1", r.msg_id] for r in sent]
    code, out, _ = run("queryMsgByKey", "-n", ns, "-t", topic, "-k", "key2", "-m", "5")
    assert [line.split()[0] for line in out.splitlines()[1:]] == [sent[2].msg_id]
    code, out, err = run("queryMsgByKey", "-n", ns, "-t", topic, "-k", "nokey")
    assert (code, out) == (1, "") and "no message" in err
    code, out, err = run("queryMsgByKey", "-n", ns, "-t", topic, "-k", "k1", "-p", "X")
    assert (code, out, err) == (0, "index type error, just support K for keys or T for tags", "")


def test_query_msg_by_id_against_broker(cluster, keyed_topic, tmp_path):
    """By unique key and by offset id: the same detail block, the body saved where the block says; a group
    that consumed the topic shows as CONSUMED, and as NOT_ONLINE once it is gone."""
    topic, sent = keyed_topic
    ns = cluster.namesrv_addr
    code, by_key, err = run("queryMsgById", "-n", ns, "-t", topic, "-i", sent[1].msg_id)
    assert (code, err) == (0, "")
    code, by_offset, err = run("queryMsgById", "-n", ns, "-t", topic, "-i", sent[1].offset_msg_id, "-f", "UTF-8")
    assert (code, err) == (0, "")
    lines = by_offset.splitlines()
    assert lines[0] == f"{'OffsetID:':<20} {sent[1].offset_msg_id}"
    assert lines[3] == f"{'Keys:':<20} [k1 key1]" and f"{'Message Body:':<20} body1" in lines
    assert by_key.endswith("\n\nWARN: No Consumer") and by_key.splitlines()[:15] == lines[:15]
    with open(f"/tmp/rocketmq/msgbodys/{sent[1].msg_id}", "rb") as f:
        assert f.read() == b"body1"
    code, both, _ = run("queryMsgById", "-n", ns, "-t", topic, "-i", f"{sent[0].msg_id},{sent[2].offset_msg_id}")
    assert both.count("OffsetID:") == 2 and "WARN: No ConsumerOffsetID:" in both
    code, out, err = run("queryMsgById", "-n", ns, "-t", topic, "-i", "C0000202430259086650FFFFFFFF0000")
    assert (code, out) == (1, "") and "no message" in err

    received = []
    consumer = BlockingPushConsumer("admin_cli_tracks", cluster.namesrv_addr)
    consumer.subscribe(topic, "*")
    consumer.register_listener(lambda msgs, context: received.extend(m.body for m in msgs))
    consumer.start()
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            out = run("queryMsgById", "-n", ns, "-t", topic, "-i", sent[0].msg_id)[1]
            if "trackType=CONSUMED" in out:
                break
            time.sleep(0.3)
        assert out.endswith("\n\nMessageTrack [consumerGroup=admin_cli_tracks, trackType=CONSUMED, exceptionDesc=null]\n")
        # -g and -d: the consumer's listener takes the message again, now
        received.clear()
        code, out, err = run("queryMsgById", "-n", ns, "-t", topic, "-i", sent[2].msg_id, "-g", "admin_cli_tracks",
                             "-d", consumer.instance.client_id)
        assert (code, err) == (0, "")
        assert out.startswith("ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS, "
                              "remark=null, spentTimeMills=") and out.endswith("]")
        assert received == [b"body2"]
    finally:
        consumer.shutdown()
    out = run("queryMsgById", "-n", ns, "-t", topic, "-i", sent[0].msg_id)[1]
    assert out.endswith("MessageTrack [consumerGroup=admin_cli_tracks, trackType=NOT_ONLINE, exceptionDesc=CODE:206 "
                        "DESC:the consumer group[admin_cli_tracks] not online]\n")


def test_query_msg_by_id_resend_against_broker(cluster, keyed_topic):
    """-s true sends the message again as stored (same unique key and keys) and prints mqadmin's lines."""
    topic, sent = keyed_topic
    ns = cluster.namesrv_addr
    assert run("queryMsgById", "-n", ns, "-t", topic, "-i", sent[0].msg_id, "-s", "false") == (0, "", "")
    code, out, err = run("queryMsgById", "-n", ns, "-t", topic, "-i", sent[0].msg_id, "-s", "true")
    assert (code, err) == (0, "")
    prefix = (f"prepare resend msg. originalMsgId={sent[0].msg_id}SendResult [sendStatus=SEND_OK, "
              f"msgId={sent[0].msg_id}, offsetMsgId=")
    assert out.startswith(prefix) and out.endswith(", recallHandle=null]")
    assert f"messageQueue=MessageQueue [topic={topic}, brokerName=broker-sdk, queueId=0], queueOffset=3" in out
    rows = run("queryMsgByKey", "-n", ns, "-t", topic, "-k", "key0")[1].splitlines()[1:]
    assert [row.split()[:3] for row in rows] == [[sent[0].msg_id, "0", "0"], [sent[0].msg_id, "0", "3"]]


def test_reset_offset_by_time_against_broker(cluster, keyed_topic):
    """The broker's reset (every queue to the time's offset), then mqadmin's own reset when the broker resets
    through consumers and none is online; -b/-q for one queue."""
    topic, _ = keyed_topic
    ns, group, offline = cluster.namesrv_addr, "admin_cli_reset", "admin_cli_reset_offline"
    for name in (group, offline):
        reactor_thread.call(cluster.admin.api.create_subscription_group, cluster.broker.addr,
                            SubscriptionGroupConfig(group_name=name))
    code, out, err = run("resetOffsetByTime", "-n", ns, "-g", group, "-t", topic, "-s", "now")
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0].startswith(f"start reset consumer offset by specified, group[{group}], topic[{topic}], "
                               "force[true], timestamp(string)[now], timestamp(long)[")
    assert [line.split() for line in lines[2:]] == [["broker-sdk", "0", "3"]]

    mq = MessageQueue(topic, "broker-sdk", 0)
    reactor_thread.call(cluster.admin.api.update_consumer_offset, cluster.broker.addr, offline, mq, 2, oneway=False)
    config = cluster.broker.ctx.config
    config.useServerSideResetOffset = False
    try:
        code, out, err = run("resetOffsetByTime", "-n", ns, "-g", offline, "-t", topic, "-s", "0", "-f", "false")
        assert (code, err) == (0, "")
        lines = out.splitlines()
        assert lines[0] == (f"reset consumer offset by specified consumerGroup[{offline}], topic[{topic}], "
                            "force[false], timestamp(string)[0], timestamp(long)[0]")
        assert [line.split() for line in lines[2:]] == [["broker-sdk", "0", "3", "2", "0", "0"]]
        assert reactor_thread.call(cluster.admin.api.query_consumer_offset, cluster.broker.addr, offline, mq) == 0
    finally:
        config.useServerSideResetOffset = True

    code, out, err = run("resetOffsetByTime", "-n", ns, "-g", offline, "-t", topic, "-s", "now", "-b",
                         cluster.broker.addr, "-q", "0", "-o", "1")
    assert (code, err) == (0, "")
    assert out.splitlines()[1] == "reset consumer offset to 1"
    assert reactor_thread.call(cluster.admin.api.query_consumer_offset, cluster.broker.addr, offline, mq) == 1
    code, _, err = run("resetOffsetByTime", "-n", ns, "-g", group, "-t", topic, "-s", "soon")
    assert code == 1 and "yyyy-MM-dd#HH:mm:ss:SSS" in err
