"""Transactions over HTTP outliving a restart of `ferrymq standalone`, whose gateway keeps its open
transactions in ``{storePathRootDir}/http-transactions.json``. A killed `ferrymq gateway http` is
compat_tests/test_http_gateway.py's, in front of Apache and of FerryMQ."""

from __future__ import annotations

import pytest

from .check_back_receiver import Receiver
from .http_client import Gateway, wait_for
from .test_http_transactions import BROKER_KEYS, SECRET, _begin, _end, _get, _names

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path_factory.mktemp("http-tx-restart"), BROKER_KEYS, http=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def receiver():
    r = Receiver(SECRET)
    yield r
    r.close()


def test_open_transactions_outlive_a_restart(server, receiver):
    """Half messages published, then the server stopped before any decision: once it is back, the
    client's commit of one commits it, and the broker's check of the other calls its check-back URL
    again, whose COMMIT is applied; both are delivered and the record keeps the check-backs made before
    the restart."""
    topic, group, producers = _names()
    server.create_topic(topic, 1)
    gw = Gateway(server.http_url)
    by_client = _begin(gw, topic, producers, receiver.url, body="committed by the client")
    by_check = _begin(gw, topic, producers, receiver.url, body="committed by a check-back")
    gw.close()
    server.stop()  # checks before it, if the machine is slow, are answered UNKNOWN (no plan yet)
    asked_before = len(receiver.calls_of(by_check["transactionId"]))
    receiver.plans[by_check["transactionId"]] = ["COMMIT"]
    server.start()
    gw = Gateway(server.http_url)
    try:
        done = _end(gw, by_client["transactionId"], "commit")
        assert done.status_code == 200 and done.json()["resolvedBy"] == "client", done.text
        seen = wait_for(lambda: (tx := _get(gw, by_check["transactionId"]))["state"] != "UNKNOWN" and tx)
        assert (seen["state"], seen["resolvedBy"]) == ("COMMIT", "checkBack"), seen
        assert [c["answer"] for c in seen["checkBacks"]] == ["UNKNOWN"] * asked_before + ["COMMIT"], seen
        assert len(receiver.calls_of(by_check["transactionId"])) == asked_before + 1
        # at least once: a commit crossing a check of another copy of the half message delivers it twice
        assert _received_ids(gw, topic, group, 2) == {by_client["msgId"], by_check["msgId"]}
    finally:
        gw.close()


def _received_ids(gw: Gateway, topic: str, group: str, count: int) -> set[str]:
    """The msgIds received (and acked) until ``count`` distinct ones are in, or 20 s pass."""
    ids: set[str] = set()

    def more() -> bool:
        msgs = gw.receive(topic, group, wait=1, max=32)
        if msgs:
            gw.ack(topic, group, msgs)
        ids.update(m["msgId"] for m in msgs)
        return len(ids) >= count

    wait_for(more)
    return ids
