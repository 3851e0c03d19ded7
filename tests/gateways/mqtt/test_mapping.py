"""The MQTT <-> RocketMQ mapping: topics, tags, subscriptions and properties, both ways."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferrymq.gateways.mqtt import mapping
from ferrymq.gateways.mqtt.mapping import MappingError, TopicSubscription
from ferrymq.gateways.mqtt.packets import Publish
from ferrymq.gateways.mqtt.properties import NO_PROPERTIES, Properties
from ferrymq.gateways.mqtt.reason_codes import ReasonCode
from ferrymq.gateways.mqtt.topics import matches
from ferrymq.sdk.consumer.subscription import build_subscription
from ferrymq.wire.message import MessageConst

NOW = 1_700_000_000_000


def test_first_level_is_the_topic_and_the_rest_the_tag():
    assert mapping.split_topic("sensors/room1/temp") == ("sensors", "room1/temp")
    assert mapping.split_topic("sensors") == ("sensors", None)
    assert mapping.split_topic("sensors/") == ("sensors", None)
    assert mapping.split_topic("sensors//x") == ("sensors", "/x")


@pytest.mark.parametrize("name", ["$SYS/broker", "", "/leading", "a.b/c", "%RETRY%g/x", "a|b/c", "TBW102/x",
                                  "rmq_sys_wheel_timer", "SCHEDULE_TOPIC_XXXX/1", "x" * 128])
def test_a_first_level_that_is_no_device_topic_is_topic_name_invalid(name):
    with pytest.raises(MappingError) as caught:
        mapping.split_topic(name)
    assert caught.value.reason_code == ReasonCode.TOPIC_NAME_INVALID


_level = st.text(st.characters(blacklist_characters="/+#\x00", blacklist_categories=("Cs",)), max_size=5)
_topic_names = st.builds(lambda first, rest: "/".join([first, *rest]),
                         st.from_regex(r"[A-Za-z0-9_-]{1,10}", fullmatch=True), st.lists(_level, max_size=4))


@given(_topic_names)
def test_every_device_topic_comes_back_as_it_went(name):
    msg = mapping.to_rocketmq(Publish(name, b"x", qos=1, packet_identifier=1), NOW)
    assert msg.topic == name.partition("/")[0]
    assert mapping.mqtt_topic(msg.topic, msg.properties) == name
    # the tag alone gives the same topic back whenever there is one (the property covers 'a/' too)
    if msg.tags:
        assert mapping.mqtt_topic(msg.topic, {MessageConst.TAGS: msg.tags}) == name


def test_a_rocketmq_message_without_the_property_is_topic_slash_tag():
    assert mapping.mqtt_topic("sensors", {MessageConst.TAGS: "room1/temp"}) == "sensors/room1/temp"
    assert mapping.mqtt_topic("sensors", {MessageConst.TAGS: "TagA"}) == "sensors/TagA"
    assert mapping.mqtt_topic("sensors", {}) == "sensors"
    # a property naming another topic's MQTT topic is not believed
    assert mapping.mqtt_topic("sensors", {mapping.MQTT_TOPIC: "other/x", MessageConst.TAGS: "a"}) == "sensors/a"


@pytest.mark.parametrize("topic_filter, expected", [
    ("sensors/room1/temp", TopicSubscription("sensors", "room1/temp")),
    ("sensors/+/temp", TopicSubscription("sensors", None)),
    ("sensors/#", TopicSubscription("sensors", None)),
    ("sensors", TopicSubscription("sensors", None)),  # tagless messages: only '*' selects them
    ("sensors/*", TopicSubscription("sensors", None)),
    ("sensors/a || b", TopicSubscription("sensors", None)),
    ("sensors/ padded", TopicSubscription("sensors", None)),
])
def test_exact_filters_are_tags_and_wildcards_every_tag(topic_filter, expected):
    assert mapping.subscription(topic_filter) == expected


@pytest.mark.parametrize("topic_filter, code", [
    ("#", ReasonCode.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED),
    ("+/temp", ReasonCode.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED),
    ("$SYS/#", ReasonCode.TOPIC_FILTER_INVALID),
])
def test_filters_without_a_topic_are_refused(topic_filter, code):
    with pytest.raises(MappingError) as caught:
        mapping.subscription(topic_filter)
    assert caught.value.reason_code == code


_filters = st.builds(lambda rest, multi: "/".join(["t", *rest, *(["#"] if multi else [])]),
                     st.lists(st.sampled_from(["a", "b", "+", "", "*"]), max_size=3), st.booleans())


@given(_filters, st.lists(st.sampled_from(["a", "b", "", "*"]), max_size=3))
def test_the_tag_expression_never_drops_a_message_the_filter_matches(topic_filter, levels):
    """The broker's tag filter may only let through more than the filter matches, never less."""
    name = "/".join(["t", *levels])
    msg = mapping.to_rocketmq(Publish(name), NOW)
    data = build_subscription("t", mapping.tag_expression([mapping.subscription(topic_filter).tag]))
    passes = data.sub_string == "*" or msg.tags in data.tags_set
    if matches(topic_filter, name):
        assert passes


def test_one_expression_for_all_of_a_clients_filters_on_a_topic():
    assert mapping.tag_expression(["b/x", "a"]) == "a || b/x"
    assert mapping.tag_expression(["a", None]) == "*"
    assert build_subscription("t", mapping.tag_expression(["room1/temp", "room2/temp"])).tags_set == [
        "room1/temp", "room2/temp"]


def test_mqtt5_properties_go_to_rocketmq_properties_and_back():
    props = Properties(user_property=(("region", "eu"), ("amount", "30")), content_type="application/json",
                       response_topic="replies/dev1", correlation_data=b"\x00\xffid",
                       payload_format_indicator=1, message_expiry_interval=60)
    msg = mapping.to_rocketmq(Publish("orders/eu/new", b"{}", qos=2, packet_identifier=7, properties=props), NOW)
    assert (msg.topic, msg.tags, msg.body) == ("orders", "eu/new", b"{}")
    assert msg.properties["region"] == "eu" and msg.properties["amount"] == "30"
    assert msg.properties[mapping.MQTT_TOPIC] == "orders/eu/new"
    assert msg.properties[mapping.QOS] == "2"
    delivered = mapping.to_delivery(msg.topic, msg.properties, msg.body, NOW + 10_500)
    assert delivered.topic_name == "orders/eu/new" and delivered.qos == 2 and delivered.payload == b"{}"
    assert delivered.properties == Properties(
        user_property=(("region", "eu"), ("amount", "30")), content_type="application/json",
        response_topic="replies/dev1", correlation_data=b"\x00\xffid", payload_format_indicator=1,
        message_expiry_interval=50)  # 49.5 s left, rounded up


def test_retain_travels_as_a_property_only_devices_set():
    message = mapping.to_rocketmq(Publish("t/a", b"x", 1, retain=True, packet_identifier=1), 0)
    assert message.properties[mapping.RETAIN] == "1"
    assert mapping.to_delivery(message.topic, message.properties, message.body, 0).retain
    plain = mapping.to_rocketmq(Publish("t/a", b"x"), 0)
    assert mapping.RETAIN not in plain.properties
    assert not mapping.to_delivery(plain.topic, plain.properties, plain.body, 0).retain
    assert not mapping.to_delivery("t", {MessageConst.TAGS: "a"}, b"x", 0).retain  # a RocketMQ client's
    with pytest.raises(MappingError):
        mapping.to_rocketmq(Publish("t/a", b"x", properties=Properties(user_property=((mapping.RETAIN, "1"),))), 0)


def test_an_expired_message_is_not_delivered():
    msg = mapping.to_rocketmq(Publish("t/a", properties=Properties(message_expiry_interval=1)), NOW)
    assert mapping.to_delivery(msg.topic, msg.properties, msg.body, NOW + 999) is not None
    assert mapping.to_delivery(msg.topic, msg.properties, msg.body, NOW + 1000) is None


def test_a_java_producers_message_is_qos1_with_its_user_properties_and_no_system_ones():
    props = {MessageConst.TAGS: "room1/temp", MessageConst.KEYS: "k", MessageConst.UNIQ_KEY: "ABC",
             MessageConst.WAIT_STORE_MSG_OK: "true", "region": "eu"}
    delivered = mapping.to_delivery("sensors", props, b"21.5", NOW)
    assert delivered == mapping.Delivery("sensors/room1/temp", b"21.5", 1,
                                         Properties(user_property=(("region", "eu"),)))
    assert mapping.to_delivery("sensors", {MessageConst.TAGS: "a+b"}, b"", NOW) is None
    assert mapping.to_delivery("sensors", {}, b"", NOW).properties is NO_PROPERTIES


@pytest.mark.parametrize("pairs", [
    (("TAGS", "x"),), (("KEYS", "x"),), ((mapping.MQTT_TOPIC, "x"),), (("a", "1"), ("a", "2")),
    (("a\x01b", "1"),), (("a", "1\x02"),), (("", "1"),),
])
def test_user_properties_rocketmq_cannot_hold_are_refused(pairs):
    publish = Publish("t/a", properties=Properties(user_property=pairs))
    with pytest.raises(MappingError) as caught:
        mapping.to_rocketmq(publish, NOW)
    assert caught.value.reason_code == ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR


def test_a_share_name_is_the_consumer_group_and_must_be_a_legal_one():
    assert mapping.share_group("fleet-1") == "fleet-1"
    for name in ("a.b", "%RETRY%x", "x" * 121):
        with pytest.raises(MappingError) as caught:
            mapping.share_group(name)
        assert caught.value.reason_code == ReasonCode.TOPIC_FILTER_INVALID
