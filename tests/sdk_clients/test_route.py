"""Route to queues: which queues a producer may write and a consumer may read, and queue selection."""

from __future__ import annotations

from collections import Counter

import pytest

from ferrymq.sdk.route import TopicPublishInfo, publish_info, subscribe_queues
from ferrymq.wire.bodies import BrokerData, MessageQueue, QueueData, TopicRouteData


def route(*brokers: tuple[str, int, int, int, bool]) -> TopicRouteData:
    """(name, read queues, write queues, perm, has master)"""
    return TopicRouteData(
        queue_datas=[QueueData(n, r, w, p) for n, r, w, p, _ in brokers],
        broker_datas=[BrokerData("c", n, {0: f"10.0.0.{i}:10911"} if m else {1: f"10.0.1.{i}:10911"})
                      for i, (n, _, _, _, m) in enumerate(brokers)],
    )


def test_publish_skips_unwritable_and_masterless_brokers():
    r = route(("a", 4, 4, 6, True), ("b", 4, 4, 4, True), ("c", 4, 4, 6, False), ("d", 2, 3, 2, True))
    info = publish_info(r, "T")
    assert Counter(mq.broker_name for mq in info.queues) == {"a": 4, "d": 3}


def test_template_route_caps_queues_per_broker():
    r = route(("a", 8, 8, 7, True))
    info = publish_info(r, "NewTopic", max_queues=4)
    assert info.queues == [MessageQueue("NewTopic", "a", i) for i in range(4)]


def test_order_topic_conf_wins():
    r = route(("a", 8, 8, 6, True), ("b", 8, 8, 6, True))
    r.order_topic_conf = "b:2;a:1"
    info = publish_info(r, "T")
    assert info.order_topic and info.queues == [MessageQueue("T", "b", 0), MessageQueue("T", "b", 1),
                                                MessageQueue("T", "a", 0)]


def test_subscribe_uses_read_queues_of_readable_brokers():
    r = route(("a", 3, 8, 6, True), ("b", 4, 4, 2, True))
    assert subscribe_queues(r, "T") == {MessageQueue("T", "a", i) for i in range(3)}


def test_round_robin_visits_every_queue_evenly():
    info = publish_info(route(("a", 4, 4, 6, True), ("b", 4, 4, 6, True)), "T")
    picks = Counter(info.select_queue() for _ in range(80))
    assert set(picks) == set(info.queues) and set(picks.values()) == {10}


def test_retry_avoids_the_broker_that_failed():
    info = publish_info(route(("a", 4, 4, 6, True), ("b", 4, 4, 6, True)), "T")
    for _ in range(20):
        assert info.select_queue(last_broker="a").broker_name == "b"


def test_retry_with_a_single_broker_still_picks_one():
    info = publish_info(route(("a", 2, 2, 6, True)), "T")
    assert info.select_queue(last_broker="a").broker_name == "a"


def test_no_queues_is_an_error():
    with pytest.raises(ValueError, match="no writable queue"):
        TopicPublishInfo().select_queue()


def test_select_by_hash_matches_javas_selector():
    from ferrymq.sdk.message import Message
    from ferrymq.sdk.producer import select_by_hash
    from ferrymq.wire.message import java_string_hash

    qs = [MessageQueue("T", "a", i) for i in range(4)]
    m = Message("T", b"x")
    assert select_by_hash(qs, m, 6).queue_id == 2  # Integer.hashCode() is the value: 6 % 4
    assert select_by_hash(qs, m, -7).queue_id == 3  # Java: Math.abs(-7 % 4)
    h = java_string_hash("order-42")
    assert select_by_hash(qs, m, "order-42").queue_id == abs(h) % 4
    assert len({select_by_hash(qs, m, "order-42").queue_id for _ in range(10)}) == 1
