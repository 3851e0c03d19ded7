"""Transactions over HTTP against a running `ferrymq standalone`: half messages resolved by the client
or by signed check-back calls to a local receiver, with the broker's transactionCheckMax.

Every answer of the gateway is held against /openapi.json (http_client.check_answer)."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest

from ferrymq.gateways.http.transactions import SIGNATURE_HEADER, TIMESTAMP_HEADER, verify

from .check_back_receiver import Receiver
from .http_client import Gateway, names, wait_for

pytestmark = pytest.mark.timeout(120)

SECRET = "test-check-back-secret"
CHECK_MAX = 3
#: a half message is checked 0.5 s after its birth, then once a second; the receiver's answers come in
#: well under that, so each check is answered before the broker's next pass. The check-back timeout
#: leaves room for a loaded machine: an answer it cuts off would use up a step of a test's plan.
CHECK_BACK_TIMEOUT = 1.5
BROKER_KEYS = {"transactionTimeOut": 500, "transactionCheckInterval": 1000, "transactionCheckMax": CHECK_MAX,
               "httpCheckBackSecret": SECRET, "httpCheckBackTimeout": int(CHECK_BACK_TIMEOUT * 1000)}
#: how long a "slow" receiver takes: past the check-back timeout
SLOW = CHECK_BACK_TIMEOUT + 1.0


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path_factory.mktemp("http-tx"), BROKER_KEYS, http=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def receiver():
    r = Receiver(SECRET, slow=SLOW)
    yield r
    r.close()


def _names():
    return names("HttpTx", "HttpTxG", "HttpTxP")


def _begin(gw: Gateway, topic: str, producer_group: str, url: str, body: str = "order-1", **message: Any):
    r = gw.request("POST", f"/v1/topics/{topic}/transactions",
                   json={"producerGroup": producer_group, "checkBackUrl": url,
                         "message": {"body": body, **message}})
    assert r.status_code == 201, r.text
    tx = r.json()
    assert r.headers["Location"] == f"/v1/transactions/{tx['transactionId']}"
    return tx


def _end(gw: Gateway, tx_id: str, action: str):
    return gw.request("POST", f"/v1/transactions/{tx_id}", json={"action": action})


def _get(gw: Gateway, tx_id: str) -> dict[str, Any]:
    r = gw.request("GET", f"/v1/transactions/{tx_id}")
    assert r.status_code == 200, r.text
    return r.json()



def test_committed_by_the_client_is_delivered_once_with_what_was_sent(server, gw, receiver):
    topic, group, producers = _names()
    server.create_topic(topic, 2)
    tx = _begin(gw, topic, producers, receiver.url, tag="paid", keys=["order-1"], properties={"amount": 12})
    assert (tx["state"], tx["resolvedBy"], tx["checkBacks"], tx["msgId"]) == \
        ("UNKNOWN", None, [], tx["transactionId"])
    assert gw.receive(topic, group, wait=0.5) == []  # a half message is invisible
    done = _end(gw, tx["transactionId"], "commit")
    assert done.status_code == 200, done.text
    assert (done.json()["state"], done.json()["resolvedBy"]) == ("COMMIT", "client")
    # a slow machine may let the half message outlive transactionTimeOut before the commit: a check pass
    # then asks the receiver, which answers UNKNOWN; once committed, no check reaches the receiver
    asked_before_commit = len(receiver.calls_of(tx["transactionId"]))
    [msg] = gw.receive_all(topic, group, 1)
    assert (msg["msgId"], msg["body"], msg["tag"], msg["keys"], msg["properties"]["amount"]) == \
        (tx["msgId"], "order-1", "paid", ["order-1"], "12")
    gw.ack(topic, group, [msg])
    time.sleep(2.0)  # past the broker's check passes: no check-back of a resolved transaction
    assert gw.receive(topic, group, wait=0.5) == []
    assert len(receiver.calls_of(tx["transactionId"])) == asked_before_commit
    assert all(c["url"] is None for c in _get(gw, tx["transactionId"])["checkBacks"][asked_before_commit:])


def test_rolled_back_by_the_client_is_never_delivered_and_resolving_again_is_409(server, gw, receiver):
    topic, group, producers = _names()
    server.create_topic(topic, 1)
    tx = _begin(gw, topic, producers, receiver.url)
    assert _end(gw, tx["transactionId"], "rollback").json()["state"] == "ROLLBACK"
    for action in ("commit", "rollback"):
        again = _end(gw, tx["transactionId"], action)
        assert again.status_code == 409 and again.json()["field"] == "/action", again.text
    assert gw.receive(topic, group, wait=3) == []
    assert receiver.calls_of(tx["transactionId"]) == []


def test_check_back_commit_delivers_and_the_history_shows_the_call(server, gw, receiver):
    topic, group, producers = _names()
    server.create_topic(topic, 1)
    receiver.plans[body := f"order-{topic}"] = ["COMMIT"]
    tx = _begin(gw, topic, producers, receiver.url, body, tag="t")
    [msg] = gw.receive_all(topic, group, 1)
    assert msg["msgId"] == tx["msgId"]
    gw.ack(topic, group, [msg])
    seen = _get(gw, tx["transactionId"])
    assert (seen["state"], seen["resolvedBy"]) == ("COMMIT", "checkBack")
    [check] = seen["checkBacks"]
    assert (check["url"], check["status"], check["answer"], check["checkTimes"], check["detail"]) == \
        (receiver.url, 200, "COMMIT", 1, None)
    assert 0 <= check["latencyMs"] < 400 and check["time"] >= seen["createdAt"]
    [call] = receiver.calls_of(tx["transactionId"])
    assert {k: call["json"][k] for k in ("msgId", "producerGroup", "topic", "tag", "body", "checkTimes")} == \
        {"msgId": tx["msgId"], "producerGroup": producers, "topic": topic, "tag": "t", "body": body,
         "checkTimes": 1}
    assert f"transaction {tx['transactionId']} check 1: {receiver.url} answered COMMIT" in server.log
    resolved = _end(gw, tx["transactionId"], "rollback")
    assert resolved.status_code == 409, resolved.text


def test_check_back_rollback_is_never_delivered(server, gw, receiver):
    topic, group, producers = _names()
    server.create_topic(topic, 1)
    receiver.plans[body := f"order-{topic}"] = ["ROLLBACK"]
    tx = _begin(gw, topic, producers, receiver.url, body)
    wait_for(lambda: _get(gw, tx["transactionId"])["state"] == "ROLLBACK")
    assert gw.receive(topic, group, wait=3) == []
    assert len(receiver.calls_of(tx["transactionId"])) == 1  # decided: not asked again


def test_unknown_then_commit_on_a_later_check(server, gw, receiver):
    topic, group, producers = _names()
    server.create_topic(topic, 1)
    tx = _begin(gw, topic, producers, receiver.url)
    receiver.plans[tx["transactionId"]] = ["UNKNOWN", "COMMIT"]
    [msg] = gw.receive_all(topic, group, 1)
    gw.ack(topic, group, [msg])
    checks = _get(gw, tx["transactionId"])["checkBacks"]
    assert [(c["checkTimes"], c["answer"], c["status"]) for c in checks] == [(1, "UNKNOWN", 200), (2, "COMMIT", 200)]
    assert gw.receive(topic, group, wait=2) == []  # delivered once


def test_committed_by_the_client_after_an_unknown_check_is_delivered_once(server, gw, receiver):
    topic, group, producers = _names()
    server.create_topic(topic, 1)
    tx = _begin(gw, topic, producers, receiver.url)
    receiver.plans[tx["transactionId"]] = ["UNKNOWN"]
    wait_for(lambda: _get(gw, tx["transactionId"])["checkBacks"])
    assert _end(gw, tx["transactionId"], "commit").json()["state"] == "COMMIT"  # the check's copy is the open one
    asked_before_commit = len(receiver.calls_of(tx["transactionId"]))  # 1, or 2 if a second pass came first
    [msg] = gw.receive_all(topic, group, 1)
    gw.ack(topic, group, [msg])
    time.sleep(2.0)  # past further check passes
    assert gw.receive(topic, group, wait=0.5) == []
    assert 1 <= asked_before_commit == len(receiver.calls_of(tx["transactionId"]))


def test_a_failing_receiver_is_asked_transaction_check_max_times_then_the_message_is_discarded(server, gw, receiver):
    topic, group, producers = _names()
    server.create_topic(topic, 1)
    tx = _begin(gw, topic, producers, receiver.url)
    receiver.plans[tx["transactionId"]] = [500, "garbled", "slow", "COMMIT"]
    checks = wait_for(lambda: len(_get(gw, tx["transactionId"])["checkBacks"]) == CHECK_MAX and
                       _get(gw, tx["transactionId"])["checkBacks"])
    assert [(c["checkTimes"], c["answer"], c["status"]) for c in checks] == \
        [(1, "UNKNOWN", 500), (2, "UNKNOWN", 200), (3, "UNKNOWN", None)]
    assert "HTTP 500" in checks[0]["detail"] and "<html>" in checks[1]["detail"]
    assert "httpCheckBackTimeout" in checks[2]["detail"] and checks[2]["latencyMs"] >= CHECK_BACK_TIMEOUT * 1000 - 50
    time.sleep(3.0)  # further check passes discard it instead of asking a fourth time
    seen = _get(gw, tx["transactionId"])
    assert (len(seen["checkBacks"]), seen["state"]) == (CHECK_MAX, "UNKNOWN")
    assert len(receiver.calls_of(tx["transactionId"])) == CHECK_MAX
    assert gw.receive(topic, group, wait=1) == []
    assert f"discarded after {CHECK_MAX} checks" in server.log


def test_the_signature_verifies_with_the_secret_only(server, gw, receiver):
    topic, _, producers = _names()
    server.create_topic(topic, 1)
    tx = _begin(gw, topic, producers, receiver.url, body="signed")
    receiver.plans[tx["transactionId"]] = ["ROLLBACK"]
    call = wait_for(lambda: receiver.calls_of(tx["transactionId"]))[0]
    raw, timestamp, signature = call["raw"], call["timestamp"], call["signature"]
    assert signature.startswith("sha256=") and abs(time.time() - int(timestamp)) < 30
    assert verify(SECRET.encode(), timestamp, raw, signature)
    assert not verify(b"another-secret", timestamp, raw, signature)
    assert not verify(SECRET.encode(), timestamp, raw.replace(b"signed", b"SIGNED"), signature)
    assert not verify(SECRET.encode(), str(int(timestamp) + 1), raw, signature)
    assert not verify(SECRET.encode(), timestamp, raw, signature, now=int(timestamp) + 301)  # a replay


def _documented_verify():
    """The receiver's check as docs/http.md shows it."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "http.md").read_text()
    for code in re.findall(r"^```python\n(.*?)^```$", text, re.MULTILINE | re.DOTALL):
        if "def verify_check_back" in code:
            scope: dict[str, Any] = {}
            exec(code, scope)  # noqa: S102 - the documentation's own example
            return scope["verify_check_back"]
    raise AssertionError("no verify_check_back example in docs/http.md")


def test_the_documented_receiver_check_accepts_the_gateway_calls_only(server, gw, receiver):
    verify_check_back = _documented_verify()
    topic, _, producers = _names()
    server.create_topic(topic, 1)
    tx = _begin(gw, topic, producers, receiver.url)
    receiver.plans[tx["transactionId"]] = ["ROLLBACK"]
    call = wait_for(lambda: receiver.calls_of(tx["transactionId"]))[0]
    headers = {TIMESTAMP_HEADER: call["timestamp"], SIGNATURE_HEADER: call["signature"]}
    assert verify_check_back(SECRET.encode(), headers, call["raw"])
    assert not verify_check_back(b"another-secret", headers, call["raw"])
    assert not verify_check_back(SECRET.encode(), headers, call["raw"] + b" ")
    assert not verify_check_back(SECRET.encode(), {**headers, TIMESTAMP_HEADER: "1"}, call["raw"])


def test_a_receiver_with_another_secret_refuses_and_the_check_counts_unknown(server, gw):
    other = Receiver("not-the-gateway-secret")
    try:
        topic, _, producers = _names()
        server.create_topic(topic, 1)
        tx = _begin(gw, topic, producers, other.url)
        other.plans[tx["transactionId"]] = ["COMMIT"]
        [check] = wait_for(lambda: _get(gw, tx["transactionId"])["checkBacks"])
        assert (check["status"], check["answer"]) == (401, "UNKNOWN")
        assert other.plans[tx["transactionId"]] == ["COMMIT"]  # never reached: the signature failed
        _end(gw, tx["transactionId"], "rollback")
    finally:
        other.close()


def test_unknown_transaction_is_404_and_bad_requests_are_400(server, gw, receiver):
    for method, kwargs in (("GET", {}), ("POST", {"json": {"action": "commit"}})):
        r = gw.request(method, "/v1/transactions/0A0000000000000000000000000000FF", **kwargs)
        assert r.status_code == 404 and r.json()["field"] == "path.id", r.text
    topic, _, producers = _names()
    server.create_topic(topic, 1)
    tx = _begin(gw, topic, producers, receiver.url)
    r = _end(gw, tx["transactionId"], "maybe")
    assert r.status_code == 400 and r.json()["field"] == "/action", r.text
    bad = {"producerGroup": producers, "checkBackUrl": "ftp://example.com/x", "message": {"body": "x"}}
    r = gw.request("POST", f"/v1/topics/{topic}/transactions", json=bad)
    assert r.status_code == 400 and r.json()["field"] == "/checkBackUrl", r.text
    bad = {"producerGroup": producers, "checkBackUrl": receiver.url, "message": {"body": "x", "delayLevel": 2}}
    r = gw.request("POST", f"/v1/topics/{topic}/transactions", json=bad)
    assert r.status_code == 400 and r.json()["field"] == "/message/delayLevel", r.text
    own = {"producerGroup": "FERRYMQ_HTTP_PRODUCER", "checkBackUrl": receiver.url, "message": {"body": "x"}}
    r = gw.request("POST", f"/v1/topics/{topic}/transactions", json=own)
    assert r.status_code == 400 and r.json()["field"] == "/producerGroup", r.text
    _end(gw, tx["transactionId"], "rollback")


def test_no_secret_configured_refuses_transactions(ferrymq_factory, receiver):
    srv = ferrymq_factory(http=True)
    client = Gateway(srv.http_url)
    try:
        topic, _, producers = _names()
        srv.create_topic(topic, 1)
        r = client.request("POST", f"/v1/topics/{topic}/transactions",
                           json={"producerGroup": producers, "checkBackUrl": receiver.url,
                                 "message": {"body": "x"}})
        assert r.status_code == 403 and "httpCheckBackSecret" in r.json()["detail"], r.text
    finally:
        client.close()


def test_the_transaction_file_falls_back_to_its_previous_version(tmp_path):
    from ferrymq.gateways.http.transactions import CheckBack, State, TransactionFile

    file = TransactionFile(tmp_path / "http-transactions.json")
    assert file.load() == []
    first = _record("TX-1", "http://127.0.0.1:9/a")
    first.check_backs.append(CheckBack(1, 1, first.check_back_url, 200, State.UNKNOWN, 3))
    second = _record("TX-2", "http://127.0.0.1:9/b")
    file.save([first])
    file.save([first, second])
    assert [tx.to_record() for tx in file.load()] == [first.to_record(), second.to_record()]
    file.path.write_bytes(b'{"transactions": [{"transactionId"')  # torn (a writer other than save)
    assert [tx.to_record() for tx in file.load()] == [first.to_record()]


# The gateway's record on its own (no broker): what a check answers when the client decides meanwhile,
# and the bound on what is remembered.

def _record(tx_id: str, url: str):
    from ferrymq.gateways.http.transactions import Transaction

    return Transaction(tx_id, tx_id, "T", None, [], "P", url, "broker-a", "0A00000100002A9F0000000000000000", 0)


def _check_of(tx_id: str, times: int):
    from ferrymq.wire.message import MessageConst, MessageExt

    return MessageExt("T", b"x", properties={MessageConst.UNIQ_KEY: tx_id, MessageConst.TRANSACTION_ID: tx_id,
                                             MessageConst.TRANSACTION_CHECK_TIMES: str(times)},
                      queue_offset=7, commitlog_offset=4096)


def _slowly_answered(receiver, tx_id: str, timeout: float = SLOW + 1.0, plan: list | None = None):
    """The gateway's transactions holding ``tx_id``, whose receiver answers its first check COMMIT after
    SLOW seconds (within the gateway's default ``timeout`` here), then as ``plan`` goes on; and the transaction."""
    from ferrymq.gateways.http.transactions import Transactions

    transactions = Transactions(SECRET, timeout=timeout)
    tx = _record(tx_id, receiver.url)
    transactions.add(tx)
    receiver.plans[tx_id] = plan or ["slow"]
    return transactions, tx


def _checked_twice(transactions, tx_id: str, gap: float):
    """The answers to the broker's first check of ``tx_id`` and to its second, ``gap`` seconds later (while
    the first one's call may still be out)."""
    import asyncio

    async def main():
        first = asyncio.create_task(transactions.check(_check_of(tx_id, 1)))
        await asyncio.sleep(gap)
        second = await transactions.check(_check_of(tx_id, 2))
        first = await first
        await transactions.close()
        return first, second

    return asyncio.run(main())


def test_a_client_decision_during_a_check_back_stands_and_later_checks_answer_it_unasked(receiver):
    import asyncio

    from ferrymq.gateways.http.transactions import State
    from ferrymq.sdk.producer import LocalTransactionState

    async def main():
        transactions, tx = _slowly_answered(receiver, "TX-RACE")
        checking = asyncio.create_task(transactions.check(_check_of("TX-RACE", 1)))
        await asyncio.sleep(0.3)
        assert (tx.queue_offset, tx.offset_msg_id) == (7, _check_of("TX-RACE", 1).offset_msg_id)  # the check's copy
        tx.resolve(State.ROLLBACK, "client")
        first = await checking
        second = await transactions.check(_check_of("TX-RACE", 2))
        await transactions.close()
        return tx, first, second

    tx, first, second = asyncio.run(main())
    assert first is second is LocalTransactionState.ROLLBACK_MESSAGE
    assert [(c.answer, c.url, c.detail) for c in tx.check_backs] == [
        (State.COMMIT, receiver.url, "the client resolved it ROLLBACK meanwhile; that stands"),
        (State.ROLLBACK, None, "resolved by the client already; answered from the gateway's record")]
    assert len(receiver.calls_of("TX-RACE")) == 1


def test_a_check_arriving_while_a_call_is_out_waits_for_its_answer_and_calls_nobody(receiver):
    """The broker checks a half message again when an answer is slow (on a new copy each time): the
    receiver is called once, and both checks are answered with what it said."""
    from ferrymq.gateways.http.transactions import State
    from ferrymq.sdk.producer import LocalTransactionState

    transactions, tx = _slowly_answered(receiver, "TX-TWICE")
    first, second = _checked_twice(transactions, "TX-TWICE", gap=0.3)
    assert first is second is LocalTransactionState.COMMIT_MESSAGE
    assert len(receiver.calls_of("TX-TWICE")) == 1
    assert [(c.answer, c.url, c.check_times) for c in tx.check_backs] == [
        (State.COMMIT, receiver.url, 1), (State.COMMIT, None, 2)]
    assert (tx.state, tx.resolved_by) == (State.COMMIT, "checkBack")


def test_a_check_arriving_while_a_call_is_out_that_learns_nothing_asks_for_itself(receiver):
    """The broker's next check comes while the first check's call is still out (a slow receiver, a
    loaded machine): when that call ends UNKNOWN (here cut off by the gateway's timeout), the waiting
    check calls the receiver itself with its own checkTimes, rather than spend one of the broker's
    transactionCheckMax checks unasked."""
    from ferrymq.gateways.http.transactions import State
    from ferrymq.sdk.producer import LocalTransactionState

    transactions, tx = _slowly_answered(receiver, "TX-AGAIN", timeout=0.5, plan=["slow", "COMMIT"])
    first, second = _checked_twice(transactions, "TX-AGAIN", gap=0.2)
    assert (first, second) == (LocalTransactionState.UNKNOW, LocalTransactionState.COMMIT_MESSAGE)
    assert [(c["json"]["checkTimes"], c["answered"]) for c in receiver.calls_of("TX-AGAIN")] == \
        [(1, "slow"), (2, "COMMIT")]
    assert [(c.answer, c.url, c.check_times) for c in tx.check_backs] == [
        (State.UNKNOWN, receiver.url, 1), (State.COMMIT, receiver.url, 2)]
    assert (tx.state, tx.resolved_by) == (State.COMMIT, "checkBack")


def test_the_record_keeps_the_latest_transactions_and_check_backs(monkeypatch):
    import asyncio

    from ferrymq.gateways.http import transactions as module

    monkeypatch.setattr(module, "TRANSACTIONS_KEPT", 3)
    kept = module.Transactions(SECRET, timeout=0.2)
    for i in range(5):
        kept.add(_record(f"TX-{i}", "http://127.0.0.1:9/nobody"))
    assert [kept.get(f"TX-{i}") is not None for i in range(5)] == [False, False, True, True, True]
    tx = kept.get("TX-4")

    async def checks():
        for times in range(1, module.CHECK_BACKS_KEPT + 3):
            assert await kept.check(_check_of("TX-4", times)) is module.LocalTransactionState.UNKNOW
        await kept.close()

    asyncio.run(checks())
    assert len(tx.check_backs) == module.CHECK_BACKS_KEPT
    assert tx.check_backs[0].check_times == 3 and tx.check_backs[-1].check_times == module.CHECK_BACKS_KEPT + 2
    assert tx.check_backs[-1].status is None and "ConnectError" in tx.check_backs[-1].detail
