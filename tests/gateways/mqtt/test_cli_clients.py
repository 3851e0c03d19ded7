"""The command-line clients devices and their operators use: mosquitto_pub/mosquitto_sub and the MQTT.js CLI.

Each scenario runs against mosquitto first, then FerryMQ, as test_behaviour.py does with paho-mqtt: what a
scenario expects is proven on the reference broker in the same test. mosquitto_sub prints QoS, the retain
flag and MQTT 5 properties (``-F %j``); the MQTT.js CLI prints the topic and payload.
"""

from __future__ import annotations

import functools

import pytest

from .cli_clients import Subscriber, mosquitto_pub, mosquitto_pub_lines, mqtt_js_pub
from .devices import fresh_topic

pytestmark = pytest.mark.timeout(120)

PUBLISHERS = {"mosquitto_pub": mosquitto_pub, "mqtt-js": mqtt_js_pub}


def _subscribed(subscriber: Subscriber, port: int, probe_topic: str) -> Subscriber:
    """``subscriber`` once its subscription is in place; stopped if it never is."""
    try:
        subscriber.wait_subscribed(probe_topic, functools.partial(mosquitto_pub, port))
    except BaseException:
        subscriber.close()
        raise
    return subscriber


@pytest.mark.parametrize("publisher", PUBLISHERS)
@pytest.mark.parametrize("version", [4, 5])
def test_qos_0_1_2_from_the_command_line(brokers, publisher, version):
    """One message at each QoS, published by the CLI: a QoS 2 mosquitto_sub receives each at its own QoS with
    the retain flag clear; an MQTT.js subscriber receives all three."""
    publish = PUBLISHERS[publisher]
    for name, port in brokers:
        topic = fresh_topic()
        with _subscribed(Subscriber.mosquitto(port, f"{topic}/#", 2, version), port, f"{topic}/probe") as sub, \
                _subscribed(Subscriber.mqtt_js(port, f"{topic}/#", 1, version), port, f"{topic}/probe") as js:
            for qos in (0, 1, 2):
                publish(port, f"{topic}/q{qos}", f"m{qos}", qos, version)
            got = sub.receive(3)
            assert sorted((m.topic, m.payload, m.qos, m.retain) for m in got) == [
                (f"{topic}/q{q}", f"m{q}", q, False) for q in (0, 1, 2)], name
            assert sorted((m.topic, m.payload) for m in js.receive(3)) == [
                (f"{topic}/q{q}", f"m{q}") for q in (0, 1, 2)], name
            sub.nothing_more(0.3)
            js.nothing_more(0)


def test_wildcard_filters_from_the_command_line(brokers):
    """mosquitto_sub on ``T/+/temp`` and an MQTT.js subscriber on ``T/#`` get exactly the topics they match
    of those mosquitto_pub and MQTT.js publish; one on ``T/room1/temp`` only that topic."""
    for name, port in brokers:
        topic = fresh_topic()
        probe = f"{topic}/probe/temp"
        with _subscribed(Subscriber.mosquitto(port, f"{topic}/+/temp", 1), port, probe) as plus, \
                _subscribed(Subscriber.mqtt_js(port, f"{topic}/#", 1), port, probe) as hash_, \
                _subscribed(Subscriber.mosquitto(port, f"{topic}/room1/temp", 1, 4), port, f"{topic}/room1/temp") \
                as exact:
            names = [f"{topic}/room1/temp", f"{topic}/room2/temp", f"{topic}/room1/hum", topic, f"{topic}/a/b/c"]
            for i, n in enumerate(names):
                (mosquitto_pub if i % 2 else mqtt_js_pub)(port, n, n, 1)
            assert sorted(m.topic for m in plus.receive(2)) == [f"{topic}/room1/temp", f"{topic}/room2/temp"], name
            assert sorted(m.topic for m in hash_.receive(5)) == sorted(names), name  # '#' includes the parent
            assert [(m.topic, m.payload) for m in exact.receive(1)] == [(names[0], names[0])], name
            plus.nothing_more(0.3)
            exact.nothing_more(0)


@pytest.mark.parametrize("publisher", PUBLISHERS)
def test_mqtt5_user_properties_from_the_command_line(brokers, publisher):
    """User properties given to mosquitto_pub (``-D publish user-property``) or to the MQTT.js CLI reach an
    MQTT 5 mosquitto_sub as sent; a content type given to mosquitto_pub too."""
    for name, port in brokers:
        topic = fresh_topic()
        with _subscribed(Subscriber.mosquitto(port, f"{topic}/#", 1), port, f"{topic}/probe") as sub:
            props = {"region": "eu", "unit": "C"}
            PUBLISHERS[publisher](port, f"{topic}/dev1", "21.5", 1, user_properties=props)
            mosquitto_pub(port, f"{topic}/dev2", "{}", 1, content_type="application/json")
            first, second = sub.receive(2)
            assert (first.topic, first.payload, first.user_properties) == (f"{topic}/dev1", "21.5", props), name
            assert (second.topic, second.content_type, second.user_properties) == (
                f"{topic}/dev2", "application/json", {}), name


@pytest.mark.parametrize("qos", [0, 1, 2])
def test_a_stream_on_one_topic_arrives_in_order(brokers, qos):
    """50 messages that one mosquitto_pub connection publishes on one topic (``-l``) reach a mosquitto_sub
    of that topic in the order they were sent (MQTT 4.6: each topic is an ordered topic).

    MQTT 3.1.1: over MQTT 5, mosquitto 2.0.11 and mosquitto_sub disagree on the Receive Maximum window at
    QoS 2, and mosquitto_sub leaves with a protocol error after 20 messages of such a burst."""
    for name, port in brokers:
        topic = fresh_topic()
        with _subscribed(Subscriber.mosquitto(port, f"{topic}/#", qos, 4), port, f"{topic}/probe") as sub:
            lines = [f"reading {i}" for i in range(50)]
            mosquitto_pub_lines(port, f"{topic}/dev1", lines, qos, 4)
            assert [m.payload for m in sub.receive(len(lines))] == lines, name


def test_a_wider_filter_on_a_subscribed_topic_gets_its_messages_at_once(brokers):
    """A mosquitto_sub of ``T/room1/temp`` has its messages; an MQTT.js subscriber of ``T/+/temp`` joins
    and gets ``T/room2/temp`` within the probe's wait (10 s), like the exact one gets its own."""
    for name, port in brokers:
        topic = fresh_topic()
        exact = f"{topic}/room1/temp"
        with _subscribed(Subscriber.mosquitto(port, exact, 1), port, exact) as narrow, \
                _subscribed(Subscriber.mqtt_js(port, f"{topic}/+/temp", 1), port, f"{topic}/probe/temp") as wide:
            mosquitto_pub(port, f"{topic}/room2/temp", "room2", 1)
            mosquitto_pub(port, exact, "room1", 1)
            assert sorted((m.topic, m.payload) for m in wide.receive(2)) == [
                (exact, "room1"), (f"{topic}/room2/temp", "room2")], name
            assert [(m.topic, m.payload) for m in narrow.receive(1)] == [(exact, "room1")], name
