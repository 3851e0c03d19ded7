"""The persisted MQTT state: the session and retained-message codec, the files, the retained store."""

from __future__ import annotations

import json

import pytest
from ferrymq.gateways.mqtt import mapping
from ferrymq.gateways.mqtt.packets import Publish, Subscription, Will
from ferrymq.gateways.mqtt.persistence import (
    StateError,
    StateFiles,
    decode_retained,
    decode_session,
    encode_retained,
    encode_session,
    file_name,
    write_files,
)
from ferrymq.gateways.mqtt.properties import Properties
from ferrymq.gateways.mqtt.retained import RetainedMessages
from ferrymq.gateways.mqtt.session import NEVER_EXPIRES, InFlight, Outgoing, Session
from ferrymq.sdk.message import Message


def _session() -> Session:
    session = Session("dev-é/1", expiry_interval=3600, expires_at=1_700_000_100.5)
    session.subscriptions = {"t/#": Subscription("t/#", 2, no_local=True),
                             "t/a": Subscription("t/a", 1, retain_as_published=True, retain_handling=1),
                             "$share/g/t/+": Subscription("$share/g/t/+", 1)}
    session.subscription_ids = {"t/#": 7}
    session.subscribed_at = {"t/#": 1_700_000_000.25, "t/a": 1_700_000_001.0, "$share/g/t/+": 1_700_000_002.0}
    session.received_qos2 = {3, 9}
    props = Properties(user_property=(("k", "v"),), content_type="text/plain", subscription_identifier=(7,))
    session.in_flight = {
        4: InFlight(Publish("t/a", b"\x00sent", 2, True, packet_identifier=4, properties=props), None),
        5: InFlight(Publish("t/b", b"released", 2, packet_identifier=5), None, Outgoing.RELEASED),
        6: InFlight(Publish("t/c", b"shared", 1, packet_identifier=6), object()),
    }
    session.queued.extend([(Publish("t/d", b"waiting", 1, packet_identifier=1), None),
                           (Publish("t/e", b"shared", 1, packet_identifier=1), object())])
    session.served = {("t", 0): 4096, ("t", 3): 0}
    return session


def test_a_session_round_trips_without_what_rocketmq_hands_out_again():
    session = _session()
    back = decode_session(encode_session(session))
    assert (back.client_id, back.expiry_interval, back.expires_at) == ("dev-é/1", 3600, 1_700_000_100.5)
    assert back.subscriptions == session.subscriptions and back.subscription_ids == {"t/#": 7}
    assert back.subscribed_at == session.subscribed_at and back.received_qos2 == {3, 9}
    assert back.served == {("t", 0): 4096, ("t", 3): 0}
    # deliveries with a token belong to a shared subscription's consume, which RocketMQ redelivers
    assert {pid: (f.publish, f.state, f.token) for pid, f in back.in_flight.items()} == {
        4: (session.in_flight[4].publish, Outgoing.PUBLISHED, None),
        5: (session.in_flight[5].publish, Outgoing.RELEASED, None)}
    assert list(back.queued) == [(Publish("t/d", b"waiting", 1, packet_identifier=1), None)]
    assert back.owner is None and back.next_packet_identifier() == 6  # after those in flight
    assert back.pending_will is None


def test_a_pending_delayed_will_round_trips_with_its_due_time_and_properties():
    session = Session("d", expiry_interval=600)
    will = Will("t/status", b"\x00offline", 2, True,
                Properties(will_delay_interval=30, message_expiry_interval=60, content_type="text/plain",
                           user_property=(("k", "v"), ("k", "w")), correlation_data=b"\x01"))
    session.pending_will = (will, 1_700_000_030.5)
    assert decode_session(encode_session(session)).pending_will == (will, 1_700_000_030.5)


def test_an_empty_session_round_trips():
    session = Session("d", expiry_interval=NEVER_EXPIRES)
    back = decode_session(encode_session(session))
    assert (back.client_id, back.expiry_interval, back.expires_at, back.subscriptions, back.in_flight,
            list(back.queued), back.received_qos2) == ("d", NEVER_EXPIRES, None, {}, {}, [], set())


def test_a_retained_message_round_trips():
    message = Message("t", b"\x00\xffbody", tags="a/b", properties={mapping.MQTT_TOPIC: "t/a/b", mapping.RETAIN: "1"})
    back = decode_retained(encode_retained(message))
    assert (back.topic, back.body, back.properties) == (message.topic, message.body, message.properties)


@pytest.mark.parametrize("data", [b"", b"not json", b"[]", b'{"v": 2, "clientId": "d"}', b'{"v": 1}',
                                  (b'{"v":1,"clientId":"d","expiryInterval":1,"expiresAt":null,"subscriptions":[],'
                                   b'"receivedQos2":[],"inFlight":[],"queued":["AAAA"]}'),
                                  *(b'{"v":1,"clientId":"d","expiryInterval":1,"expiresAt":null,"subscriptions":[],'
                                    b'"receivedQos2":[],"inFlight":[],"queued":[],"will":{"due":1,"connect":"%s"}}'
                                    % connect for connect in (b"MAQAAXQA", b"EA0ABE1RVFQFAgA8AAAA")),
                                  (b'{"v":1,"clientId":"d","expiryInterval":"x","expiresAt":null,"subscriptions":[],'
                                   b'"receivedQos2":[],"inFlight":[],"queued":[]}')])
def test_what_the_codec_did_not_write_is_a_state_error(data):
    with pytest.raises(StateError):
        decode_session(data)
    with pytest.raises(StateError):
        decode_retained(data)


def test_the_files_are_replaced_atomically_and_read_back_without_expired_sessions(tmp_path):
    files = StateFiles(tmp_path)
    alive, expired = _session(), Session("gone", expiry_interval=10, expires_at=99.0)
    attached = Session("attached", expiry_interval=30)  # the process ended while it was connected
    retained = Message("t", b"on", properties={mapping.MQTT_TOPIC: "t/x"})
    files.load(0.0)  # makes the directories
    write_files([(files.sessions_dir / file_name(s.client_id), encode_session(s)) for s in (alive, expired, attached)]
                + [(files.retained_dir / file_name("t/x"), encode_retained(retained)),
                   (files.sessions_dir / "broken.json", b"{")], sync=True)
    assert not list(tmp_path.rglob("*.tmp"))
    sessions, messages = files.load(100.0)
    assert sorted(sessions) == ["attached", "dev-é/1"]
    assert sessions["attached"].expires_at == 130.0
    assert not (files.sessions_dir / file_name("gone")).exists()  # expired: removed
    assert [(m.topic, m.body) for m in messages] == [("t", b"on")]
    # ended while the process was down, but its delayed will is owed: kept for the sweep that publishes it
    owing = Session("owing", expiry_interval=10, expires_at=99.0, pending_will=(Will("t/w", b"off"), 150.0))
    write_files([(files.sessions_dir / file_name("owing"), encode_session(owing))], sync=False)
    assert files.load(100.0)[0]["owing"].pending_will == owing.pending_will
    write_files([(files.sessions_dir / file_name(cid), None) for cid in ("attached", "owing")], sync=False)
    assert sorted(files.load(100.0)[0]) == ["dev-é/1"]


def test_a_batch_writes_what_changed_as_it_is_then(tmp_path):
    files = StateFiles(tmp_path)
    files.load(0.0)
    sessions = {"keep": Session("keep", expiry_interval=60), "clean": Session("clean", expiry_interval=0)}
    store = RetainedMessages()
    store.set(Message("t", b"v", properties={mapping.MQTT_TOPIC: "t/x"}))
    files.watch(sessions, store.get)
    for client_id in ("keep", "clean", "ended"):
        files._dirty_sessions.add(client_id)
    files._dirty_retained.update({"t/x", "t/cleared"})
    batch = dict(files._batch())
    assert json.loads(batch[files.sessions_dir / file_name("keep")])["clientId"] == "keep"
    assert batch[files.sessions_dir / file_name("clean")] is None  # not persistent: no file
    assert batch[files.sessions_dir / file_name("ended")] is None
    assert decode_retained(batch[files.retained_dir / file_name("t/x")]).body == b"v"
    assert batch[files.retained_dir / file_name("t/cleared")] is None
    assert files._batch() == []


def test_retained_messages_are_replaced_cleared_and_matched_by_filter():
    store = RetainedMessages()

    def retain(name: str, body: bytes) -> str:
        return store.set(Message(name.partition("/")[0], body, properties={mapping.MQTT_TOPIC: name}))

    for name in ("s/r1/temp", "s/r2/temp", "s/r1/hum", "s", "other/r1/temp"):
        assert retain(name, name.encode()) == name
    retain("s/r1/temp", b"newer")
    assert store.get("s/r1/temp").body == b"newer" and len(store) == 5
    assert sorted(m.body for m in store.matching("s/+/temp")) == [b"newer", b"s/r2/temp"]
    assert sorted(m.body for m in store.matching("s/#")) == [b"newer", b"s", b"s/r1/hum", b"s/r2/temp"]
    assert [m.body for m in store.matching("s/r1/hum")] == [b"s/r1/hum"]
    retain("s/r1/hum", b"")  # an empty payload clears it
    assert store.get("s/r1/hum") is None and store.matching("s/r1/hum") == [] and len(store) == 4
    retain("other/r1/temp", b"")
    assert store.matching("other/#") == []


def test_written_fires_once_the_changes_noted_before_it_are_on_disk(tmp_path):
    from ferrymq.sdk import reactor_thread
    from twisted.internet import defer

    reactor_thread.ensure_running()
    files = StateFiles(tmp_path, sync=True)
    files.load(0.0)
    sessions = {"d": Session("d", expiry_interval=60)}
    files.watch(sessions, lambda topic_name: None)
    path = files.sessions_dir / file_name("d")

    @defer.inlineCallbacks
    def scenario():
        assert files.written().called  # nothing noted
        files.changed("d")
        first = files.written()
        exists_at_once = path.exists()
        yield first
        sessions["d"].received_qos2.add(5)
        files.changed("d")
        second = files.written()
        after_first = decode_session(path.read_bytes()).received_qos2
        yield second
        return exists_at_once, after_first, decode_session(path.read_bytes()).received_qos2

    exists_at_once, after_first, after_second = reactor_thread.call(scenario)
    assert (exists_at_once, after_first, after_second) == (False, set(), {5})


def test_a_retained_message_whose_expiry_passed_is_dropped_when_next_matched():
    from ferrymq.gateways.mqtt.gateway import Gateway

    gateway = Gateway("127.0.0.1:9876")
    expiring = mapping.to_rocketmq(Publish("t/old", b"x", retain=True,
                                           properties=Properties(message_expiry_interval=1)), 0)
    lasting = mapping.to_rocketmq(Publish("t/new", b"y", retain=True), 0)
    for message in (expiring, lasting):
        gateway.retained.set(message)
    assert [(d.topic_name, d.retain) for d in gateway.retained_deliveries("t/+")] == [("t/new", True)]
    assert gateway.retained.get("t/old") is None and gateway.retained.get("t/new") is lasting
