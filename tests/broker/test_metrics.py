"""The broker's metric families read from its own tables (the scrape through HTTP is in
tests/gateways/test_http_metrics.py)."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from ferrymq.server.broker.metrics import BrokerMetrics, Rates
from ferrymq.wire import topics as names
from tests.broker.conftest import FakeChannel


class Ticks:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def _samples(families, name: str) -> dict[tuple, float]:
    """``{label values: value}`` of the family ``name``."""
    [family] = [f for f in families if f.name == name]
    return {tuple(s.labels.values()): s.value for s in family.samples}


def test_lag_is_per_queue_and_per_group_and_the_retry_topic_has_its_own_family(bk):
    for queue_id, count in ((0, 3), (1, 2)):
        for _ in range(count):
            bk.send("LagT", queue_id=queue_id)
    bk.send(names.retry_topic("g1"))
    bk.ctx.offsets.commit("g1", "LagT", 0, 1)
    bk.ctx.offsets.commit("g1", "LagT", 1, 2)
    bk.ctx.offsets.commit("g1", names.retry_topic("g1"), 0, 0)
    bk.heartbeat("g1", "LagT", model="BROADCASTING")

    families = BrokerMetrics(bk.ctx).collect()
    queue_diff = _samples(families, "ferrymq_group_queue_diff")
    assert queue_diff[("DefaultCluster", "broker-a", "LagT", "g1", "0")] == 2
    assert queue_diff[("DefaultCluster", "broker-a", "LagT", "g1", "1")] == 0
    assert _samples(families, "rocketmq_group_diff") == {("g1", "LagT", "1", "0"): 2}  # one consumer, BROADCASTING
    assert _samples(families, "rocketmq_group_retrydiff") == {("g1", names.retry_topic("g1"), "1", "0"): 1}
    assert _samples(families, "rocketmq_consumer_offset")[("DefaultCluster", "broker-a", "LagT", "g1")] == 3
    offsets = _samples(families, "rocketmq_producer_offset")
    assert offsets[("DefaultCluster", "broker-a", "LagT")] == 5
    assert ("DefaultCluster", "broker-a", names.SCHEDULE_TOPIC) not in offsets  # system topics are left out
    assert _samples(families, "rocketmq_topic_retry_offset") == {
        ("DefaultCluster", "broker-a", names.retry_topic("g1")): 1}


def test_consumers_and_producers_are_counted_per_group_as_the_exporter_labels_them(bk):
    bk.heartbeat("g1", "T", channel=FakeChannel("10.0.0.1:5001"), client_id="c1")
    bk.heartbeat("g1", "T", channel=FakeChannel("10.0.0.2:5002"), client_id="c2")
    families = BrokerMetrics(bk.ctx).collect()
    assert _samples(families, "rocketmq_group_count") == {("10.0.0.1:5001,10.0.0.2:5002", "c1,c2", "g1"): 2}
    assert _samples(families, "rocketmq_producer_count") == {("DefaultCluster", "broker-a", "pg"): 2}


def test_topic_tps_is_the_rate_since_the_previous_scrape(bk):
    ticks = Ticks()
    metrics = BrokerMetrics(bk.ctx, clock=ticks)
    bk.send("TpsT")
    first = _samples(metrics.collect(), "rocketmq_producer_tps")
    assert first[("DefaultCluster", "broker-a", "TpsT")] == 0  # what is there may predate the broker's start
    for _ in range(10):
        bk.send("TpsT")
    ticks.t = 5.0
    assert _samples(metrics.collect(), "rocketmq_producer_tps")[("DefaultCluster", "broker-a", "TpsT")] == 2.0


def test_rates_count_a_new_key_from_zero_and_never_go_negative():
    ticks = Ticks()
    rates = Rates(ticks, new_from_zero=True)
    assert rates.update({"a": 100}) == {"a": 0.0}
    ticks.t = 2.0
    assert rates.update({"a": 90, "b": 10}) == {"a": 0.0, "b": 5.0}  # "a" was deleted and re-created


def test_a_group_seen_first_has_no_rate_until_the_next_scrape():
    """After a restart a consumer's first pull shows its pull offset where it left off: not a burst."""
    ticks = Ticks()
    rates = Rates(ticks, new_from_zero=False)
    rates.update({})
    ticks.t = 1.0
    assert rates.update({"g": 1_000_000}) == {"g": 0.0}
    ticks.t = 2.0
    assert rates.update({"g": 1_000_004}) == {"g": 4.0}


def test_a_stalled_reactor_fails_the_collection_in_time():
    """The HTTP thread's wait for the reactor ends at its timeout when the reactor never gets to it."""
    reactor = SimpleNamespace(callFromThread=lambda fn: None)
    metrics = BrokerMetrics(SimpleNamespace(reactor=reactor))
    with pytest.raises(TimeoutError):
        asyncio.run(metrics.collect_from_thread(0.05))
