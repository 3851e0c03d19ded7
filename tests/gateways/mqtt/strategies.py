"""Hypothesis strategies for every MQTT packet of each protocol level, valid as the spec defines them."""

from __future__ import annotations

from ferrymq.gateways.mqtt.packet import MQTT_3_1_1, MQTT_5
from ferrymq.gateways.mqtt.packet import PacketType as P
from ferrymq.gateways.mqtt.packets import (
    Auth,
    ConnAck,
    Connect,
    Disconnect,
    PingReq,
    PingResp,
    PubAck,
    PubComp,
    Publish,
    PubRec,
    PubRel,
    SubAck,
    Subscribe,
    Subscription,
    UnsubAck,
    Unsubscribe,
    Will,
)
from ferrymq.gateways.mqtt.properties import (
    NO_PROPERTIES,
    PROPERTIES,
    WILL,
    Properties,
    PropertyType,
)
from ferrymq.gateways.mqtt.reason_codes import ALLOWED
from hypothesis import strategies as st

#: Any Unicode scalar value but U+0000 (surrogates cannot be UTF-8).
text = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=12)
topic_names = text.filter(lambda t: t and "+" not in t and "#" not in t)
topic_filters = st.lists(st.sampled_from(["a", "b", "+", "", "$SYS", "ü"]) | text.filter(
    lambda t: "/" not in t and "+" not in t and "#" not in t), min_size=1, max_size=4).map("/".join) | st.just("#")
binary = st.binary(max_size=24)
u16_nonzero = st.integers(1, 0xFFFF)
#: User property names JavaScript objects (the mqtt-packet oracle) can hold as keys.
property_names = text.filter(lambda t: t != "__proto__")

_VALUES = {
    PropertyType.BYTE: st.integers(0, 0xFF),
    PropertyType.TWO_BYTE_INTEGER: st.integers(0, 0xFFFF),
    PropertyType.FOUR_BYTE_INTEGER: st.integers(0, 0xFFFF_FFFF),
    PropertyType.VARIABLE_BYTE_INTEGER: st.integers(0, 268_435_455),
    PropertyType.UTF8_STRING: text,
    PropertyType.BINARY_DATA: binary,
    PropertyType.UTF8_STRING_PAIR: st.tuples(property_names, text),
}


def _value(spec):
    if spec.values is not None:
        return st.integers(spec.values.start, spec.values.stop - 1)
    return _VALUES[spec.type]


def properties(where, version: int = MQTT_5):
    """Any valid properties for a packet kind (none in MQTT 3.1.1)."""
    if version != MQTT_5:
        return st.just(NO_PROPERTIES)
    fields = {}
    for spec in PROPERTIES:
        if where not in spec.packets:
            continue
        if spec.repeated:
            most = 1 if where is P.SUBSCRIBE and spec.name == "subscription_identifier" else 3
            fields[spec.name] = st.lists(_value(spec), max_size=most).map(tuple)
        else:
            fields[spec.name] = st.none() | _value(spec)
    chosen = st.fixed_dictionaries({}, optional=fields)
    return chosen.map(lambda values: Properties(**values))


def reason_code(packet_type, version):
    return st.sampled_from(sorted(ALLOWED[packet_type])) if version == MQTT_5 else st.just(0)


def _acknowledgement(cls, version):
    return st.builds(cls, u16_nonzero, reason_code(cls.TYPE, version), properties(cls.TYPE, version))


def packets(version: int):
    """Every packet type that exists in ``version``, client's and server's."""
    v5 = version == MQTT_5
    wills = st.builds(Will, topic_names, binary, st.integers(0, 2), st.booleans(), properties(WILL, version))

    @st.composite
    def connects(draw):
        user_name = draw(st.none() | text)
        password = draw(st.none() | binary) if (v5 or user_name is not None) else None
        return Connect(draw(text), version, draw(st.booleans()), draw(st.integers(0, 0xFFFF)),
                       draw(st.none() | wills), user_name, password, draw(properties(P.CONNECT, version)))

    @st.composite
    def publishes(draw):
        qos = draw(st.integers(0, 2))
        props = draw(properties(P.PUBLISH, version))
        topic = draw(topic_names | st.just("")) if props.topic_alias is not None else draw(topic_names)
        return Publish(topic, draw(binary), qos, draw(st.booleans()), qos > 0 and draw(st.booleans()),
                       draw(u16_nonzero) if qos else None, props)

    subscriptions = st.builds(
        Subscription, topic_filters, st.integers(0, 2),
        *((st.booleans(), st.booleans(), st.integers(0, 2)) if v5 else ()))
    strategies = [
        connects(),
        st.builds(ConnAck, st.booleans(), reason_code(P.CONNACK, version) if v5 else st.integers(0, 5),
                  properties(P.CONNACK, version)),
        publishes(),
        *(_acknowledgement(cls, version) for cls in (PubAck, PubRec, PubRel, PubComp)),
        st.builds(Subscribe, u16_nonzero, st.lists(subscriptions, min_size=1, max_size=3).map(tuple),
                  properties(P.SUBSCRIBE, version)),
        st.builds(SubAck, u16_nonzero, st.lists(reason_code(P.SUBACK, version) if v5 else st.sampled_from(
            (0, 1, 2, 0x80)), min_size=1, max_size=3).map(tuple), properties(P.SUBACK, version)),
        st.builds(Unsubscribe, u16_nonzero, st.lists(topic_filters, min_size=1, max_size=3).map(tuple),
                  properties(P.UNSUBSCRIBE, version)),
        st.builds(UnsubAck, u16_nonzero, st.lists(reason_code(P.UNSUBACK, version), min_size=1, max_size=3).map(
            tuple) if v5 else st.just(()), properties(P.UNSUBACK, version)),
        st.just(PingReq()),
        st.just(PingResp()),
        st.builds(Disconnect, reason_code(P.DISCONNECT, version), properties(P.DISCONNECT, version)),
    ]
    if v5:
        strategies.append(st.builds(Auth, reason_code(P.AUTH, version), properties(P.AUTH, version)))
    return st.one_of(strategies)


VERSIONS = (MQTT_3_1_1, MQTT_5)
