"""Issue 27, POP consumption: the Java 5.5.0 remoting push consumer pops once ``mqadmin setConsumeMode -m POP``
told the broker (its QUERY_ASSIGNMENT then answers the group's queues with mode POP and queue id -1), against
Apache 5.5.0 and FerryMQ alike.

The 5.5.0 push consumer pops only when it lets the broker balance (``setClientRebalance(false)``) and never for
an orderly listener (its RebalancePushImpl keeps client rebalancing then), so FIFO POP is covered by the
broker's own tests. A RECONSUME_LATER'd popped message is hidden for the first of the client's fixed POP
delay levels (10 s) and comes back through ``%RETRY%group_topic``; past maxReconsumeTimes this client acks it
rather than sending it to a DLQ.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict

from .test_official_clients import fresh

#: the client's first POP delay level (DefaultMQPushConsumer.popDelayLevel[0], seconds)
POP_DELAY_S = 10


def progress_rows(output: str, topic: str) -> list[list[str]]:
    """consumerProgress rows of ``topic``: topic, broker, queue, broker offset, consumer offset, ..."""
    return [line.split() for line in output.splitlines() if line.split()[:1] == [topic]]


def test_push_consumer_in_pop_mode(server, java5, mqadmin5):
    """Every message popped, RECONSUME_LATER'd once, back with reconsumeTimes 1 after the POP delay, acked; the
    deliveries carry the POP_CK handle; consumerProgress shows the group caught up on the topic."""
    topic, group = fresh("Pop")
    ns = server.namesrv_addr
    java5("send", "-n", ns, "-t", topic, "-count", "3", "-body", "pop").check()
    out = mqadmin5(ns, "setConsumeMode", "-c", server.cluster, "-t", topic, "-g", group, "-m", "POP", "-q", "0")
    assert "set consume mode to" in out.lower() or "success" in out.lower(), out
    got = java5("consume", "-n", ns, "-t", topic, "-g", group, "-count", "6", "-reconsume", "1",
                "-clientRebalance", "false", "-timeout", "40000", "-linger", "500", timeout=90).check()
    by_body = defaultdict(list)
    for e in got.of("received"):
        by_body[e["body"]].append(e)
    assert sorted(by_body) == [f"pop #{i}" for i in range(3)], got.explain()
    for body, deliveries in by_body.items():
        assert [d["reconsumeTimes"] for d in deliveries] == [0, 1], f"{body}: {deliveries}"
        first, again = deliveries
        assert first["topic"] == again["topic"] == topic
        ck = (first["properties"] or {}).get("POP_CK", "")
        assert re.fullmatch(r"\d+ \d+ \d+ \d+ 0 \S+ \d+ \d+", ck), first  # popped, not pulled
        assert (again["properties"] or {}).get("POP_CK", "").split(" ")[4] == "1", again  # from %RETRY%group_topic
        assert again["receivedAt"] - first["receivedAt"] >= (POP_DELAY_S - 1) * 1000, deliveries

    deadline = time.monotonic() + 15
    while True:  # acks reach the offsets asynchronously
        # -t: the group's POP retry topic may not be routed by the name server yet (Apache registers it
        # later), and consumerProgress of the whole group then fails on its route
        progress = mqadmin5(ns, "consumerProgress", "-g", group, "-t", topic)
        rows = progress_rows(progress, topic)
        if (rows and sum(int(r[4]) for r in rows) == 3) or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert sum(int(r[3]) for r in rows) == sum(int(r[4]) for r in rows) == 3, progress
