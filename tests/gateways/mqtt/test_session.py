"""The server connection and session state machine, driven with packets as a client sends them: no sockets."""

from __future__ import annotations

import pytest
from ferrymq.gateways.mqtt import mapping
from ferrymq.gateways.mqtt.packet import MQTT_3_1_1, MQTT_5
from ferrymq.gateways.mqtt.packets import (
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
    encode,
)
from ferrymq.gateways.mqtt.properties import Properties
from ferrymq.gateways.mqtt.reason_codes import ConnectReturnCode, ReasonCode
from ferrymq.gateways.mqtt.session import (
    Ack,
    ChangeSubscriptions,
    Close,
    Connected,
    Forward,
    Release,
    Send,
    ServerConnection,
    SessionEnded,
    State,
    deliver,
    expire,
)

VERSIONS = (MQTT_3_1_1, MQTT_5)


def sent(actions) -> list:
    return [a.packet for a in actions if isinstance(a, Send)]


def of(actions, kind) -> list:
    return [a for a in actions if isinstance(a, kind)]


class Device:
    """One client's side: encodes what it sends at its protocol level, keeps what it was answered."""

    def __init__(self, sessions: dict, version: int = MQTT_5, now: float = 0.0, **limits):
        self.version = version
        self.conn = ServerConnection(sessions, now, **limits)

    def send(self, *packets, now: float = 0.0) -> list:
        return self.conn.receive_data(b"".join(encode(p, self.version) for p in packets), now)

    def connect(self, client_id="dev1", **fields) -> list:
        return self.send(Connect(client_id, self.version, **fields))

    def subscribe(self, *filters, qos=1, pid=1, properties=Properties()) -> list:
        subs = tuple(Subscription(f, qos) for f in filters)
        actions = self.send(Subscribe(pid, subs, properties if self.version == MQTT_5 else Properties()))
        (change,) = of(actions, ChangeSubscriptions)
        return [change.reply, change]


def delivery(topic="t/a", payload=b"m", qos=2, **props):
    return mapping.Delivery(topic, payload, qos, Properties(**props))


@pytest.mark.parametrize("version", VERSIONS)
def test_connect_then_ping_subscribe_publish_and_disconnect(version):
    sessions = {}
    device = Device(sessions, version)
    actions = device.connect()
    (connected,) = of(actions, Connected)
    assert not connected.session_present and sessions["dev1"] is connected.session
    (connack,) = sent(actions)
    assert connack.reason_code == 0 and not connack.session_present
    if version == MQTT_5:
        assert connack.properties.receive_maximum == 64 and connack.properties.retain_available is None  # absent: 1
    assert sent(device.send(PingReq())) == [PingResp()]
    reply, change = device.subscribe("t/+", "t/#", qos=2)
    assert reply == SubAck(1, (2, 2)) and change.added == ("t/+", "t/#")
    (forward,) = device.send(Publish("t/a", b"x", 1, packet_identifier=5))
    assert isinstance(forward, Forward) and forward.message.tags == "a" and forward.packet_identifier == 5
    assert sent(device.conn.stored(5)) == [PubAck(5)]
    actions = device.send(Disconnect())
    assert of(actions, Close) and of(actions, SessionEnded) and "dev1" not in sessions
    assert not of(actions, Forward)  # no will after DISCONNECT


def test_an_empty_client_identifier_gets_one_assigned():
    device = Device({}, MQTT_5)
    (connack,) = sent(device.connect(""))
    assert connack.properties.assigned_client_identifier.startswith("ferrymq-")
    assert device.conn.session.client_id == connack.properties.assigned_client_identifier


def test_an_empty_client_identifier_without_clean_session_is_rejected_in_3_1_1():
    device = Device({}, MQTT_3_1_1)
    actions = device.send(Connect("", MQTT_3_1_1, clean_start=False))
    assert sent(actions) == [ConnAck(False, ConnectReturnCode.IDENTIFIER_REJECTED)] and of(actions, Close)


@pytest.mark.parametrize("version, expected", [(MQTT_5, [ConnAck(False, ReasonCode.TOPIC_NAME_INVALID)]),
                                               (MQTT_3_1_1, [])])
def test_a_will_rocketmq_cannot_hold_refuses_the_connect(version, expected):
    device = Device({}, version)
    actions = device.send(Connect("d", version, will=Will("$SYS/x", b"gone")))
    assert sent(actions) == expected and of(actions, Close)


def test_an_authentication_method_is_refused():
    device = Device({}, MQTT_5)
    actions = device.send(Connect("d", MQTT_5, properties=Properties(authentication_method="SCRAM")))
    assert sent(actions) == [ConnAck(False, ReasonCode.BAD_AUTHENTICATION_METHOD)]


def test_a_packet_before_connect_closes_without_a_reply():
    device = Device({})
    actions = device.conn.receive_data(encode(PingReq(), MQTT_5), 0)
    assert actions == [Close()] and device.conn.state is State.CLOSED


@pytest.mark.parametrize("version", VERSIONS)
def test_keep_alive_closes_after_one_and_a_half_periods_and_publishes_the_will(version):
    device = Device({}, version)
    device.connect(keep_alive=10, will=Will("t/status", b"offline", 1))
    device.send(PingReq(), now=4.0)
    assert device.conn.deadline == 19.0
    assert device.conn.tick(18.9) == []
    actions = device.conn.tick(19.0)
    assert sent(actions) == ([Disconnect(ReasonCode.KEEP_ALIVE_TIMEOUT)] if version == MQTT_5 else [])
    (will,) = of(actions, Forward)
    assert (will.message.topic, will.message.tags, will.message.body, will.qos) == ("t", "status", b"offline", 1)
    assert device.conn.connection_lost(20.0) == []  # the will goes once


def test_no_keep_alive_means_no_deadline_and_a_silent_connection_is_closed():
    device = Device({}, now=100.0)
    assert device.conn.deadline == 110.0
    assert device.conn.tick(110.0) == [Close()]
    device = Device({})
    device.connect(keep_alive=0)
    assert device.conn.deadline is None


@pytest.mark.parametrize("version", VERSIONS)
def test_the_will_is_published_on_an_abnormal_close_only(version):
    device = Device({}, version)
    device.connect(will=Will("t/status", b"offline"))
    (will,) = of(device.conn.connection_lost(1.0), Forward)
    assert will.message.properties[mapping.MQTT_TOPIC] == "t/status"


@pytest.mark.parametrize("version", VERSIONS)
def test_a_server_that_stops_publishes_the_will_of_each_connected_client(version):
    """The server closes the connection without the client's DISCONNECT (spec 3.1.2.5), as mosquitto
    publishes every will as it stops (tests/gateways/mqtt/test_restart.py)."""
    device = Device({}, version)
    device.connect(will=Will("t/status", b"offline"))
    actions = device.conn.shut_down(1.0)
    (will,) = of(actions, Forward)
    assert (will.message.body, will.packet_identifier) == (b"offline", None)
    expected = [Disconnect(ReasonCode.SERVER_SHUTTING_DOWN)] if version == MQTT_5 else []
    assert sent(actions) == expected
    assert device.conn.shut_down(2.0) == [] and device.conn.connection_lost(2.0) == []  # once


def test_disconnect_with_will_message_publishes_it():
    device = Device({}, MQTT_5)
    device.connect(will=Will("t/status", b"offline"))
    assert of(device.send(Disconnect(ReasonCode.DISCONNECT_WITH_WILL_MESSAGE)), Forward)


@pytest.mark.parametrize("version", VERSIONS)
def test_qos2_from_the_client_is_stored_exactly_once(version):
    device = Device({}, version)
    device.connect()
    publish = Publish("t/a", b"x", 2, packet_identifier=9)
    assert len(of(device.send(publish), Forward)) == 1
    assert device.send(publish) == []  # being stored: not forwarded again
    assert sent(device.conn.stored(9)) == [PubRec(9)]
    assert sent(device.send(Publish("t/a", b"x", 2, dup=True, packet_identifier=9))) == [PubRec(9)]
    assert sent(device.send(PubRel(9))) == [PubComp(9)]
    assert len(of(device.send(publish), Forward)) == 1  # a new message with the identifier freed


def test_qos2_exactly_once_holds_across_a_reconnect():
    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect(clean_start=False, properties=Properties(session_expiry_interval=60))
    device.send(Publish("t/a", b"x", 2, packet_identifier=9))
    device.conn.stored(9)
    device.conn.connection_lost(1.0)
    again = Device(sessions, MQTT_5)
    (connack,) = sent(again.connect(clean_start=False, properties=Properties(session_expiry_interval=60)))
    assert connack.session_present
    actions = again.send(Publish("t/a", b"x", 2, dup=True, packet_identifier=9))
    assert not of(actions, Forward) and sent(actions) == [PubRec(9)]
    assert sent(again.send(PubRel(9))) == [PubComp(9)]


def test_a_pubrel_for_nothing_is_answered_packet_identifier_not_found():
    device = Device({}, MQTT_5)
    device.connect()
    assert sent(device.send(PubRel(3))) == [PubComp(3, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND)]


def test_a_qos2_flood_beyond_receive_maximum_is_disconnected_0x93():
    device = Device({}, MQTT_5, receive_maximum=3)
    device.connect(will=Will("t/status", b"offline"))
    for pid in (1, 2, 3):
        assert of(device.send(Publish("t/a", b"x", 2, packet_identifier=pid)), Forward)
    device.conn.stored(1)  # PUBREC sent, PUBREL not yet received: still counts
    actions = device.send(Publish("t/a", b"x", 2, packet_identifier=4))
    assert sent(actions) == [Disconnect(ReasonCode.RECEIVE_MAXIMUM_EXCEEDED)] and of(actions, Close)
    assert len(of(actions, Forward)) == 1  # the will, not the message


def test_a_freed_slot_lets_the_next_publish_in():
    device = Device({}, MQTT_5, receive_maximum=1)
    device.connect()
    device.send(Publish("t/a", b"x", 1, packet_identifier=1))
    device.conn.stored(1)
    assert of(device.send(Publish("t/a", b"x", 1, packet_identifier=2)), Forward)


@pytest.mark.parametrize("qos, ack", [(1, PubAck), (2, PubRec)])
def test_a_publish_rocketmq_cannot_hold_gets_the_reason_in_its_ack(qos, ack):
    device = Device({}, MQTT_5)
    device.connect()
    (packet,) = sent(device.send(Publish("a.b/c", b"x", qos, packet_identifier=1)))
    assert type(packet) is ack and packet.reason_code == ReasonCode.TOPIC_NAME_INVALID
    assert packet.properties.reason_string
    props = Properties(user_property=(("TAGS", "x"),))
    (packet,) = sent(device.send(Publish("t/a", b"x", qos, packet_identifier=2, properties=props)))
    assert packet.reason_code == ReasonCode.IMPLEMENTATION_SPECIFIC_ERROR


def test_a_store_failure_is_a_negative_ack_in_5_and_a_close_in_3_1_1():
    device = Device({}, MQTT_5)
    device.connect()
    device.send(Publish("t/a", b"x", 1, packet_identifier=1))
    (packet,) = sent(device.conn.stored(1, ReasonCode.UNSPECIFIED_ERROR, "broker busy"))
    assert packet == PubAck(1, ReasonCode.UNSPECIFIED_ERROR, Properties(reason_string="broker busy"))
    device = Device({}, MQTT_3_1_1)
    device.connect()
    device.send(Publish("t/a", b"x", 1, packet_identifier=1))
    assert of(device.conn.stored(1, ReasonCode.UNSPECIFIED_ERROR), Close)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_retained_publish_is_stored_as_an_ordinary_message_that_says_so(version):
    device = Device({}, version)
    device.connect()
    (forward,) = device.send(Publish("t/a", b"x", 1, retain=True, packet_identifier=3))
    assert forward.message.properties[mapping.RETAIN] == "1" and forward.message.tags == "a"
    (forward,) = device.send(Publish("t/a", b"y", 1, packet_identifier=4))
    assert mapping.RETAIN not in forward.message.properties


def test_retain_handling_decides_which_subscribes_get_retained_messages():
    device = Device({}, MQTT_5)
    device.connect()

    def subscribe(*subs):
        (change,) = of(device.send(Subscribe(1, subs)), ChangeSubscriptions)
        return change.retained

    assert subscribe(Subscription("t/0"), Subscription("t/1", retain_handling=1),
                     Subscription("t/2", retain_handling=2), Subscription("$share/g/t/0")) == ("t/0", "t/1")
    # again: 0 sends them on every SUBSCRIBE, 1 only when the subscription is new
    assert subscribe(Subscription("t/0"), Subscription("t/1", retain_handling=1)) == ("t/0",)


def test_retained_deliveries_carry_retain_and_live_ones_only_with_retain_as_published():
    device = Device({}, MQTT_5)
    device.connect()
    device.send(Subscribe(1, (Subscription("t/#", 1), Subscription("r/#", 1, retain_as_published=True))))
    retained = mapping.Delivery("t/a", b"kept", 2, retain=True)
    (publish,) = sent(device.conn.deliver(retained, None, retained_for="t/#"))
    assert publish.retain and publish.qos == 1
    (publish,) = sent(device.conn.deliver(retained, None))  # the same message live: RETAIN 0
    assert not publish.retain
    (publish,) = sent(device.conn.deliver(mapping.Delivery("r/a", b"kept", 1, retain=True), None))
    assert publish.retain
    assert device.conn.deliver(retained, "tok", retained_for="nothing/#") == [Ack("tok")]


@pytest.mark.parametrize("version", VERSIONS)
def test_subscribe_answers_each_filter(version):
    device = Device({}, version)
    device.connect()
    reply, change = device.subscribe("t/a", "#", "t/#/x", "$share/g/t/+", "$SYS/#", "$share/a.b/t/a", qos=2)
    if version == MQTT_5:
        assert reply.reason_codes == (2, ReasonCode.WILDCARD_SUBSCRIPTIONS_NOT_SUPPORTED,
                                      ReasonCode.TOPIC_FILTER_INVALID, 2, ReasonCode.TOPIC_FILTER_INVALID,
                                      ReasonCode.TOPIC_FILTER_INVALID)
    else:
        assert reply.reason_codes == (2, 0x80, 0x80, 2, 0x80, 0x80)
    assert change.added == ("t/a", "$share/g/t/+")
    actions = device.send(Unsubscribe(2, ("t/a", "nothing/here")))
    (change,) = of(actions, ChangeSubscriptions)
    assert change.removed == ("t/a",)
    assert change.reply == UnsubAck(2, (0, ReasonCode.NO_SUBSCRIPTION_EXISTED))


def test_no_local_on_a_shared_subscription_is_a_protocol_error():
    device = Device({}, MQTT_5)
    device.connect()
    actions = device.send(Subscribe(1, (Subscription("$share/g/t/a", 1, no_local=True),)))
    assert sent(actions) == [Disconnect(ReasonCode.PROTOCOL_ERROR)]


@pytest.mark.parametrize("version", VERSIONS)
def test_deliveries_take_the_lower_qos_and_complete_on_ack(version):
    device = Device({}, version)
    device.connect()
    device.subscribe("t/#", qos=1)
    actions = device.conn.deliver(delivery(qos=2), "tok")
    (publish,) = sent(actions)
    assert publish.qos == 1 and publish.packet_identifier and not of(actions, Ack)
    assert device.send(PubAck(publish.packet_identifier)) == [Ack("tok")]
    assert device.send(PubAck(publish.packet_identifier)) == []  # twice: nothing left
    assert device.conn.deliver(delivery("other/x"), "skip") == [Ack("skip")]  # matched no filter


def test_qos2_delivery_goes_publish_pubrec_pubrel_pubcomp():
    device = Device({}, MQTT_5)
    device.connect()
    device.subscribe("t/a", qos=2)
    (publish,) = sent(device.conn.deliver(delivery(), "tok"))
    pid = publish.packet_identifier
    assert sent(device.send(PubRec(pid))) == [PubRel(pid)]
    assert device.send(PubComp(pid)) == [Ack("tok")]


def test_qos0_delivery_is_done_when_sent():
    device = Device({}, MQTT_5)
    device.connect()
    device.subscribe("t/a", qos=0)
    actions = device.conn.deliver(delivery(), "tok")
    assert sent(actions)[0].qos == 0 and of(actions, Ack) == [Ack("tok")]


def test_overlapping_subscriptions_give_one_publish_with_every_subscription_identifier():
    device = Device({}, MQTT_5)
    device.connect()
    device.subscribe("t/+", qos=0, pid=1, properties=Properties(subscription_identifier=(7,)))
    device.subscribe("t/#", qos=1, pid=2, properties=Properties(subscription_identifier=(3,)))
    (publish,) = sent(device.conn.deliver(delivery(user_property=(("region", "eu"),)), "tok"))
    assert publish.qos == 1
    assert publish.properties.subscription_identifier == (3, 7)
    assert publish.properties.user_property == (("region", "eu"),)


def test_the_clients_receive_maximum_holds_back_deliveries_until_acks():
    device = Device({}, MQTT_5)
    device.connect(properties=Properties(receive_maximum=2))
    device.subscribe("t/a", qos=1)
    first = [sent(device.conn.deliver(delivery(payload=bytes([i])), i)) for i in range(4)]
    assert [len(p) for p in first] == [1, 1, 0, 0]
    actions = device.send(PubAck(first[0][0].packet_identifier))
    assert actions[0] == Ack(0) and [p.payload for p in sent(actions)] == [b"\x02"]


def test_a_message_larger_than_the_clients_maximum_packet_size_is_dropped_as_delivered():
    device = Device({}, MQTT_5)
    device.connect(properties=Properties(maximum_packet_size=64))
    device.subscribe("t/a", qos=1)
    assert device.conn.deliver(delivery(payload=b"x" * 100), "big") == [Ack("big")]


def test_a_resumed_session_gets_unacknowledged_messages_again_with_dup():
    sessions = {}
    device = Device(sessions, MQTT_3_1_1)
    device.connect(clean_start=False)
    device.subscribe("t/a", qos=2)
    (first,) = sent(device.conn.deliver(delivery(payload=b"1"), "one"))
    (second,) = sent(device.conn.deliver(delivery(payload=b"2"), "two"))
    device.send(PubRec(second.packet_identifier))
    actions = device.conn.connection_lost(1.0)
    assert not of(actions, SessionEnded) and not of(actions, Release)
    assert device.conn.session.owner is None
    assert device.conn.session is sessions["dev1"]
    # while detached, QoS 1/2 deliveries wait in the session
    assert deliver(sessions["dev1"], delivery(payload=b"3"), "three") == []
    again = Device(sessions, MQTT_3_1_1)
    actions = again.connect(clean_start=False)
    connack, *resent = sent(actions)
    assert connack.session_present
    assert resent == [Publish("t/a", b"1", 2, dup=True, packet_identifier=first.packet_identifier),
                      PubRel(second.packet_identifier), resent[2]]
    assert resent[2].payload == b"3" and not resent[2].dup


def test_a_clean_start_ends_the_old_session_and_releases_what_it_held():
    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect(clean_start=False, properties=Properties(session_expiry_interval=60))
    device.subscribe("t/a", qos=1)
    device.conn.deliver(delivery(), "held")
    again = Device(sessions, MQTT_5)
    actions = again.connect(clean_start=True)
    (connected,) = of(actions, Connected)
    assert connected.taken_over is device.conn and not connected.session_present
    assert of(actions, SessionEnded)[0].session is device.conn.session
    assert of(actions, Release) == [Release(("held",))]
    old = device.conn.take_over(1.0)
    assert sent(old) == [Disconnect(ReasonCode.SESSION_TAKEN_OVER)] and not of(old, SessionEnded)
    assert sessions["dev1"] is again.conn.session and again.conn.session.subscriptions == {}


def test_a_session_taken_over_with_clean_start_0_carries_on():
    sessions = {}
    device = Device(sessions, MQTT_3_1_1)
    device.connect(clean_start=False)
    device.subscribe("t/a", qos=1)
    again = Device(sessions, MQTT_3_1_1)
    (connected,) = of(again.connect(clean_start=False), Connected)
    assert connected.session_present and connected.taken_over is device.conn
    assert not of(device.conn.take_over(1.0), SessionEnded)
    assert sessions["dev1"].owner is again.conn and "t/a" in sessions["dev1"].subscriptions


def test_a_session_that_ends_with_its_connection_releases_its_deliveries():
    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect()
    device.subscribe("t/a", qos=1)
    device.conn.deliver(delivery(), "unacked")
    actions = device.conn.connection_lost(1.0)
    assert of(actions, Release) == [Release(("unacked",))] and sessions == {}


def test_a_shared_qos2_delivery_is_the_members_at_once_and_a_qos1_one_is_handed_back_if_unacknowledged():
    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect(clean_start=False, properties=Properties(session_expiry_interval=60))
    device.subscribe("$share/g/t/#", qos=2)
    assert of(device.conn.deliver(delivery(qos=2), "qos2", share="$share/g/t/#"), Ack) == [Ack("qos2")]
    assert of(device.conn.deliver(delivery(qos=1), "qos1", share="$share/g/t/#"), Ack) == []
    assert [f.token for f in sessions["dev1"].in_flight.values()] == [None, "qos1"]
    device.conn.connection_lost(1.0)
    (release,) = of(expire(sessions, 100.0), Release)  # the session ended without its client
    assert "qos1" in release.tokens and "qos2" not in release.tokens


def test_garbage_closes_with_the_decoders_reason_code():
    device = Device({}, MQTT_5)
    device.connect(will=Will("t/status", b"offline"))
    actions = device.conn.receive_data(b"\x00\x00", 1.0)
    assert sent(actions) == [Disconnect(ReasonCode.MALFORMED_PACKET)] and of(actions, Forward)


def test_a_detached_session_ends_when_its_expiry_interval_has_passed():
    from ferrymq.gateways.mqtt.session import expire

    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect(clean_start=False, properties=Properties(session_expiry_interval=60))
    device.subscribe("t/a", qos=1)
    assert expire(sessions, 1000.0) == []  # attached: never
    device.conn.connection_lost(10.0)
    assert deliver(sessions["dev1"], delivery(), "waiting") == []
    assert expire(sessions, 69.9) == []
    actions = expire(sessions, 70.0)
    assert of(actions, SessionEnded) and of(actions, Release) == [Release(("waiting",))] and sessions == {}


def test_a_sweep_given_candidates_looks_at_them_alone():
    from ferrymq.gateways.mqtt.session import expire

    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect(clean_start=False, properties=Properties(session_expiry_interval=60))
    device.conn.connection_lost(10.0)
    session = sessions["dev1"]
    assert expire(sessions, 70.0, []) == [] and sessions == {"dev1": session}
    replaced = Device(sessions, MQTT_5, now=20.0)  # the client returned: its session is another one now
    replaced.connect(clean_start=True, properties=Properties(session_expiry_interval=60))
    assert expire(sessions, 1000.0, [session]) == [] and "dev1" in sessions  # the stale object is left alone
    replaced.conn.connection_lost(30.0)
    assert of(expire(sessions, 90.0, [sessions["dev1"]]), SessionEnded) and sessions == {}


def test_a_connect_after_the_expiry_finds_no_session_even_before_a_sweep():
    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect(clean_start=False, properties=Properties(session_expiry_interval=5))
    device.conn.connection_lost(0.0)
    again = Device(sessions, MQTT_5, now=6.0)
    actions = again.conn.receive_data(encode(Connect("dev1", MQTT_5, clean_start=False), MQTT_5), 6.0)
    assert of(actions, SessionEnded) and not of(actions, Connected)[0].session_present


def test_a_3_1_1_session_without_clean_session_never_expires():
    from ferrymq.gateways.mqtt.session import expire

    sessions = {}
    device = Device(sessions, MQTT_3_1_1)
    device.connect(clean_start=False)
    device.conn.connection_lost(0.0)
    assert expire(sessions, 10.0 ** 9) == [] and "dev1" in sessions


def test_no_local_keeps_a_clients_own_messages_from_it():
    device = Device({}, MQTT_5)
    device.connect()
    device.send(Subscribe(1, (Subscription("t/#", 1, no_local=True), Subscription("t/a", 0))))
    (forward,) = device.send(Publish("t/a", b"mine", 1, packet_identifier=1))
    assert forward.message.properties[mapping.CLIENT_ID] == "dev1"
    own = mapping.to_delivery(forward.message.topic, forward.message.properties, b"mine", 0)
    assert own.publisher == "dev1"
    (publish,) = sent(device.conn.deliver(own, "tok"))
    assert publish.qos == 0  # only the filter without No Local matched
    others = mapping.Delivery("t/a", b"theirs", 1, publisher="dev2")
    assert sent(device.conn.deliver(others, "tok"))[0].qos == 1


def test_a_filter_matches_only_messages_stored_since_it_was_subscribed():
    device = Device({}, MQTT_5)
    device.connect()
    device.send(Subscribe(1, (Subscription("t/#", 1),)), now=100.0)
    assert device.conn.deliver(delivery(), "old", stored_at=99.9) == [Ack("old")]
    assert sent(device.conn.deliver(delivery(), "new", stored_at=100.0))
    device.send(Subscribe(2, (Subscription("t/#", 2),)), now=200.0)  # a changed subscription keeps its time
    assert sent(device.conn.deliver(delivery(), "kept", stored_at=150.0))


def _delayed_will(delay: int) -> Will:
    return Will("t/status", b"offline", 1, properties=Properties(will_delay_interval=delay))


def test_a_delayed_will_is_published_when_its_delay_passes():
    from ferrymq.gateways.mqtt.session import expire

    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect(clean_start=False, will=_delayed_will(5), properties=Properties(session_expiry_interval=60))
    assert not of(device.conn.connection_lost(10.0), Forward)
    assert expire(sessions, 14.9) == []
    (will,) = of(expire(sessions, 15.0), Forward)
    assert will.message.body == b"offline" and expire(sessions, 16.0) == []


def test_a_delayed_will_is_dropped_when_the_client_comes_back_first():
    from ferrymq.gateways.mqtt.session import expire

    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect(clean_start=False, will=_delayed_will(5), properties=Properties(session_expiry_interval=60))
    device.conn.connection_lost(10.0)
    again = Device(sessions, MQTT_5)
    assert not of(again.conn.receive_data(encode(Connect("dev1", MQTT_5, clean_start=False), MQTT_5), 12.0), Forward)
    again.conn.connection_lost(13.0)
    assert not of(expire(sessions, 20.0), Forward)


def test_a_server_that_stops_keeps_a_delayed_will_pending_in_its_persistent_session():
    """It is published when due (after the restart, the session being persisted) unless the client comes
    back first, as after any close; mosquitto 2.0.11 publishes it at once as it stops."""
    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect(clean_start=False, will=_delayed_will(5), properties=Properties(session_expiry_interval=60))
    assert not of(device.conn.shut_down(10.0), Forward)
    (will,) = of(expire(sessions, 15.0), Forward)
    assert will.message.body == b"offline"


def test_a_delayed_will_goes_with_its_session_when_that_ends_first():
    sessions = {}
    device = Device(sessions, MQTT_5)
    device.connect(will=_delayed_will(30))  # Session Expiry Interval 0: the session ends with the connection
    assert of(device.conn.connection_lost(1.0), Forward)


def test_a_message_stored_in_the_millisecond_of_the_subscribe_is_delivered():
    """Store times have millisecond resolution: a message stored in the millisecond a filter was subscribed
    in (its store time, cut to the millisecond, reads as before the SUBSCRIBE) is for that filter."""
    device = Device({}, MQTT_5, now=1000.0)
    device.connect()
    device.send(Subscribe(1, (Subscription("t/a", 1),), Properties()), now=1000.0127)
    assert device.conn.session.matching(delivery(), stored_at=1000.012) == ["t/a"]
    assert device.conn.session.matching(delivery(), stored_at=1000.011) == []  # stored a millisecond before
