"""Average queue allocation: Java's shares, and the properties every group relies on."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from ferrymq.sdk.consumer.allocate import allocate_average, sort_queues
from ferrymq.wire.bodies import MessageQueue


def queues(n: int, brokers: int = 1) -> list[MessageQueue]:
    return [MessageQueue("T", f"broker-{b}", q) for b in range(brokers) for q in range(n)]


def test_eight_queues_three_consumers_match_java():
    mqs = queues(8)
    cids = ["c1", "c2", "c3"]
    shares = [[mq.queue_id for mq in allocate_average(c, mqs, cids)] for c in cids]
    # 8 % 3 = 2: the first two consumers take 3 queues, the last 2, in contiguous blocks
    assert shares == [[0, 1, 2], [3, 4, 5], [6, 7]]


def test_more_consumers_than_queues_leaves_the_last_idle():
    mqs = queues(2)
    cids = ["a", "b", "c"]
    assert [mq.queue_id for mq in allocate_average("a", mqs, cids)] == [0]
    assert [mq.queue_id for mq in allocate_average("b", mqs, cids)] == [1]
    assert allocate_average("c", mqs, cids) == []


def test_unknown_consumer_gets_nothing():
    assert allocate_average("stranger", queues(4), ["a", "b"]) == []


def test_input_order_does_not_matter():
    mqs = queues(4, brokers=2)
    assert allocate_average("b", list(reversed(mqs)), ["b", "a"]) == allocate_average("b", mqs, ["a", "b"])
    assert sort_queues(reversed(mqs)) == mqs


@settings(max_examples=150, deadline=None)
@given(n_queues=st.integers(0, 40), brokers=st.integers(1, 3), n_cids=st.integers(1, 12))
def test_shares_partition_the_queues_evenly(n_queues, brokers, n_cids):
    mqs = queues(n_queues, brokers)
    cids = [f"10.0.0.{i}@{i}" for i in range(n_cids)]
    shares = [allocate_average(c, mqs, cids) for c in cids]
    flat = [mq for share in shares for mq in share]
    assert sorted(flat, key=lambda q: (q.broker_name, q.queue_id)) == sort_queues(mqs), "every queue exactly once"
    sizes = [len(s) for s in shares]
    assert max(sizes) - min(sizes) <= 1, f"uneven shares {sizes}"

