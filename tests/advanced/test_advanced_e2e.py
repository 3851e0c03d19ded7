"""Issue 5 over TCP against ``ferrymq standalone``: SQL92, delay levels, timers, transactions with
check-back, message query and reset offset by time. The services' intervals are shortened by config."""

from __future__ import annotations

import time

import pytest

from tests.advanced.broker_session import COMMIT, ROLLBACK, UNKNOWN, standalone, WireClient, wait_for
from ferrymq.wire.bodies import CheckClientRequestBody, ResetOffsetBody, SubscriptionData
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.headers import QueryMessageRequestHeader, ResetOffsetRequestHeader
from ferrymq.wire.message import decode_records
from ferrymq.wire.msgid import parse_offset_msg_id

C = RequestCode
CONFIG = {
    "enablePropertyFilter": "true",
    "messageDelayLevel": "1s 2s 3s",
    "timerPrecisionMs": "100",
    "transactionTimeOut": "500",
    "transactionCheckInterval": "200",
    "transactionCheckMax": "3",
}
#: measured lateness (ms) of delay-level and timer deliveries, printed at the end (pytest -s)
FIGURES: dict[str, list[int]] = {}


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = standalone(tmp_path_factory.mktemp("advanced"), CONFIG).start()
    yield b
    b.stop()
    for name, values in FIGURES.items():
        print(f"\n{name}: n={len(values)} min={min(values)} max={max(values)} ms")


@pytest.fixture
def client(broker):
    with WireClient(broker.broker_addr) as c:
        yield c


def test_sql92_filtering_and_refusal(client):
    topic = "E2eSql"
    for i in range(10):
        props = {"TAGS": "even" if i % 2 == 0 else "odd", "n": str(i)}
        if i % 3 == 0:
            props["color"] = "red"
        assert client.send(topic, f"s{i}".encode(), props).code == 0
    assert client.register_consumer("sqlg", topic, "n BETWEEN 2 AND 7 AND (color = 'red' OR TAGS = 'odd')",
                                    "SQL92").code == 0
    # as a Go push consumer pulls: no subscription in the request, expressionType=TAG
    got = client.drain(topic, group="sqlg", subscription=None, sub_version=1)
    assert [m.body for m in got] == [b"s3", b"s5", b"s6", b"s7"]
    bad = CheckClientRequestBody(client_id="x", group="sqlg", subscription_data=SubscriptionData(
        topic=topic, sub_string="n IN (1, 2)", expression_type="SQL92")).encode()
    refused = client.call(C.CHECK_CLIENT_CONFIG, None, bad)
    assert refused.code == ResponseCode.SUBSCRIPTION_PARSE_FAILED and refused.remark


def test_delay_level_delivered_after_its_delay(client):
    topic = "E2eDelay"
    sent_at = {}
    for i in range(5):
        sent_at[f"d{i}"] = int(time.time() * 1000)
        assert client.send(topic, f"d{i}".encode(), {"DELAY": "2"}).code == 0
    assert client.drain(topic) == []
    got = wait_for(lambda: (m := client.drain(topic)) and len(m) == 5 and m, 6, "the delayed messages")
    lateness = [m.store_timestamp - (sent_at[m.body.decode()] + 2000) for m in got]
    FIGURES["delay level 2 (2 s) lateness"] = lateness
    assert all(-5 <= late < 1000 for late in lateness), lateness  # not before its delay (5 ms clock slack)
    assert all(m.properties["REAL_TOPIC"] == topic and m.properties["DELAY"] == "2" for m in got)


def test_timer_messages_at_arbitrary_times(client):
    topic = "E2eTimer"
    now = int(time.time() * 1000)
    due = {f"t{i}": now + 700 + 137 * i for i in range(8)}
    for name, at in due.items():
        assert client.send(topic, name.encode(), {"TIMER_DELIVER_MS": str(at)}).code == 0
    assert client.send(topic, b"sec", {"TIMER_DELAY_SEC": "1"}).code == 0
    got = wait_for(lambda: (m := client.drain(topic)) and len(m) == 9 and m, 8, "the timer messages")
    lateness = [m.store_timestamp - due[m.body.decode()] for m in got if m.body != b"sec"]
    FIGURES["timer lateness (precision 100 ms)"] = lateness
    # as Apache's wheel: never early (5 ms clock slack), at most a slot (100 ms) plus a tick late
    assert all(-5 <= late < 400 for late in lateness), lateness
    assert sorted(m.body for m in got) == sorted([b"sec", *(n.encode() for n in due)])
    refused = client.send(topic, b"x", {"TIMER_DELAY_SEC": str(10 * 24 * 3600)})
    assert refused.code == ResponseCode.MESSAGE_ILLEGAL and refused.remark.startswith("timer message illegal")


def test_transactions_commit_rollback_check_back_and_discard(broker):
    topic = "E2eTx"
    asked: dict[str, int] = {}

    def on_check(seen):
        body = seen.message.body.decode()
        asked[body] = asked.get(body, 0) + 1
        assert seen.message.topic == topic and seen.header["topic"] == "RMQ_SYS_TRANS_HALF_TOPIC"
        if body == "unknown-then-commit":
            return UNKNOWN if asked[body] == 1 else COMMIT
        if body == "check-rollback":
            return ROLLBACK
        return None  # "never": the producer never answers

    with WireClient(broker.broker_addr, on_check=on_check) as producer:
        producer.register_producer("e2etx")
        sent = {}
        for body in ("commit", "rollback", "unknown-then-commit", "check-rollback", "never"):
            resp = producer.send_half(topic, body.encode(), "e2etx")
            assert resp.code == 0, resp.remark
            sent[body] = resp
        for body, decision in (("commit", COMMIT), ("rollback", ROLLBACK)):
            r = sent[body]
            producer.end("e2etx", int(r.ext_fields["queueOffset"]), parse_offset_msg_id(r.ext_fields["msgId"])[1],
                         decision, r.ext_fields["transactionId"])
        wait_for(lambda: asked.get("never", 0) >= 3 and asked.get("unknown-then-commit", 0) >= 2, 8, "check-backs")
        delivered = wait_for(lambda: (m := producer.drain(topic)) and len(m) == 2 and m, 5, "committed messages")
        discarded = wait_for(lambda: producer.drain("TRANS_CHECK_MAX_TIME_TOPIC"), 5, "the discarded half")
        time.sleep(0.6)  # three more check rounds: nothing more may happen
        assert sorted(m.body for m in producer.drain(topic)) == [b"commit", b"unknown-then-commit"]
    assert sorted(m.body for m in delivered) == [b"commit", b"unknown-then-commit"]
    assert all(m.sys_flag & 0xC == COMMIT and m.properties["TRAN_MSG"] == "true" for m in delivered)
    assert [m.body for m in discarded] == [b"never"]
    assert asked == {"unknown-then-commit": 2, "check-rollback": 1, "never": 3}


def test_query_by_key_unique_key_and_offset_id(client):
    topic = "E2eQuery"
    begin = int(time.time() * 1000) - 1000
    sent = [client.send(topic, f"q{i}".encode(), {"KEYS": f"order-{i % 2}"}) for i in range(4)]

    def query(key, unique=False):
        h = QueryMessageRequestHeader(topic=topic, key=key, max_num=32, begin_timestamp=begin,
                                      end_timestamp=int(time.time() * 1000) + 1000).to_ext()
        if unique:
            h["_UNIQUE_KEY_QUERY"] = "true"
        return client.call(C.QUERY_MESSAGE, h)

    found = wait_for(lambda: (r := query("order-1")).code == 0 and r, 5, "the key index")
    assert sorted(m.body for m in decode_records(found.body)) == [b"q1", b"q3"]
    uniq = query(sent[2].ext_fields["transactionId"], unique=True)  # the UNIQ_KEY (client msgId)
    assert [m.body for m in decode_records(uniq.body)] == [b"q2"]
    missing = query("no-such-key")
    assert missing.code == ResponseCode.QUERY_NOT_FOUND
    assert missing.remark == "can not find message, maybe time range not correct"
    _, phys = parse_offset_msg_id(sent[3].ext_fields["msgId"])
    view = client.call(C.VIEW_MESSAGE_BY_ID, {"offset": phys})
    assert view.code == 0 and [m.body for m in decode_records(view.body)] == [b"q3"]


def test_reset_offset_by_time_and_search_by_timestamp(client):
    topic, group = "E2eReset", "resetg"
    for i in range(3):
        assert client.send(topic, f"old{i}".encode()).code == 0
    time.sleep(0.05)
    t = int(time.time() * 1000)
    time.sleep(0.05)
    for i in range(3):
        assert client.send(topic, f"new{i}".encode()).code == 0
    assert client.call(C.SEARCH_OFFSET_BY_TIMESTAMP, {"topic": topic, "queueId": 0, "timestamp": t}).ext_fields["offset"] == "3"
    assert client.register_consumer(group, topic).code == 0
    assert client.call(C.UPDATE_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": 0,
                                                  "commitOffset": 6}).code == 0
    h = ResetOffsetRequestHeader(topic=topic, group=group, timestamp=t, is_force=True).to_ext()
    resp = client.call(C.INVOKE_BROKER_TO_RESET_OFFSET, h)
    assert resp.code == 0, resp.remark
    table = {mq.queue_id: off for mq, off in ResetOffsetBody.decode(resp.body).offset_table.items()}
    assert table[0] == 3 and all(off == 0 for q, off in table.items() if q != 0)
    # useServerSideResetOffset (default): nothing is pushed; the next pull learns the reset.
    q = client.call(C.QUERY_CONSUMER_OFFSET, {"consumerGroup": group, "topic": topic, "queueId": 0})
    assert q.ext_fields["offset"] == "3"
    moved = client.pull(group, topic, offset=6)
    assert (moved.code, moved.remark, moved.ext_fields["nextBeginOffset"]) == (
        ResponseCode.PULL_OFFSET_MOVED, "OFFSET_RESET", "3")
    assert client.resets == []
    redelivered = client.pull(group, topic, offset=int(moved.ext_fields["nextBeginOffset"]))
    assert [m.body for m in decode_records(redelivered.body)] == [b"new0", b"new1", b"new2"]
    missing = client.call(C.INVOKE_BROKER_TO_RESET_OFFSET, ResetOffsetRequestHeader(
        topic="NoSuchTopicX", group=group, timestamp=t, is_force=True).to_ext())
    assert missing.code == ResponseCode.TOPIC_NOT_EXIST
