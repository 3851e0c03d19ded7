"""Issue 23: the MQTT gateway among the official clients, in front of Apache RocketMQ and of FerryMQ.

On each server of ``server`` (Apache 5.5.0, ``ferrymq standalone``, both with servers.FEATURE_CONFIG) the
gateway is ``mqtt_gateway``: FerryMQ's own, or ``ferrymq gateway mqtt`` in front of Apache. What a device
publishes reaches the Java 5.5.0 and Go push consumers by tag (the MQTT topic below its first level) and by
SQL92 on its MQTT 5 user properties; what the Java and Go producers send with a tag reaches the devices
whose filters match; a ``$share`` group is one more consumer of its RocketMQ consumer group. A scenario
that passes on Apache and fails on FerryMQ is a FerryMQ bug.

Devices are paho-mqtt clients (tests/gateways/mqtt/devices.py).
"""

from __future__ import annotations

import time

from ferrymq.testing import admin

from tests.gateways.mqtt.devices import V5, V311, Device, publish_burst, publish_properties

from .harness import finish_all
from .test_http_gateway import user_properties, wait_for_consumers
from .test_official_clients import WAIT, bodies, fresh, write_spec

# ---------------------------------------------------------------------------------------------- MQTT -> Java, Go

#: published by an MQTT 5 device at QoS 1: (MQTT topic below the first level, MQTT 5 user properties)
DEVICE_PUBLISHED: list[tuple[str, dict[str, str]]] = [
    ("room1/temp", {"region": "eu", "unit": "C"}),
    ("room2/temp", {"region": "us", "unit": "F"}),
    ("room1/temp", {"region": "us", "unit": "F"}),
    ("room1/hum", {"region": "eu", "unit": "%"}),
    ("", {"region": "eu", "unit": "none"}),  # the first level alone: no tag
]
#: published last, by an MQTT 3.1.1 device at QoS 2 (no properties)
V311_PUBLISHED = "room2/temp"
TAG_EXPRESSION = "room1/temp || room2/temp"
#: SQL92 on a user property and on the MQTT topic (``{topic}``: the first level)
SQL_EXPRESSION = "region = 'eu' AND mqttTopic <> '{topic}/room1/temp'"
#: indexes of DEVICE_PUBLISHED (and of the 3.1.1 device's message, after them) each subscription selects
TAG_SELECTS = {0, 1, 2, 5}
SQL_SELECTS = {3, 4}


def test_device_publishes_reach_java_and_go_consumers_by_tag_and_by_sql92(server, mqtt_gateway, java, go):
    """An MQTT 5 device publishes five QoS 1 messages with user properties on topics below one first level,
    an MQTT 3.1.1 device one at QoS 2: a Java and a Go push consumer subscribed to the tags
    `room1/temp || room2/temp`, and a Java and a Go one subscribed to SQL92 on a user property and
    `mqttTopic`, each receive exactly the messages they select (nothing more within 2 s), with the rest of the
    MQTT topic as tag, the whole in `mqttTopic`, the QoS in `mqttQos` and the user properties as message
    properties."""
    topic, group = fresh("MqttOut")
    device, v311 = Device(mqtt_gateway, V5), Device(mqtt_gateway, V311)
    try:
        for i, (rest, props) in enumerate(DEVICE_PUBLISHED):
            mqtt_topic = f"{topic}/{rest}" if rest else topic
            device.publish(mqtt_topic, f"mqtt-{i}".encode(), 1,
                           publish_properties(user_property=list(props.items())))
        v311.publish(f"{topic}/{V311_PUBLISHED}", f"mqtt-{len(DEVICE_PUBLISHED)}".encode(), 2)
    finally:
        device.close()
        v311.close()
    ns = server.namesrv_addr
    consumers = {}
    for name, client in (("java", java), ("go", go)):
        consumers[f"{name} tag"] = (client.spawn("consume", n=ns, t=topic, g=f"{group}_{name}_tag",
                                                 expr=TAG_EXPRESSION, count=len(TAG_SELECTS), timeout=WAIT,
                                                 linger=2), TAG_SELECTS)
        consumers[f"{name} sql"] = (client.spawn("consume", n=ns, t=topic, g=f"{group}_{name}_sql",
                                                 sql=SQL_EXPRESSION.format(topic=topic), count=len(SQL_SELECTS),
                                                 timeout=WAIT, linger=2), SQL_SELECTS)
    results = finish_all({name: running for name, (running, _) in consumers.items()}, WAIT + 30)
    for name, res in results.items():
        selects = consumers[name][1]
        res.check()
        assert sorted(bodies(res)) == sorted(f"mqtt-{i}" for i in selects), f"{name}:\n{res.explain()}"
        for e in res.of("received"):
            i = int(e["body"].removeprefix("mqtt-"))
            rest, props, qos = (*DEVICE_PUBLISHED[i], 1) if i < len(DEVICE_PUBLISHED) else (V311_PUBLISHED, {}, 2)
            assert (e.get("tags") or "") == rest, f"{name}: {e}"
            assert user_properties(e, ["region", "unit", "mqttTopic", "mqttQos"]) == {
                **props, "mqttTopic": f"{topic}/{rest}" if rest else topic, "mqttQos": str(qos)}, f"{name}: {e}"


def test_a_devices_stream_on_one_mqtt_topic_is_one_queue_in_order(server, mqtt_gateway, java):
    """A device publishes 20 QoS 1 messages on one MQTT topic and 20 on another: a Java orderly push
    consumer receives each topic's messages from one queue, in the order they were published (MQTT's
    ordered topics, kept for RocketMQ consumers too)."""
    topic, group = fresh("MqttOrder")
    admin.create_topic(server.broker_addr, topic, 4)
    device = Device(mqtt_gateway, V5)
    try:
        for i in range(20):
            for rest in ("dev1", "dev2"):
                device.publish(f"{topic}/{rest}", f"{rest} #{i}".encode(), 1)
    finally:
        device.close()
    res = java("consume", n=server.namesrv_addr, t=topic, g=group, orderly=True, count=40, timeout=WAIT).check()
    for rest in ("dev1", "dev2"):
        got = [e for e in res.of("received") if e.get("tags") == rest]
        assert [e["body"] for e in got] == [f"{rest} #{i}" for i in range(20)], res.explain()
        assert len({e["queueId"] for e in got}) == 1, f"{rest}: {[e['queueId'] for e in got]}"


def test_a_burst_that_creates_its_topic_reaches_a_subscriber_and_one_queue_in_order(server, mqtt_gateway, java):
    """A device's first 16 QoS 1 PUBLISHes on a topic no one created, in one write: every PUBACK comes in
    order, an MQTT subscriber (subscribed before the topic existed) gets them in order, and a Java orderly
    consumer finds them on one queue, in order. In front of a cluster the gateway sends by route, and a
    broker may store two sends of one connection it works on at once in either order (Apache's send pool
    has a thread per core), so a topic's next message must wait for the answer to the one before."""
    from ferrymq.gateways.mqtt.packets import PubAck

    topic, group = fresh("MqttNewOrder")
    burst = 16  # within every Receive Maximum announced
    subscriber = Device(mqtt_gateway, V5)
    try:
        subscriber.subscribe(f"{topic}/#", qos=1)
        assert publish_burst(mqtt_gateway, V5, f"{topic}/dev", burst) == [PubAck(i + 1) for i in range(burst)]
        got = subscriber.receive(burst, timeout=WAIT)
        assert [m.payload for m in got] == [b"m%d" % i for i in range(burst)]
    finally:
        subscriber.close()
    res = java("consume", n=server.namesrv_addr, t=topic, g=group, orderly=True, count=burst,
               timeout=WAIT).check()
    got = res.of("received")
    assert [e["body"] for e in got] == [f"m{i}" for i in range(burst)], res.explain()
    assert len({e["queueId"] for e in got}) == 1, [e["queueId"] for e in got]


# ---------------------------------------------------------------------------------------------- Java, Go -> MQTT

#: sent by the Java and the Go producer: (tag, user properties); no tag is the first level alone
PRODUCED: dict[str, list[tuple[str | None, dict[str, str]]]] = {
    "java": [("room1/temp", {"unit": "C"}), ("room2/hum", {"unit": "%"})],
    "go": [("room2/temp", {"unit": "F"}), (None, {"unit": "none"})],
}
#: MQTT filter below the first level (None: the first level itself) -> the bodies it receives
FILTERS = {
    "room1/temp": {"java-0"},
    "+/temp": {"java-0", "go-0"},
    "room2/#": {"java-1", "go-0"},
    "#": {"java-0", "java-1", "go-0", "go-1"},
}


def test_java_and_go_producers_reach_the_mqtt_filters_that_match_their_tags(server, mqtt_gateway, java, go,
                                                                            tmp_path):
    """MQTT 3.1.1 and 5 devices subscribe to an exact topic, `+`, and `#` filters below one first level; the
    Java and the Go producer each send two messages with a tag (or none) and a user property to that
    RocketMQ topic. Each device receives exactly the messages whose `topic/tag` its filter matches (nothing
    more within 1 s), on that MQTT topic, at QoS 1 (a RocketMQ message is QoS 1 at most); the MQTT 5
    devices with the user property."""
    topic, _ = fresh("MqttIn")
    # created first, as in a cluster without auto-creation: the gateway finds a topic that another client
    # creates only at its next route poll
    admin.create_topic(server.broker_addr, topic, 4)
    devices = {}
    try:
        for i, (rest, _) in enumerate(FILTERS.items()):
            device = Device(mqtt_gateway, V5 if i % 2 == 0 else V311)
            devices[rest] = device
            device.subscribe(f"{topic}/{rest}", qos=2)
        ns = server.namesrv_addr
        for name, producer in (("java", java), ("go", go)):
            spec = [{"body": f"{name}-{i}", **({"tag": tag} if tag else {}), "props": props}
                    for i, (tag, props) in enumerate(PRODUCED[name])]
            res = producer("send", n=ns, t=topic, spec=write_spec(tmp_path, spec)).check()
            assert len(res.of("sent")) == len(spec), res.explain()
        sent = {f"{name}-{i}": (tag, props) for name, msgs in PRODUCED.items() for i, (tag, props) in enumerate(msgs)}
        for rest, want in FILTERS.items():
            device = devices[rest]
            got = device.receive(len(want), timeout=WAIT)
            assert sorted(m.payload.decode() for m in got) == sorted(want), rest
            for m in got:
                tag, props = sent[m.payload.decode()]
                assert (m.topic, m.qos) == (f"{topic}/{tag}" if tag else topic, 1), f"{rest}: {m.topic}"
                if device.version == V5:
                    assert m.properties.UserProperty == list(props.items()), f"{rest}: {m.properties}"
        time.sleep(1)  # for a message that should not come
        for device in devices.values():
            device.nothing_more(0)
    finally:
        for device in devices.values():
            device.close()


# ---------------------------------------------------------------------------------------------- restart

#: messages each producer sends to each MQTT topic below the first level: ``q1/{producer}`` as RocketMQ
#: messages are (QoS 1 at most), ``q2/{producer}`` with ``mqttQos=2``
PER_TOPIC = 3


def test_a_persistent_session_gets_its_qos_1_and_2_messages_as_promised_after_the_gateway_restarts(
        server, mqtt_gateway_process, java, go, tmp_path):
    """An MQTT 5 device with a persistent session subscribes to `q1/#` at QoS 1 and `q2/#` at QoS 2 below
    one first level and disconnects; the Java and the Go producer each send 3 messages tagged `q1/{client}`
    and 3 tagged `q2/{client}` with `mqttQos=2`, each tag to one queue (a hash selector on it); the
    gateway is restarted (FerryMQ: the server, SIGTERM; Apache: `ferrymq gateway mqtt` alone, Apache stays
    up). The device reconnects with Clean Start 0 and finds its session: each QoS 1 message at least once,
    each QoS 2 message exactly once (nothing more within 1 s), each MQTT topic's messages in the order
    sent."""
    topic, client_id = fresh("MqttRestart")
    admin.create_topic(server.broker_addr, topic, 4)
    port = mqtt_gateway_process.port
    device = Device(port, V5, client_id, clean=False, session_expiry=600)
    device.subscribe(f"{topic}/q1/#", qos=1)
    device.subscribe(f"{topic}/q2/#", qos=2)
    device.close()
    sent = {}
    producers = {}
    for name, client in (("java", java), ("go", go)):
        spec = [{"body": f"{name}-{level}-{i}", "tag": f"{level}/{name}", "shard": f"{level}/{name}",
                 "props": {"mqttQos": "2"} if level == "q2" else {}}
                for level in ("q1", "q2") for i in range(PER_TOPIC)]
        sent.update({e["body"]: e for e in spec})
        producers[name] = client.spawn("send", n=server.namesrv_addr, t=topic, mode="selector",
                                       spec=write_spec(tmp_path, spec))
    for name, res in finish_all(producers, WAIT).items():
        res.check()
        assert len(res.of("sent")) == 2 * PER_TOPIC, f"{name}:\n{res.explain()}"

    mqtt_gateway_process.restart()

    device = Device(port, V5, client_id, clean=False, session_expiry=600)
    try:
        assert device.session_present is True
        got = []
        while {m.payload.decode() for m in got} != set(sent):
            got += device.receive(1, timeout=WAIT)
        time.sleep(1)  # for a message that should not come again
        got += _drain(device)
    finally:
        device.close()
    by_topic: dict[str, list] = {}
    for m in got:
        by_topic.setdefault(m.topic, []).append(m)
    for rest in (f"{level}/{name}" for level in ("q1", "q2") for name in ("java", "go")):
        messages = by_topic.get(f"{topic}/{rest}", [])
        expected = [body for body, e in sent.items() if e["tag"] == rest]
        first_seen = list(dict.fromkeys(m.payload.decode() for m in messages))
        assert first_seen == expected, f"{rest}: {[m.payload for m in messages]}"
        assert {m.qos for m in messages} == {2 if rest.startswith("q2") else 1}, rest
        if rest.startswith("q2"):
            assert len(messages) == len(expected), f"{rest}: a QoS 2 message came twice: {[m.payload for m in messages]}"


# ---------------------------------------------------------------------------------------------- $share


def test_a_shared_subscription_is_one_consumer_of_its_group_beside_java(server, mqtt_gateway, java, go):
    """Two devices subscribe to `$share/{group}/{topic}/#` and a Java push consumer of `{group}` to the
    topic: the broker lists two consumers of the group (the gateway, the Java client), which share the
    topic's queues. Of 16 messages the Go producer sends, each is received (by the Java consumer or by
    exactly one of the devices), and both the Java client and the devices receive some."""
    topic, group = fresh("MqttShare")
    admin.create_topic(server.broker_addr, topic, 4)
    members = [Device(mqtt_gateway, V5), Device(mqtt_gateway, V311)]
    consumer = None
    try:
        for member in members:
            member.subscribe(f"$share/{group}/{topic}/#", qos=1)
        consumer = java.spawn("consume", n=server.namesrv_addr, t=topic, g=group, count=1000, idle=3,
                              timeout=WAIT, instance="share-java")
        consumer.wait_for("started")
        wait_for_consumers(server, group, 2)
        time.sleep(1.5)  # both rebalance: the Java client every second, the gateway on the broker's notice
        go("send", n=server.namesrv_addr, t=topic, count=16, tag="part", body="shared").check()
        java_got = bodies(consumer.finish(WAIT + 10))  # it leaves 3 s after its last message
        device_got = [[m.payload.decode() for m in _drain(member)] for member in members]
    finally:
        if consumer is not None:
            consumer.kill()
        for member in members:
            member.close()
    everything = {f"shared #{i}" for i in range(16)}
    mqtt_got = device_got[0] + device_got[1]
    assert set(java_got) | set(mqtt_got) == everything, f"lost: Java {java_got}, devices {device_got}"
    assert not set(device_got[0]) & set(device_got[1]), f"a message reached both members: {device_got}"
    assert java_got and mqtt_got, f"the queues were not shared: Java {java_got}, devices {device_got}"


def _drain(device: Device) -> list:
    got = []
    while not device.messages.empty():
        got.append(device.messages.get())
    return got
