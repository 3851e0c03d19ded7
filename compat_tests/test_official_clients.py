"""Issue 4: everyday messaging with the official clients, unmodified, against Apache RocketMQ and FerryMQ.

Each test runs for every (server, client) pair: ``server`` is Apache 5.5.0 or ``ferrymq standalone``
(configured alike, see servers.py), ``client`` the Java client 5.5.0, the Java client 4.9.8 or the Go
client v2.1.2. A test that passes on Apache and fails on FerryMQ is a FerryMQ bug.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter, defaultdict

from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request

from .servers import DELAY_LEVEL_3_MS
from .socket_client import call

#: how long a client waits for the messages it expects before giving up (seconds)
WAIT = 45


def fresh(prefix: str) -> tuple[str, str]:
    tag = uuid.uuid4().hex[:10]
    return f"Compat{prefix}_{tag}", f"compat_{prefix.lower()}_{tag}"


def write_spec(tmp_path, entries: list[dict]) -> str:
    path = tmp_path / f"spec-{uuid.uuid4().hex[:6]}.json"
    path.write_text(json.dumps(entries))
    return str(path)


def bodies(result) -> list[str]:
    return [e["body"] for e in result.of("received")]


def wait_until_offline(server, group: str, timeout: float = 15) -> None:
    """Waits until the broker lists no consumer of ``group`` (it drops one when its connection closes).

    A scenario about a group that left and came back starts its second consumer only then: one the
    broker still counted would be given half of the queues at the first rebalance.
    """
    ask = request(RequestCode.GET_CONSUMER_LIST_BY_GROUP, {"consumerGroup": group})
    deadline = time.monotonic() + timeout
    while True:
        reply = call(server.broker_addr, ask, timeout=3)
        if reply.code != ResponseCode.SUCCESS:  # "no consumer for this group"
            return
        assert time.monotonic() < deadline, f"{server.kind} still lists consumers of {group} after {timeout} s: {reply.body!r}"
        time.sleep(0.1)


SEND_MODES = ("sync", "async", "oneway", "batch")


def test_send_modes_sync_async_oneway_batch(server, client, together, request):
    """Every send mode stores the messages (SEND_OK for sync/async/batch); a consumer receives each once."""
    def scenario(client):
        topic, group = fresh("Modes")
        for mode in SEND_MODES:
            res = client("send", n=server.namesrv_addr, t=topic, count=3, mode=mode, body=mode).check()
            assert res.one("done")["sent"] == 3, res.explain()
            if mode != "oneway":
                ok = "SEND_OK" if client.is_java else 0
                assert {e["status"] for e in res.of("sent")} == {ok}, res.explain()
        got = client("consume", n=server.namesrv_addr, t=topic, g=group, count=12, timeout=WAIT, linger=1).check()
        assert sorted(bodies(got)) == sorted(f"{m} #{i}" for m in SEND_MODES for i in range(3)), got.explain()

    together.run(request, client, scenario)


def test_ordered_send_with_queue_selector_and_orderly_consumer(server, client, tmp_path, together, request):
    """Messages of one sharding key go to one queue (hash selector) and an orderly consumer sees them in
    send order; each queue is seen in strictly increasing queue offsets."""
    def scenario(client):
        topic, group = fresh("Ordered")
        keys = [f"order-{k}" for k in range(4)]
        spec = [{"body": f"{key}:{seq}", "shard": key} for seq in range(5) for key in keys]
        sent = client("send", n=server.namesrv_addr, t=topic, spec=write_spec(tmp_path, spec), mode="selector").check()
        queue_of_key = defaultdict(set)
        for e in sent.of("sent"):
            queue_of_key[spec[e["index"]]["shard"]].add(e["queueId"])
        assert all(len(q) == 1 for q in queue_of_key.values()), f"a key spread over queues: {dict(queue_of_key)}"
        got = client("consume", n=server.namesrv_addr, t=topic, g=group, count=len(spec), orderly=True,
                     timeout=WAIT).check()
        seen = defaultdict(list)
        offsets = defaultdict(list)
        for e in got.of("received"):
            key, seq = e["body"].split(":")
            seen[key].append(int(seq))
            offsets[e["queueId"]].append(e["queueOffset"])
        assert {k: v for k, v in seen.items()} == {k: list(range(5)) for k in keys}, got.explain()
        assert all(o == sorted(set(o)) for o in offsets.values()), f"per-queue offsets out of order: {dict(offsets)}"

    together.run(request, client, scenario)


def test_push_consumer_tag_expression(server, client, tmp_path, together, request):
    """`TagA || TagB` receives exactly the TagA and TagB messages, never TagC (checked for 2 s more)."""
    def scenario(client):
        topic, group = fresh("Tags")
        spec = [{"body": f"{tag}-{i}", "tag": tag} for tag in ("TagA", "TagB", "TagC") for i in range(3)]
        client("send", n=server.namesrv_addr, t=topic, spec=write_spec(tmp_path, spec)).check()
        got = client("consume", n=server.namesrv_addr, t=topic, g=group, expr="TagA || TagB", count=6,
                     timeout=WAIT, linger=2).check()
        assert sorted(bodies(got)) == sorted(f"{t}-{i}" for t in ("TagA", "TagB") for i in range(3)), got.explain()
        assert {e["tags"] for e in got.of("received")} == {"TagA", "TagB"}

    together.run(request, client, scenario)


def test_broadcasting_every_consumer_gets_every_message(server, client, together, request):
    """Two broadcasting consumers of one group each receive all 5 messages."""
    def scenario(client):
        topic, group = fresh("Bcast")
        client("send", n=server.namesrv_addr, t=topic, count=1, body="first").check()
        consumers = [client.spawn("consume", n=server.namesrv_addr, t=topic, g=group, model="broadcasting", count=5,
                                  timeout=WAIT, linger=1, instance=f"bcast-{i}") for i in range(2)]
        try:
            for c in consumers:
                c.wait_for("started")
            client("send", n=server.namesrv_addr, t=topic, count=4, body="more").check()
            results = [c.finish(WAIT + 30) for c in consumers]
        finally:
            for c in consumers:
                c.kill()
        for res in results:
            assert sorted(bodies(res.check())) == ["first"] + [f"more #{i}" for i in range(4)], res.explain()

    together.run(request, client, scenario)


def test_pull_and_lite_pull_consumer(server, client, together, request):
    """Java's DefaultLitePullConsumer / Go's pull consumer drain every message of the topic exactly once."""
    def scenario(client):
        topic, group = fresh("Pull")
        sent = client("send", n=server.namesrv_addr, t=topic, count=6, body="pull").check()
        got = client("pull", n=server.namesrv_addr, t=topic, g=group, count=6, timeout=WAIT).check()
        assert sorted(bodies(got)) == [f"pull #{i}" for i in range(6)], got.explain()
        assert {e["msgId"] for e in got.of("received")} == {e["msgId"] for e in sent.of("sent")}

    together.run(request, client, scenario)


def test_second_consumer_joins_and_leaves_the_group(server, client, record_property, together, request):
    """While 60 messages are sent in 3 rounds, a second consumer joins the group (rebalance splits the
    queues), then leaves (the first takes them back): every message is consumed; duplicates are counted
    and reported (at-least-once allows them around a rebalance)."""
    expected = {"warm-up"} | {f"round{r} #{i}" for r in (1, 2, 3) for i in range(20)}

    def scenario(client):
        topic, group = fresh("JoinLeave")
        ns = server.namesrv_addr
        client("send", n=ns, t=topic, count=1, body="warm-up").check()
        first = client.spawn("consume", n=ns, t=topic, g=group, count=1000, timeout=120, instance="join-a")
        second = None
        try:
            first.wait_for("started")
            client("send", n=ns, t=topic, count=20, body="round1").check()
            # The second consumer leaves once it got nothing for 2 s (or after 12 s in the group).
            second = client.spawn("consume", n=ns, t=topic, g=group, count=1000, timeout=12, idle=2, instance="join-b")
            second.wait_for("started")
            # Round 2 goes out over 5 s, so the second consumer's first rebalance (which the clients run
            # asynchronously after start) finds messages to take whatever the machine's load.
            client("send", n=ns, t=topic, count=20, body="round2", interval=0.25).check()
            results_b = second.finish(60)
            client("send", n=ns, t=topic, count=20, body="round3").check()
            # The first consumer runs until everything arrived (or 45 s): it must take the queues back.
            deadline = time.monotonic() + WAIT
            while set(bodies(first.result()) + bodies(results_b)) < expected and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(1)  # late duplicates
            first.kill()
            results_a = first.finish(30)
        finally:
            first.kill()
            if second is not None:
                second.kill()
        return results_a, results_b

    results_a, results_b = together.run(request, client, scenario)
    seen = Counter(bodies(results_a) + bodies(results_b))
    duplicates = sum(n - 1 for n in seen.values())
    record_property("duplicates", duplicates)
    print(f"{server.kind}/{client.name}: first consumer {len(bodies(results_a))}, second {len(bodies(results_b))}, "
          f"duplicates {duplicates}")
    assert set(seen) == expected, f"missing {sorted(expected - set(seen))}:\n{results_a.explain()}"
    assert bodies(results_b), "the second consumer got no queue while it was in the group:\n" + results_b.explain()
    assert duplicates <= 20, f"{duplicates} duplicates: more than one round re-delivered"


def test_consumer_restart_resumes_from_committed_offset(server, client, together, request):
    """A consumer that consumed 8 messages and shut down commits its offset; restarted, the group gets the
    4 messages sent meanwhile and none of the first 8 again."""
    def scenario(client):
        topic, group = fresh("Restart")
        ns = server.namesrv_addr
        client("send", n=ns, t=topic, count=8, body="before").check()
        first = client("consume", n=ns, t=topic, g=group, count=8, timeout=WAIT, linger=1).check()
        assert sorted(bodies(first)) == sorted(f"before #{i}" for i in range(8)), first.explain()
        wait_until_offline(server, group)
        client("send", n=ns, t=topic, count=4, body="after").check()
        again = client("consume", n=ns, t=topic, g=group, count=4, timeout=WAIT, linger=2).check()
        assert sorted(bodies(again)) == [f"after #{i}" for i in range(4)], again.explain()

    together.run(request, client, scenario)


def test_reconsume_later_goes_through_the_retry_topic(server, client, together, request):
    """RECONSUME_LATER on the first delivery: each message comes back once more, with reconsumeTimes 1,
    through %RETRY%<group>, no sooner than delay level 3 (4 s here)."""
    def scenario(client):
        topic, group = fresh("Retry")
        ns = server.namesrv_addr
        client("send", n=ns, t=topic, count=3, body="retry").check()
        got = client("consume", n=ns, t=topic, g=group, count=6, reconsume=1, timeout=WAIT, linger=1,
                     **client.rebalancing_every_second()).check()
        by_body = defaultdict(list)
        for e in got.of("received"):
            by_body[e["body"]].append(e)
        assert sorted(by_body) == [f"retry #{i}" for i in range(3)], got.explain()
        for body, deliveries in by_body.items():
            assert [d["reconsumeTimes"] for d in deliveries] == [0, 1], f"{body}: {deliveries}"
            again = deliveries[1]
            assert again["topic"] == topic
            # The broker's send-back records the original topic in RETRY_TOPIC and the first delivery's id in
            # ORIGIN_MESSAGE_ID; the client restores the topic from it when it pulls from %RETRY%<group>.
            props = again["properties"] or {}
            assert props.get("RETRY_TOPIC") == topic, again
            assert props.get("ORIGIN_MESSAGE_ID"), again
            waited = again["receivedAt"] - deliveries[0]["receivedAt"]
            assert waited >= DELAY_LEVEL_3_MS - 1000, f"{body} came back after {waited} ms"

    together.run(request, client, scenario)
