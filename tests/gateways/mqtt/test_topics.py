"""Topic filters: validity, matching (spec 4.7 examples), ``$`` topics and shared subscriptions."""

from __future__ import annotations

import pytest
from ferrymq.gateways.mqtt.topics import (
    SharedFilter,
    is_valid_filter,
    is_valid_topic_name,
    matches,
    parse_shared,
)


@pytest.mark.parametrize("topic_filter, topic, expected", [
    ("sport/tennis/player1/#", "sport/tennis/player1", True),
    ("sport/tennis/player1/#", "sport/tennis/player1/ranking", True),
    ("sport/tennis/player1/#", "sport/tennis/player1/score/wimbledon", True),
    ("sport/#", "sport", True),
    ("#", "sport/tennis", True),
    ("#", "/", True),
    ("sport/tennis/+", "sport/tennis/player1", True),
    ("sport/tennis/+", "sport/tennis/player1/tracking", False),
    ("sport/+", "sport", False),
    ("sport/+", "sport/", True),
    ("+/+", "/finance", True),
    ("/+", "/finance", True),
    ("+", "/finance", False),
    ("+/tennis/#", "sport/tennis", True),
    ("sport/tennis", "sport/tennis", True),
    ("sport/tennis", "sport/tennis/", False),
    ("sport/tennis", "Sport/tennis", False),
    ("a/b", "a", False),
    # $ topics: no wildcard in the first level matches them (MQTT-4.7.2-1)
    ("#", "$SYS/broker", False),
    ("+/monitor/Clients", "$SYS/monitor/Clients", False),
    ("$SYS/#", "$SYS/monitor/Clients", True),
    ("$SYS/monitor/+", "$SYS/monitor/Clients", True),
    ("a/#", "a/$b", True),
])
def test_matching(topic_filter, topic, expected):
    assert is_valid_filter(topic_filter)
    assert matches(topic_filter, topic) is expected


@pytest.mark.parametrize("topic_filter, valid", [
    ("#", True), ("+", True), ("a/+/b", True), ("/", True), ("+/+", True), ("a/#", True),
    ("", False), ("a#", False), ("a/#/b", False), ("a+/b", False), ("a/b+", False), ("##", False),
    ("$share/g/a/+", True), ("$share/g/#", True),
    ("$share//a", False), ("$share/g+/a", False), ("$share/g", False), ("$share/g/", False),
    ("$share/g/a#", False),
])
def test_filter_validity(topic_filter, valid):
    assert is_valid_filter(topic_filter) is valid


@pytest.mark.parametrize("name, valid", [("a/b", True), ("/", True), ("$SYS/x", True), ("", False),
                                         ("a/+", False), ("#", False)])
def test_topic_name_validity(name, valid):
    assert is_valid_topic_name(name) is valid


def test_shared_subscriptions():
    assert parse_shared("$share/consumers/sensors/+/temperature") == SharedFilter("consumers",
                                                                                   "sensors/+/temperature")
    assert parse_shared("$share/g/#") == SharedFilter("g", "#")
    assert parse_shared("sensors/#") is None
    assert parse_shared("$SYS/#") is None
    with pytest.raises(ValueError):
        parse_shared("$share/g")
    with pytest.raises(ValueError):
        parse_shared("$share/#/a")
