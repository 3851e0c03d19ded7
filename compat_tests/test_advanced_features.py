"""Issue 5: SQL92 filters, delay levels, timer messages, transactions with check-back, dead letters,
message query and reset-offset-by-time, with the official clients against Apache RocketMQ and FerryMQ.

Both brokers run with servers.FEATURE_CONFIG (property filters on, delay level 3 = 4 s, transactions
checked after 2 s every second at most twice). ``client5`` is the Java client 5.5.0 or the Go client
v2.1.2; scenarios the 4.9.8 client also covers use ``client``.
"""

from __future__ import annotations

import json
import re
import time
import uuid
from collections import defaultdict

import pytest

from .harness import finish_all
from .servers import DELAY_LEVEL_3_MS, TRANSACTION_CHECK_INTERVAL_MS, TRANSACTION_CHECK_MAX, TRANSACTION_TIMEOUT_MS
from .test_official_clients import WAIT, bodies, fresh, wait_until_offline, write_spec

# ---------------------------------------------------------------------------------------------- SQL92

#: message index -> user properties (a: long, b: double, s: string, flag: boolean; absent = null) and tag
SQL_MESSAGES: list[tuple[str, dict[str, object]]] = [
    ("TagA", {"a": 1, "b": 1.5, "s": "apple", "flag": "true"}),
    ("TagB", {"a": 5, "b": 2.5, "s": "banana", "flag": "false"}),
    ("TagA", {"a": 10, "b": -3.0, "s": "cherry", "flag": "true"}),
    ("TagC", {"a": 15, "s": "apricot"}),
    ("TagB", {"b": 0.5, "s": "date", "flag": "false"}),
    ("TagA", {"a": 20, "b": 10.25, "flag": "true"}),
    ("TagC", {"a": -7, "b": 7.0, "s": "banana split", "flag": "true"}),
    ("TagA", {}),
]

#: expression -> indexes of SQL_MESSAGES it selects. A comparison with a missing property is unknown
#: (neither true nor false), so neither it nor its NOT selects the message.
SQL_CASES: dict[str, set[int]] = {
    "a > 5": {2, 3, 5},
    "a >= 5 AND a <= 10": {1, 2},
    "a <> 5": {0, 2, 3, 5, 6},
    "a BETWEEN 5 AND 15": {1, 2, 3},
    "a NOT BETWEEN 5 AND 15": {0, 5, 6},
    "NOT (a > 5)": {0, 1, 6},
    "b < 1.0": {2, 4},
    "b = -3.0": {2},
    "b > 2.0 AND b < 8.5 OR a = 15": {1, 3, 6},
    # A long literal reads the property as a long: "2.5" is no long, so the comparison is unknown.
    "b > 2": set(),
    "s = 'banana'": {1},
    "s <> 'banana'": {0, 2, 3, 4, 6},
    "s IN ('apple', 'cherry', 'date')": {0, 2, 4},
    "s NOT IN ('apple', 'banana')": {2, 3, 4, 6},
    "a IS NULL": {4, 7},
    "b IS NOT NULL AND s IS NULL": {5},
    "flag = TRUE": {0, 2, 5, 6},
    "flag = FALSE OR a < 0": {1, 4, 6},
    "TAGS = 'TagA' AND a > 1": {2, 5},
    "s STARTSWITH 'ap'": {0, 3},
    "s ENDSWITH 'a'": {1},
    "s CONTAINS 'an'": {1, 6},
}


def sql_spec() -> list[dict]:
    # Property values travel as strings; str() keeps "7.0" a decimal for both clients.
    return [{"body": f"sql-{i}", "tag": tag, "props": {k: str(v) for k, v in props.items()}}
            for i, (tag, props) in enumerate(SQL_MESSAGES)]


def test_sql92_subscriptions_select_exactly_the_matching_messages(server, client5, tmp_path, together, request):
    """Twenty-two SQL92 subscriptions (comparisons, BETWEEN, IN, IS [NOT] NULL, AND/OR/NOT, long, double,
    string and boolean literals, TAGS, STARTSWITH/ENDSWITH/CONTAINS), one group each, on one topic: each
    group receives exactly the messages its expression matches (and nothing more within 2 s)."""
    def scenario(client5):
        topic, group = fresh("Sql")
        ns = server.namesrv_addr
        client5("send", n=ns, t=topic, spec=write_spec(tmp_path, sql_spec())).check()
        groups = {expr: f"{group}_{i}" for i, expr in enumerate(SQL_CASES)}
        got: dict[str, list[str]] = defaultdict(list)
        if client5.is_java:
            subs = tmp_path / "subs.json"
            subs.write_text(json.dumps([{"group": g, "expr": e, "count": len(SQL_CASES[e])}
                                        for e, g in groups.items()]))
            res = client5.runner("sqlmatrix", "-n", ns, "-t", topic, "-subs", str(subs), "-timeout", str(WAIT * 1000),
                                 "-linger", "2000", timeout=WAIT + 60)
            for e in res.of("received"):
                got[e["group"]].append(e["body"])
            explain = res.explain()
        else:
            running = {g: client5.spawn("consume", n=ns, t=topic, g=g, sql=e, count=len(SQL_CASES[e]), timeout=WAIT,
                                        linger=2) for e, g in groups.items()}
            results = finish_all(running, WAIT + 60)
            for g, res in results.items():
                got[g] = bodies(res)
            explain = "\n".join(r.explain() for r in results.values() if r.returncode != 0)[:20000]
        wrong = {expr: {"expected": sorted(f"sql-{i}" for i in want), "got": sorted(got[groups[expr]])}
                 for expr, want in SQL_CASES.items() if sorted(got[groups[expr]]) != sorted(f"sql-{i}" for i in want)}
        assert not wrong, f"{len(wrong)} of {len(SQL_CASES)} expressions selected the wrong messages: " \
                          f"{json.dumps(wrong, indent=1)}\n{explain}"

    together.run(request, client5, scenario)


@pytest.mark.parametrize("client", ["java-5.5.0", "java-4.9.8"], indirect=True)
def test_invalid_sql92_expression_is_refused(server, client, together, request):
    """A consumer subscribing with an unparsable SQL92 expression fails to start: the broker answers the
    client's config check with SUBSCRIPTION_PARSE_FAILED (23)."""
    def scenario(client):
        topic, group = fresh("BadSql")
        ns = server.namesrv_addr
        client("send", n=ns, t=topic, count=1).check()
        res = client("consume", n=ns, t=topic, g=group, sql="a > AND (b", count=1, timeout=5)
        assert res.returncode != 0, res.explain()
        err = res.one("start_error")
        assert err["responseCode"] == 23, res.explain()

    together.run(request, client, scenario)


# ---------------------------------------------------------------------------------------------- delays


def send_while_consuming(client, ns: str, topic: str, group: str, expect: int, **send_args):
    """Warm the topic up with one message, start a consumer waiting for ``expect`` messages (the warm-up
    included), and once it is subscribed send with ``send_args``; returns the send's and the consumer's
    results."""
    client("send", n=ns, t=topic, count=1, body="warm-up").check()
    consumer = client.spawn("consume", n=ns, t=topic, g=group, count=expect, timeout=WAIT)
    try:
        consumer.wait_for("started")
        sent = client("send", n=ns, t=topic, **send_args).check()
        res = consumer.finish(WAIT + 30).check()
    finally:
        consumer.kill()
    return sent, res


def test_delay_level_3_is_delivered_after_its_delay(server, client, together, request):
    """A message sent with delay level 3 (4 s on these brokers) reaches a waiting consumer no sooner than
    4 s after it was sent (100 ms clock tolerance) and no later than 3 s after that."""
    def scenario(client):
        topic, group = fresh("Delay")
        sent, res = send_while_consuming(client, server.namesrv_addr, topic, group, 3,
                                         count=2, body="delayed", delayLevel=3)
        sent_at = max(e["sentAt"] for e in sent.of("sent"))
        delayed = [e for e in res.of("received") if e["body"].startswith("delayed")]
        assert len(delayed) == 2, res.explain()
        for e in delayed:
            # the delay runs from the store time, between the birth and the producer's report of the send
            waited, reported = e["receivedAt"] - e["bornTimestamp"], e["receivedAt"] - sent_at
            assert DELAY_LEVEL_3_MS - 100 <= waited and reported <= DELAY_LEVEL_3_MS + 3000, \
                f"delivered {waited} ms after its birth, {reported} ms after the send was reported: {e}"
            assert (e["properties"] or {}).get("DELAY") == "3", e

    together.run(request, client, scenario)


def test_timer_message_delivered_at_its_time(server, client5, together, request):
    """A timer message (Java 5.x Message.setDeliverTimeMs; the Go client v2.1.2 has no such call and sets
    the same TIMER_DELIVER_MS property) due 5.5 s after sending arrives within [due - 100 ms, due + 2 s]."""
    def scenario(client5):
        topic, group = fresh("Timer")
        sent, res = send_while_consuming(client5, server.namesrv_addr, topic, group, 2,
                                         count=1, body="timer", deliverAfter=5.5)
        due = sent.one("deliver_at")["deliverTimeMs"]
        (timer,) = [e for e in res.of("received") if e["body"] == "timer"]
        early = timer["receivedAt"] - due
        assert -100 <= early <= 2000, f"delivered {early} ms after its due time: {timer}"

    together.run(request, client5, scenario)


# ---------------------------------------------------------------------------------------------- transactions

TX_MODES = ("commit", "rollback", "unknown-commit", "unknown")


def test_transactions_commit_rollback_check_back_and_discard(server, client5, tmp_path, together, request):
    """A transactional producer sends four half messages: committed at once, rolled back, UNKNOW then
    COMMIT on check-back, UNKNOW forever. Consumers see only the two committed ones; the check-back
    reaches the UNKNOW ones only, and the never-answered one is checked at most transactionCheckMax
    times, then dropped (no check in its last 3 s)."""
    def scenario(client5):
        topic, group = fresh("Tx")
        ns = server.namesrv_addr
        spec = [{"body": f"tx-{m}", "keys": f"key-{m}", "props": {"txmode": m}} for m in TX_MODES]
        linger = (TRANSACTION_TIMEOUT_MS + (TRANSACTION_CHECK_MAX + 4) * TRANSACTION_CHECK_INTERVAL_MS) / 1000 + 3
        res = client5("txn", n=ns, t=topic, group=f"{group}_producer", spec=write_spec(tmp_path, spec),
                      linger=linger, run_timeout=linger + 60).check()
        assert len(res.of("sent")) == 4, res.explain()
        checks = defaultdict(list)
        for e in res.of("check"):
            checks[e["keys"]].append(e["at"])
        assert set(checks) <= {"key-unknown-commit", "key-unknown"}, f"checked a decided transaction: {dict(checks)}"
        assert len(checks["key-unknown-commit"]) >= 1, res.explain()
        assert 1 <= len(checks["key-unknown"]) <= TRANSACTION_CHECK_MAX, res.explain()
        quiet = res.one("done")["at"] - max(checks["key-unknown"])
        assert quiet >= 3000, f"the never-answered transaction was still checked {quiet} ms before the end"
        got = client5("consume", n=ns, t=topic, g=group, count=2, timeout=WAIT, linger=3).check()
        assert sorted(bodies(got)) == ["tx-commit", "tx-unknown-commit"], got.explain()

    together.run(request, client5, scenario)


# ---------------------------------------------------------------------------------------------- DLQ


def _topic_max_offsets(mqadmin5, ns: str, topic: str) -> int:
    """Sum of the #Max Offset column of `mqadmin topicStatus`."""
    out = mqadmin5(ns, "topicStatus", "-t", topic)
    total = 0
    for line in out.splitlines():
        cols = line.split()
        if len(cols) >= 5 and cols[1].isdigit() and re.fullmatch(r"-?\d+", cols[3]):
            total += int(cols[3])
    return total


def test_dead_letter_after_max_reconsume_times(server, client5, mqadmin5, together, request):
    """A consumer with maxReconsumeTimes 1 that always answers RECONSUME_LATER sees each message twice
    (reconsumeTimes 0 then 1); then the messages are in %DLQ%<group> (mqadmin topicStatus counts them)."""
    def scenario(client5):
        topic, group = fresh("Dlq")
        ns = server.namesrv_addr
        client5("send", n=ns, t=topic, count=2, body="dead").check()
        got = client5("consume", n=ns, t=topic, g=group, count=4, reconsume=99, maxReconsume=1, timeout=WAIT,
                      linger=2, **client5.rebalancing_every_second()).check()
        times = defaultdict(list)
        for e in got.of("received"):
            times[e["body"]].append(e["reconsumeTimes"])
        assert dict(times) == {"dead #0": [0, 1], "dead #1": [0, 1]}, got.explain()
        deadline = time.monotonic() + 20
        while True:
            try:
                dead = _topic_max_offsets(mqadmin5, ns, f"%DLQ%{group}")
            except AssertionError:
                dead = -1  # the DLQ topic does not exist yet
            if dead == 2 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert dead == 2, f"%DLQ%{group} holds {dead} messages, expected 2"

    together.run(request, client5, scenario)


# ---------------------------------------------------------------------------------------------- query


def _retry(fn, what: str, timeout: float = 20):
    """Index entries are written behind the commit log (Apache's reput): retry a query briefly."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return fn()
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)


def test_query_message_by_key_id_and_unique_key(server, java5, mqadmin5):
    """mqadmin queryMsgByKey lists both messages sent with a key; queryMsgById (offset id) and
    queryMsgByUniqueKey (client id) show the message with its topic and keys."""
    topic, _ = fresh("Query")
    key = f"qk-{uuid.uuid4().hex[:8]}"
    ns = server.namesrv_addr
    sent = java5("send", "-n", ns, "-t", topic, "-count", "2", "-keys", key, "-body", "query").check().of("sent")
    ids = {e["msgId"] for e in sent}

    def by_key():
        out = mqadmin5(ns, "queryMsgByKey", "-t", topic, "-k", key)
        assert ids <= set(re.findall(r"[0-9A-F]{32,}", out)), out
        return out

    _retry(by_key, "queryMsgByKey")
    first = sent[0]

    def by_id():
        out = mqadmin5(ns, "queryMsgById", "-t", topic, "-i", first["offsetMsgId"])
        assert re.search(rf"Topic:\s+{topic}", out) and re.search(rf"Keys:\s+\[?{key}", out), out
        return out

    _retry(by_id, "queryMsgById")

    def by_unique_key():
        out = mqadmin5(ns, "queryMsgByUniqueKey", "-t", topic, "-i", first["msgId"])
        assert re.search(rf"Topic:\s+{topic}", out) and first["msgId"] in out, out
        return out

    _retry(by_unique_key, "queryMsgByUniqueKey")


# ---------------------------------------------------------------------------------------------- reset offset


def test_reset_offset_by_time_redelivers_the_later_messages_to_a_live_and_a_returning_group(
        server, client5, mqadmin5, together, request):
    """Two groups consumed 4 old and 3 new messages; one stays online, the other left. `mqadmin
    resetOffsetByTime` of each group to a time between the two batches makes the live consumer receive
    exactly the 3 new ones again, and the other group's next consumer too: brokers keep the reset
    themselves (useServerSideResetOffset, on by default in 5.5), so the group need not be online.

    The returning group's steps run while the live consumer waits for its pulls the broker holds (the
    client's long-poll, 15 s for Java and 20 s for Go: the reset reaches it with its next pull)."""
    def scenario(client5):
        topic, group = fresh("Reset")
        live, away = f"{group}_live", f"{group}_away"
        ns = server.namesrv_addr
        client5("send", n=ns, t=topic, count=4, body="old").check()
        time.sleep(1.5)
        boundary = int(time.time() * 1000)
        time.sleep(1.5)
        client5("send", n=ns, t=topic, count=3, body="new").check()
        consumer = client5.spawn("consume", n=ns, t=topic, g=live, count=10, timeout=WAIT + 30,
                                 **client5.rebalancing_every_second())
        try:
            deadline = time.monotonic() + WAIT
            while len(consumer.result().of("received")) < 7 and time.monotonic() < deadline:
                time.sleep(0.2)
            assert len(consumer.result().of("received")) == 7, consumer.result().explain()
            caught_up = time.monotonic()
            first = client5("consume", n=ns, t=topic, g=away, count=7, timeout=WAIT).check()
            assert len(bodies(first)) == 7, first.explain()
            time.sleep(max(0.0, caught_up + 2 - time.monotonic()))  # the live consumer commits its offsets every second
            out = mqadmin5(ns, "resetOffsetByTime", "-g", live, "-t", topic, "-s", str(boundary))
            wait_until_offline(server, away)
            out_away = mqadmin5(ns, "resetOffsetByTime", "-g", away, "-t", topic, "-s", str(boundary))
            assert "Consumer not online" not in out_away, out_away
            back = client5("consume", n=ns, t=topic, g=away, count=3, timeout=WAIT + 60, linger=3,
                           **client5.rebalancing_every_second()).check()
            res = consumer.finish(WAIT + 60)
        finally:
            consumer.kill()
        again = bodies(res)[7:]
        assert sorted(again) == [f"new #{i}" for i in range(3)], f"mqadmin said:\n{out}\n{res.explain()}"
        assert sorted(bodies(back)) == [f"new #{i}" for i in range(3)], f"mqadmin said:\n{out_away}\n{back.explain()}"

    together.run(request, client5, scenario)
