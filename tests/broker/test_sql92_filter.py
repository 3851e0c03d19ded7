"""SQL92 subscriptions through HEART_BEAT, CHECK_CLIENT_CONFIG and PULL_MESSAGE (Apache's codes and remarks)."""

from __future__ import annotations

from ferrymq.server.broker.sql_subscriptions import ConsumerFilterManager
from ferrymq.wire.bodies import CheckClientRequestBody, ConsumerData, HeartbeatData, SubscriptionData
from ferrymq.wire.codes import PullSysFlag, RequestCode, ResponseCode
from ferrymq.wire.message import decode_records

C = RequestCode
DISABLED = "The broker does not support consumer to filter message by SQL92"


def sql_heartbeat(bk, group, topic, expression, version=1):
    sub = SubscriptionData(topic=topic, sub_string=expression, expression_type="SQL92", sub_version=version)
    data = HeartbeatData(client_id="c1", consumer_data_set=[ConsumerData(
        group_name=group, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
        consume_from_where="CONSUME_FROM_FIRST_OFFSET", subscription_data_set=[sub])])
    assert bk.call(C.HEART_BEAT, None, data.encode()).code == 0


def fill(bk, topic="SqlT"):
    rows = [("TagA", {"a": "1", "price": "150"}), ("TagB", {"a": "5", "price": "50"}), ("TagA", {"price": "99"}),
            ("TagC", {"a": "2", "region": "hz"}), (None, {"a": "x"})]
    for i, (tag, props) in enumerate(rows):
        assert bk.send(topic, f"m{i}".encode(), tags=tag, extra_props=props).code == 0


def bodies(resp):
    assert resp.code == ResponseCode.SUCCESS, (resp.code, resp.remark)
    return [m.body.decode() for m in decode_records(resp.body)]


def check(bk, expression, expression_type="SQL92"):
    body = CheckClientRequestBody(client_id="c1", group="g", subscription_data=SubscriptionData(
        topic="SqlT", sub_string=expression, expression_type=expression_type)).encode()
    return bk.call(C.CHECK_CLIENT_CONFIG, None, body)


def test_disabled_broker_refuses_sql92_everywhere(bk):
    assert check(bk, "a > 1").code == ResponseCode.SYSTEM_ERROR and check(bk, "a > 1").remark == DISABLED
    fill(bk)
    sql_heartbeat(bk, "g", "SqlT", "a > 1")
    resp = bk.pull("g", "SqlT", suspend_ms=0)
    assert resp.code == ResponseCode.SYSTEM_ERROR and resp.remark == DISABLED


def test_check_client_config_compiles(make_bk):
    bk = make_bk(enablePropertyFilter=True)
    assert check(bk, "a BETWEEN 1 AND 3 AND TAGS IN ('TagA')").code == 0
    bad = check(bk, "a > 'x'")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and bad.remark
    assert check(bk, "a >>> 1").code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert check(bk, "TagA", expression_type="TAG").code == 0


def test_heartbeat_filter_applies_at_pull_time(make_bk):
    bk = make_bk(enablePropertyFilter=True)
    fill(bk)
    cases = {
        "a BETWEEN 1 AND 3": ["m0", "m3"],
        "TAGS = 'TagA' AND price > 100": ["m0"],
        "a IS NULL": ["m2"],
        "a IS NOT NULL AND NOT (a = 5)": ["m0", "m3"],  # "x" cannot be read as a number: no match
        "region = 'hz' OR price < 60": ["m1", "m3"],
        "TAGS IN ('TagB', 'TagC')": ["m1", "m3"],
        "a <> '1'": ["m1", "m3", "m4"],
    }
    for version, (expression, expected) in enumerate(cases.items(), start=1):
        sql_heartbeat(bk, "g", "SqlT", expression, version)
        # a Go push consumer says expressionType=TAG in the pull: the heartbeat's type decides
        resp = bk.pull("g", "SqlT", suspend_ms=0, sub_version=version, expressionType="TAG")
        assert bodies(resp) == expected, expression


def test_filter_data_missing_or_stale(make_bk):
    bk = make_bk(enablePropertyFilter=True)
    fill(bk)
    sql_heartbeat(bk, "g", "SqlT", "a > 'x'")  # does not compile: only logged at heartbeat
    resp = bk.pull("g", "SqlT", suspend_ms=0)
    assert resp.code == ResponseCode.FILTER_DATA_NOT_EXIST
    assert resp.remark == "The broker's consumer filter data is not exist!Your expression may be wrong!"
    sql_heartbeat(bk, "g", "SqlT", "a > 1", version=3)
    assert bodies(bk.pull("g", "SqlT", suspend_ms=0, sub_version=3)) == ["m1", "m3"]
    sql_heartbeat(bk, "g", "SqlT", "a > 4", version=2)  # older version: ignored
    assert bodies(bk.pull("g", "SqlT", suspend_ms=0, sub_version=3)) == ["m1", "m3"]
    sql_heartbeat(bk, "g", "SqlT", "a >", version=5)  # a newer, broken expression drops the filter
    assert bk.pull("g", "SqlT", suspend_ms=0, sub_version=5).code == ResponseCode.FILTER_DATA_NOT_EXIST
    bk.ctx.filters = ConsumerFilterManager()  # e.g. filters lost while the subscription stayed current
    bk.ctx.filters.register("g", "SqlT", "a > 1", 4)
    stale = bk.pull("g", "SqlT", suspend_ms=0, sub_version=5)
    assert stale.code == ResponseCode.FILTER_DATA_NOT_LATEST
    assert stale.remark == "the consumer's consumer filter data not latest"


def test_subscription_in_the_pull_header(make_bk):
    bk = make_bk(enablePropertyFilter=True)
    fill(bk)
    sub_bit = int(PullSysFlag.SUBSCRIPTION)
    ok = bk.pull("lite", "SqlT", sys_flag=sub_bit, suspend_ms=0, subscription="price >= 99", expressionType="SQL92")
    assert bodies(ok) == ["m0", "m2"]
    bad = bk.pull("lite", "SqlT", sys_flag=sub_bit, suspend_ms=0, subscription="price >=", expressionType="SQL92")
    assert bad.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED
    assert bad.remark == "parse the consumer's subscription failed"


def test_nothing_matching_moves_the_offset_past_rejected_messages(make_bk):
    bk = make_bk(enablePropertyFilter=True)
    fill(bk)
    sql_heartbeat(bk, "g", "SqlT", "price > 1000")
    resp = bk.pull("g", "SqlT", suspend_ms=0)
    assert resp.code != ResponseCode.SUCCESS and int(resp.ext_fields["nextBeginOffset"]) == 5


def test_filter_support_retry_applies_the_original_topics_expression(make_bk):
    bk = make_bk(enablePropertyFilter=True, filterSupportRetry=True)
    sql_heartbeat(bk, "g", "SqlT", "a = 1")
    for body, a in ((b"keep", "1"), (b"drop", "2")):
        assert bk.send("%RETRY%g", body, extra_props={"a": a, "RETRY_TOPIC": "SqlT"}).code == 0
    bk.heartbeat("g", "%RETRY%g")  # the automatic TAG * subscription of the retry topic
    assert bodies(bk.pull("g", "%RETRY%g", suspend_ms=0)) == ["keep"]
