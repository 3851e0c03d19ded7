"""The connection decoder: streaming, connection rules, limits, and malformed packets with their reason codes."""

from __future__ import annotations

import pytest
from ferrymq.gateways.mqtt.connection import Decoder, ProtocolViolation
from ferrymq.gateways.mqtt.packet import FROM_CLIENT, MQTT_3_1_1, MQTT_5
from ferrymq.gateways.mqtt.packets import (
    ConnAck,
    Connect,
    Disconnect,
    PingReq,
    PubAck,
    Publish,
    PubRel,
    Subscribe,
    Subscription,
    Unsubscribe,
    encode,
)
from ferrymq.gateways.mqtt.properties import Properties
from ferrymq.gateways.mqtt.reason_codes import ConnectReturnCode, ReasonCode
from hypothesis import given, settings
from hypothesis import strategies as st

from .strategies import VERSIONS, packets

MALFORMED = ReasonCode.MALFORMED_PACKET
PROTOCOL = ReasonCode.PROTOCOL_ERROR


def connected(version: int, **limits) -> Decoder:
    decoder = Decoder(**limits)
    assert decoder.feed(encode(Connect("c", version), version)) == [Connect("c", version)]
    assert decoder.version == version
    return decoder


def violation(decoder: Decoder, data: bytes) -> ProtocolViolation:
    events = decoder.feed(data)
    assert events and isinstance(events[-1], ProtocolViolation), events
    assert decoder.finished
    assert decoder.feed(encode(PingReq(), MQTT_5)) == []
    return events[-1]


def _streamable(packet) -> bool:
    """A client's packet that leaves the stream open and needs no alias set before it."""
    if isinstance(packet, Publish) and packet.properties.topic_alias is not None:
        return False
    return packet.TYPE in FROM_CLIENT and not isinstance(packet, (Connect, Disconnect))


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_packets_split_anywhere_come_out_whole_and_in_order(version, data):
    client_packets = data.draw(st.lists(packets(version).filter(_streamable), max_size=6))
    stream = encode(Connect("c", version), version) + b"".join(encode(p, version) for p in client_packets)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = Decoder()
    events = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)]):
        events += decoder.feed(stream[start:end])
    assert events == [Connect("c", version), *client_packets]


def test_a_client_side_decoder_reads_server_packets():
    decoder = Decoder("client", version=MQTT_5)
    assert decoder.feed(encode(ConnAck(True, 0), MQTT_5) + encode(PubAck(3), MQTT_5)) == [ConnAck(True, 0), PubAck(3)]
    refused = violation(Decoder("client", version=MQTT_5), encode(PingReq(), MQTT_5))
    assert refused.reason_code == PROTOCOL


def test_the_first_packet_must_be_connect_and_nothing_may_be_sent_back():
    refused = violation(Decoder(), encode(Publish("t", b"x"), MQTT_5))
    assert (refused.reason_code, refused.version, refused.reply()) == (PROTOCOL, None, None)


@pytest.mark.parametrize("version, reply", [(MQTT_5, Disconnect(PROTOCOL)), (MQTT_3_1_1, None)])
def test_a_second_connect_is_a_protocol_error(version, reply):
    refused = violation(connected(version), encode(Connect("c", version), version))
    assert refused.reason_code == PROTOCOL
    assert refused.reply() == reply


def test_server_packets_from_a_client_are_a_protocol_error():
    assert violation(connected(MQTT_5), encode(ConnAck(), MQTT_5)).reason_code == PROTOCOL


def test_packet_too_large_is_refused_from_the_fixed_header_alone():
    decoder = connected(MQTT_5, maximum_packet_size=64)
    header_only = b"\x30\xc8\x01"  # PUBLISH of remaining length 200, no body yet
    refused = violation(decoder, header_only)
    assert refused.reason_code == ReasonCode.PACKET_TOO_LARGE
    assert refused.reply() == Disconnect(ReasonCode.PACKET_TOO_LARGE)


def test_packet_at_the_maximum_size_is_accepted():
    publish = Publish("t", b"x" * 100)
    size = len(encode(publish, MQTT_5))
    assert connected(MQTT_5, maximum_packet_size=size).feed(encode(publish, MQTT_5)) == [publish]
    assert violation(connected(MQTT_5, maximum_packet_size=size - 1),
                     encode(publish, MQTT_5)).reason_code == ReasonCode.PACKET_TOO_LARGE


def test_a_too_large_connect_is_refused_with_connack_in_mqtt_5():
    refused = violation(Decoder(maximum_packet_size=16), encode(Connect("a-long-client-identifier", MQTT_5), MQTT_5))
    assert refused.reply() == ConnAck(False, ReasonCode.PACKET_TOO_LARGE)


@pytest.mark.parametrize("packet, reason", [
    (Publish("t" * 11), ReasonCode.TOPIC_NAME_INVALID),
    (Subscribe(1, (Subscription("f" * 11),)), ReasonCode.TOPIC_FILTER_INVALID),
    (Unsubscribe(1, ("f" * 11,)), ReasonCode.TOPIC_FILTER_INVALID),
])
def test_topic_length_limit(packet, reason):
    assert violation(connected(MQTT_5, maximum_topic_length=10), encode(packet, MQTT_5)).reason_code == reason
    assert connected(MQTT_5, maximum_topic_length=11).feed(encode(packet, MQTT_5)) == [packet]


def test_remaining_length_of_five_bytes_is_malformed():
    assert violation(Decoder(), b"\x10\xff\xff\xff\xff\x01").reason_code == MALFORMED


def test_unsupported_protocol_levels_get_the_connack_the_client_understands():
    mqtt_3_1 = b"\x10\x0e\x00\x06MQIsdp\x03\x02\x00\x3c\x00\x00"
    refused = violation(Decoder(), mqtt_3_1)
    assert refused.reason_code == ReasonCode.UNSUPPORTED_PROTOCOL_VERSION
    assert refused.reply() == ConnAck(False, ConnectReturnCode.UNACCEPTABLE_PROTOCOL_VERSION)
    level_6 = b"\x10\x0c\x00\x04MQTT\x06\x02\x00\x3c\x00\x00"
    assert violation(Decoder(), level_6).reply() == ConnAck(False, ReasonCode.UNSUPPORTED_PROTOCOL_VERSION)


def _publish_body(topic: bytes, rest: bytes = b"", version: int = MQTT_5) -> bytes:
    return len(topic).to_bytes(2, "big") + topic + rest


def _packet(first_byte: int, body: bytes) -> bytes:
    return bytes((first_byte, len(body))) + body


# Bytes after a valid CONNECT, the reason code, and (3.1.1) nothing to send but closing.
AFTER_CONNECT = [
    ("reserved flags on PUBACK", _packet(0x41, b"\x00\x01"), MALFORMED),
    ("reserved flags on SUBSCRIBE", _packet(0x80, b"\x00\x01\x00\x00\x01a\x00"), MALFORMED),
    ("PUBREL without its 0010 flags", _packet(0x60, b"\x00\x01"), MALFORMED),
    ("packet type 0", _packet(0x00, b""), MALFORMED),
    ("PUBLISH QoS 3", _packet(0x36, _publish_body(b"t", b"\x00\x01\x00")), MALFORMED),
    ("DUP on QoS 0", _packet(0x38, _publish_body(b"t", b"\x00")), PROTOCOL),
    ("wildcard + in topic name", _packet(0x30, _publish_body(b"a/+", b"\x00")), ReasonCode.TOPIC_NAME_INVALID),
    ("wildcard # in topic name", _packet(0x30, _publish_body(b"#", b"\x00")), ReasonCode.TOPIC_NAME_INVALID),
    ("empty topic without alias", _packet(0x30, _publish_body(b"", b"\x00")), PROTOCOL),
    ("invalid UTF-8 topic", _packet(0x30, _publish_body(b"\xc3\x28", b"\x00")), MALFORMED),
    ("overlong UTF-8 topic", _packet(0x30, _publish_body(b"\xc0\xaf", b"\x00")), MALFORMED),
    ("surrogate in topic", _packet(0x30, _publish_body(b"\xed\xa0\x80", b"\x00")), MALFORMED),
    ("U+0000 in topic", _packet(0x30, _publish_body(b"a\x00b", b"\x00")), MALFORMED),
    ("string longer than packet", _packet(0x30, b"\x00\x09ab"), MALFORMED),
    ("packet identifier 0 on PUBLISH", _packet(0x32, _publish_body(b"t", b"\x00\x00\x00")), PROTOCOL),
    ("packet identifier 0 on PUBACK", _packet(0x40, b"\x00\x00"), PROTOCOL),
    ("packet identifier 0 on SUBSCRIBE", _packet(0x82, b"\x00\x00\x00\x00\x01a\x00"), PROTOCOL),
    ("empty subscription list", _packet(0x82, b"\x00\x01\x00"), PROTOCOL),
    ("empty unsubscribe list", _packet(0xA2, b"\x00\x01\x00"), PROTOCOL),
    ("subscription QoS 3", _packet(0x82, b"\x00\x01\x00\x00\x01a\x03"), MALFORMED),
    ("subscription reserved option bits", _packet(0x82, b"\x00\x01\x00\x00\x01a\x40"), MALFORMED),
    ("Retain Handling 3", _packet(0x82, b"\x00\x01\x00\x00\x01a\x30"), PROTOCOL),
    ("subscription without options byte", _packet(0x82, b"\x00\x01\x00\x00\x01a"), MALFORMED),
    ("unknown property", _packet(0x30, _publish_body(b"t", b"\x02\x7f\x00")), MALFORMED),
    ("property not allowed in PUBLISH", _packet(0x30, _publish_body(b"t", b"\x05\x11\x00\x00\x00\x01")), PROTOCOL),
    ("property twice", _packet(0x30, _publish_body(b"t", b"\x04\x01\x00\x01\x00")), PROTOCOL),
    ("payload format indicator 2", _packet(0x30, _publish_body(b"t", b"\x02\x01\x02")), PROTOCOL),
    ("topic alias 0", _packet(0x30, _publish_body(b"t", b"\x03\x23\x00\x00")), ReasonCode.TOPIC_ALIAS_INVALID),
    ("subscription identifier 0", _packet(0x82, b"\x00\x01\x02\x0b\x00\x00\x01a\x00"), PROTOCOL),
    ("two subscription identifiers in SUBSCRIBE", _packet(0x82, b"\x00\x01\x04\x0b\x01\x0b\x02\x00\x01a\x00"),
     PROTOCOL),
    ("property length beyond the packet", _packet(0x30, _publish_body(b"t", b"\x09\x01\x00")), MALFORMED),
    ("bytes after PUBACK's properties", _packet(0x40, b"\x00\x01\x00\x00\xff"), MALFORMED),
    ("PINGREQ with a body", _packet(0xC0, b"\x00"), MALFORMED),
    ("DISCONNECT with a reason code not followed by valid properties", _packet(0xE0, b"\x00\x05"), MALFORMED),
]


@pytest.mark.parametrize("what, data, reason", AFTER_CONNECT, ids=[case[0] for case in AFTER_CONNECT])
def test_malformed_packets_after_connect_close_with_their_reason_code(what, data, reason):
    refused = violation(connected(MQTT_5), data)
    assert refused.reason_code == reason, refused.message
    assert refused.reply() == Disconnect(reason)


@pytest.mark.parametrize("what, data", [
    ("reserved flags on PUBACK", _packet(0x41, b"\x00\x01")),
    ("QoS 3", _packet(0x36, _publish_body(b"t", b"\x00\x01"))),
    ("wildcard in topic name", _packet(0x30, _publish_body(b"a/#"))),
    ("invalid UTF-8", _packet(0x30, _publish_body(b"\xff"))),
    ("empty subscription list", _packet(0x82, b"\x00\x01")),
    ("packet identifier 0", _packet(0x40, b"\x00\x00")),
    ("AUTH, which 3.1.1 lacks", _packet(0xF0, b"")),
    ("MQTT 5 subscription options", _packet(0x82, b"\x00\x01\x00\x01a\x04")),
    ("bytes after a 3.1.1 PUBACK", _packet(0x40, b"\x00\x01\x00")),
])
def test_mqtt_3_1_1_connections_just_close(what, data):
    refused = violation(connected(MQTT_3_1_1), data)
    assert refused.version == MQTT_3_1_1 and refused.reply() is None


@pytest.mark.parametrize("what, connect, reason", [
    ("reserved connect flag", b"\x00\x04MQTT\x05\x03\x00\x3c\x00\x00\x01c", MALFORMED),
    ("will QoS 3", b"\x00\x04MQTT\x05\x1e\x00\x3c\x00\x00\x01c\x00\x00\x01t\x00\x00", MALFORMED),
    ("will retain without will", b"\x00\x04MQTT\x05\x22\x00\x3c\x00\x00\x01c", MALFORMED),
    ("protocol name", b"\x00\x04MQTX\x05\x02\x00\x3c\x00\x00\x01c", PROTOCOL),
    ("will delay in CONNECT properties", b"\x00\x04MQTT\x05\x02\x00\x3c\x05\x18\x00\x00\x00\x01\x00\x01c", PROTOCOL),
    ("receive maximum 0", b"\x00\x04MQTT\x05\x02\x00\x3c\x03\x21\x00\x00\x00\x01c", PROTOCOL),
    ("client identifier cut short", b"\x00\x04MQTT\x05\x02\x00\x3c\x00\x00\x05c", MALFORMED),
])
def test_a_bad_mqtt_5_connect_is_answered_with_connack(what, connect, reason):
    refused = violation(Decoder(), _packet(0x10, connect))
    assert refused.reason_code == reason and refused.in_connect
    assert refused.reply() == ConnAck(False, reason)


def test_a_bad_mqtt_3_1_1_connect_just_closes():
    password_without_user_name = _packet(0x10, b"\x00\x04MQTT\x04\x42\x00\x3c\x00\x01c\x00\x01p")
    refused = violation(Decoder(), password_without_user_name)
    assert refused.reason_code == MALFORMED and refused.reply() is None


def test_mqtt_5_allows_a_password_without_user_name():
    connect = Connect("c", MQTT_5, password=b"token")
    assert Decoder().feed(encode(connect, MQTT_5)) == [connect]


def test_packets_before_a_violation_are_delivered():
    decoder = connected(MQTT_5)
    events = decoder.feed(encode(PingReq(), MQTT_5) + encode(PubRel(4), MQTT_5) + _packet(0x40, b"\x00\x00"))
    assert events[:2] == [PingReq(), PubRel(4)]
    assert isinstance(events[2], ProtocolViolation)


def test_nothing_is_decoded_after_disconnect():
    decoder = connected(MQTT_3_1_1)
    assert decoder.feed(encode(Disconnect(), MQTT_3_1_1) + b"\xff\xff") == [Disconnect()]
    assert decoder.finished


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_garbage_never_raises(data):
    events = Decoder().feed(data)
    assert all(isinstance(e, (Connect, ProtocolViolation)) for e in events)


@pytest.mark.parametrize("version, data", [
    (MQTT_5, _packet(0x40, b"\x00\x01\x05")),             # PUBACK 0x05
    (MQTT_5, _packet(0x62, b"\x00\x01\x10")),             # PUBREL 0x10 (a PUBACK code)
    (MQTT_5, _packet(0xE0, b"\x03")),                     # DISCONNECT 0x03
    (MQTT_5, _packet(0xF0, b"\x01\x00")),                 # AUTH 0x01
])
def test_reason_codes_a_packet_does_not_define_are_a_protocol_error(version, data):
    assert violation(connected(version), data).reason_code == PROTOCOL


@pytest.mark.parametrize("version, data", [
    (MQTT_5, _packet(0x20, b"\x00\x03\x00")),             # CONNACK 0x03
    (MQTT_5, _packet(0x90, b"\x00\x01\x00\x03")),         # SUBACK 0x03
    (MQTT_3_1_1, _packet(0x90, b"\x00\x01\x87")),         # 3.1.1 SUBACK knows only 0, 1, 2, 0x80
    (MQTT_5, _packet(0xB0, b"\x00\x01\x00")),             # UNSUBACK without a reason code
    (MQTT_5, _packet(0xB0, b"\x00\x01\x00\x12")),         # UNSUBACK 0x12
])
def test_server_reason_codes_are_checked_by_a_client_side_decoder(version, data):
    assert violation(Decoder("client", version=version), data).reason_code == PROTOCOL


def test_topic_aliases_are_learnt_and_resolved_per_connection():
    decoder = connected(MQTT_5, topic_alias_maximum=2)
    first = Publish("sensors/1", b"a", properties=Properties(topic_alias=2))
    aliased = Publish("", b"b", properties=Properties(topic_alias=2))
    reassigned = Publish("sensors/2", b"c", properties=Properties(topic_alias=2))
    events = decoder.feed(b"".join(encode(p, MQTT_5) for p in (first, aliased, reassigned, aliased)))
    assert [(e.topic_name, e.payload) for e in events] == [("sensors/1", b"a"), ("sensors/1", b"b"),
                                                            ("sensors/2", b"c"), ("sensors/2", b"b")]
    assert violation(connected(MQTT_5, topic_alias_maximum=2), encode(aliased, MQTT_5)).reason_code == PROTOCOL


def test_a_topic_alias_above_the_announced_maximum_is_invalid():
    publish = Publish("t", properties=Properties(topic_alias=1))
    refused = violation(connected(MQTT_5), encode(publish, MQTT_5))
    assert refused.reply() == Disconnect(ReasonCode.TOPIC_ALIAS_INVALID)
