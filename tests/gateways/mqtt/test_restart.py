"""Persistent sessions and retained messages across a restart of the broker, with paho devices over TCP:
on mosquitto (``persistence true``, its file in the test's directory) first, then on ``ferrymq standalone``
stopped and started again over the same store."""

from __future__ import annotations

import dataclasses
import socket
import time
import uuid

import pytest
from ferrymq.testing.ports import LOOPBACK
from ferrymq.testing.server import FerryMQServer

from .devices import V5, V311, Device, drop_all, hold_all, publish_burst_to
from .mosquitto import Mosquitto

pytestmark = pytest.mark.timeout(120)


class _FerryMQ:
    """``ferrymq standalone`` with the MQTT gateway, as the scenario sees a broker: a port and a restart.
    SYNC_FLUSH: a persistent session's acknowledgements wait for its state on disk, as sends do."""

    def __init__(self, home):
        self.server = FerryMQServer(home, {"autoCreateTopicEnable": True, "flushDiskType": "SYNC_FLUSH"},
                                    mqtt=True).start()
        self.port = self.server.mqtt_port

    def restart(self) -> None:
        self.server.restart()

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="module", params=["mosquitto", "ferrymq"])
def broker(request, tmp_path_factory):
    """One broker per module, restarted by each scenario (fresh topics and client identifiers keep them apart)."""
    home = tmp_path_factory.mktemp(request.param)
    server = Mosquitto(home, persistence=True) if request.param == "mosquitto" else _FerryMQ(home)
    yield server
    server.stop()


def _topic() -> str:
    return f"Mqtt_{uuid.uuid4().hex[:10]}"


@pytest.mark.parametrize("version", [V311, V5])
def test_a_persistent_session_gets_its_qos_1_and_2_messages_as_promised_after_a_restart(broker, version):
    topic, other = _topic(), _topic()
    client_id = f"restart-{uuid.uuid4().hex[:8]}"
    shared, member_id = _topic(), f"member-{uuid.uuid4().hex[:8]}"
    device = Device(broker.port, version, client_id, clean=False, manual_ack=True)
    member = Device(broker.port, version, member_id, clean=False, manual_ack=True)
    publisher = Device(broker.port, version)
    device.subscribe(f"{topic}/#", qos=2)
    member.subscribe(f"$share/g{uuid.uuid4().hex[:8]}/{shared}/#", qos=2)
    # received and not completed: QoS 1 without PUBACK, QoS 2 with PUBREC but without PUBCOMP
    publisher.publish(f"{topic}/in-flight", b"1", 1)
    publisher.publish(f"{topic}/released", b"2", 2)
    publisher.publish(f"{shared}/a", b"s1", 2)
    assert sorted(m.payload for m in device.receive(2)) == [b"1", b"2"]
    assert [m.payload for m in member.receive(1)] == [b"s1"]
    drop_all(device, member)
    publisher.publish(f"{topic}/queued", b"3", 1)
    publisher.publish(f"{topic}/queued", b"4", 2)
    publisher.publish(f"{shared}/a", b"s2", 2)
    publisher.publish(f"{other}/config", b"on", 1, retain=True)
    publisher.close()
    time.sleep(0.2)

    broker.restart()

    device, member = Device(broker.port, version, client_id, clean=False), None
    try:
        assert device.session_present is True
        got = device.receive(3)
        # QoS 1 at least once (again, DUP), QoS 2 exactly once (PUBREL again, not the message)
        assert sorted((m.payload, m.qos) for m in got) == [(b"1", 1), (b"3", 1), (b"4", 2)]
        assert [bool(m.dup) for m in got if m.payload == b"1"] == [True]
        # also on a shared subscription, whose QoS 2 messages are their member's to complete (MQTT 5 4.8.2)
        member = Device(broker.port, version, member_id, clean=False)
        assert [(m.payload, m.qos) for m in member.receive(1)] == [(b"s2", 2)]
        device.nothing_more(0.5)
        member.nothing_more(0.1)
        late = Device(broker.port, version)
        late.subscribe(f"{other}/#")
        ((name, payload, retain),) = [(m.topic, m.payload, bool(m.retain)) for m in late.receive(1)]
        assert (name, payload, retain) == (f"{other}/config", b"on", True)
        late.close()
    finally:
        device.close()
        if member is not None:
            member.close()


def test_a_burst_acknowledged_before_a_restart_reaches_a_persistent_session_after_it(broker):
    """QoS 1 PUBLISHes to two topics in one write (FerryMQ: stored together, SYNC_FLUSH) are each
    acknowledged, in order, and a persistent session subscribed before gets every one, in each topic's
    order, after a restart."""
    from ferrymq.gateways.mqtt.packets import PubAck

    topic, client_id = _topic(), f"burst-{uuid.uuid4().hex[:8]}"
    device = Device(broker.port, V311, client_id, clean=False)
    device.subscribe(f"{topic}/#", qos=1)
    device.close()
    sent = [(f"{topic}/{'ab'[i % 2]}", b"m%d" % i) for i in range(12)]
    assert publish_burst_to(broker.port, V311, sent) == [PubAck(i + 1) for i in range(12)]

    broker.restart()

    device = Device(broker.port, V311, client_id, clean=False)
    try:
        got = device.receive(12)
        for name in (f"{topic}/a", f"{topic}/b"):
            assert [m.payload for m in got if m.topic == name] == [p for t, p in sent if t == name]
        device.nothing_more(0.3)
    finally:
        device.close()


@pytest.mark.parametrize("broker", ["ferrymq"], indirect=True)
def test_sessions_that_expired_while_the_broker_was_down_are_gone(broker):
    """FerryMQ's alone: mosquitto 2.0.11 never expires a session it read back from its file."""
    client_id, lasting_id = f"short-{uuid.uuid4().hex[:8]}", f"long-{uuid.uuid4().hex[:8]}"
    for cid, expiry in ((client_id, 1), (lasting_id, 600)):
        device = Device(broker.port, V5, cid, clean=False, session_expiry=expiry)
        device.subscribe(f"{_topic()}/#")
        device.close()
    closed_at = time.monotonic()
    broker.stop()
    time.sleep(max(0.0, 1.2 - (time.monotonic() - closed_at)))
    broker.restart()
    for cid, present in ((client_id, False), (lasting_id, True)):
        device = Device(broker.port, V5, cid, clean=False)
        assert device.session_present is present, cid
        device.close()


@pytest.mark.parametrize("broker", ["ferrymq"], indirect=True)
def test_after_a_crash_a_persistent_session_loses_no_acknowledged_message(broker):
    """FerryMQ's alone: mosquitto 2.0.11 saves its sessions at exit (or every autosave_interval), so SIGKILL
    loses them. The messages were queued for the absent session, whose file says how far each queue
    served it: the gateway's offsets, saved every 5 s, are behind after the crash, and the messages read
    again are not queued again, so each comes once."""
    topic, client_id = _topic(), f"crash-{uuid.uuid4().hex[:8]}"
    device = Device(broker.port, V311, client_id, clean=False)
    device.subscribe(f"{topic}/#", qos=1)
    device.close()
    publisher = Device(broker.port, V311)
    for payload in (b"a", b"b"):
        publisher.publish(f"{topic}/x", payload, 1)  # acknowledged: stored
    publisher.close()
    time.sleep(0.3)
    broker.server.kill()
    broker.server.start()
    device = Device(broker.port, V311, client_id, clean=False)
    try:
        assert device.session_present is True
        assert [m.payload for m in device.receive(2)] == [b"a", b"b"]
        device.nothing_more(1.5)
    finally:
        device.close()


def test_a_delayed_will_is_published_once_across_a_restart(broker):
    """An MQTT 5 will delayed past the restart is not lost, and one published before it is not published
    again; the will's RETAIN holds. mosquitto 2.0.11 publishes every pending will as it stops (its source
    says they ought to be persisted), FerryMQ when each is due (the next test)."""
    topic = _topic()
    watcher_id = f"watch-{uuid.uuid4().hex[:8]}"
    watcher, live = Device(broker.port, V5, watcher_id, clean=False), Device(broker.port, V5)
    for device in (watcher, live):
        device.subscribe(f"{topic}/#", qos=1)
    early = Device(broker.port, V5, clean=False, will=(f"{topic}/early", b"gone before", 1), will_delay=1)
    pending = Device(broker.port, V5, clean=False, will=(f"{topic}/pending", b"gone across", 1, True), will_delay=3)
    drop_all(early, pending, watcher)
    assert [m.payload for m in live.receive(1)] == [b"gone before"]
    live.close()

    broker.restart()

    watcher = Device(broker.port, V5, watcher_id, clean=False)
    try:
        # FerryMQ's restart outlasts the pending will's delay: a will published again would come at the first sweep, with it or before
        assert sorted(m.payload for m in watcher.receive(2)) == [b"gone across", b"gone before"]
        watcher.nothing_more(0.5)
        late = Device(broker.port, V5)
        late.subscribe(f"{topic}/#")
        assert [(m.topic, bool(m.retain)) for m in late.receive(1)] == [(f"{topic}/pending", True)]
        late.close()
    finally:
        watcher.close()


def test_the_wills_of_the_devices_connected_at_a_stop_are_published_once(broker):
    """A stop closes every connection without its device's DISCONNECT, so each will is published (MQTT 5
    3.1.2.5), as mosquitto 2.0.11 publishes them as it stops; a persistent subscriber gets each once after
    the restart, and none of a device that had disconnected normally. An MQTT 5 will with a delay is
    published once too: by mosquitto at the stop, by FerryMQ when due, its session persisted meanwhile."""
    topic, watcher_id = _topic(), f"watch-{uuid.uuid4().hex[:8]}"
    watcher = Device(broker.port, V5, watcher_id, clean=False)
    watcher.subscribe(f"{topic}/#", qos=1)
    polite = Device(broker.port, V5, will=(f"{topic}/polite", b"never", 1))
    polite.close()
    connected = [Device(broker.port, V311, will=(f"{topic}/v311", b"v311", 1)),
                 Device(broker.port, V5, will=(f"{topic}/v5", b"v5", 1)),
                 Device(broker.port, V5, clean=False, will=(f"{topic}/delayed", b"delayed", 1), will_delay=1)]
    hold_all(watcher, *connected)

    broker.restart()

    for device in (watcher, *connected):
        device.let_go()
    watcher = Device(broker.port, V5, watcher_id, clean=False)
    try:
        assert watcher.session_present is True
        assert sorted(m.payload for m in watcher.receive(3)) == [b"delayed", b"v311", b"v5"]
        watcher.nothing_more(1.0)
    finally:
        watcher.close()


@pytest.mark.parametrize("broker", ["ferrymq"], indirect=True)
def test_after_a_crash_each_delayed_will_is_published_when_due_or_at_its_sessions_end_unless_its_device_returned(
        broker):
    """FerryMQ's alone (mosquitto publishes pending wills as it stops, and loses them to SIGKILL). Four MQTT 5
    devices with delayed wills drop off just before the server is killed: a will whose delay passes while
    the server is down is published once it is back, as is one whose session expires meanwhile (a will
    goes when its delay passes or its session ends, whichever is first: MQTT 5 3.1.3.2.2); one due after
    the restart is published when due, not sooner; the device that returns in time has none published."""
    topic, watcher_id = _topic(), f"watch-{uuid.uuid4().hex[:8]}"
    watcher = Device(broker.port, V5, watcher_id, clean=False)
    watcher.subscribe(f"{topic}/#", qos=1)
    delay = 5  # longer than the kill and the start take (2-4 s on a busy machine)
    overdue = Device(broker.port, V5, clean=False, will=(f"{topic}/overdue", b"overdue", 1), will_delay=1)
    ended = Device(broker.port, V5, clean=False, session_expiry=1, will=(f"{topic}/ended", b"ended", 1),
                   will_delay=600)
    due = Device(broker.port, V5, clean=False, will=(f"{topic}/due", b"due", 1), will_delay=delay)
    back_id = f"back-{uuid.uuid4().hex[:8]}"
    back = Device(broker.port, V5, back_id, clean=False, will=(f"{topic}/back", b"never", 1), will_delay=delay)
    dropped_at = time.monotonic()  # at most a second before each device's drop
    drop_all(overdue, ended, due, back, watcher)
    time.sleep(0.3)  # the session files are written (a drop has no acknowledgement to wait for)
    broker.server.kill()
    time.sleep(max(0.0, 1.1 - (time.monotonic() - dropped_at)))
    broker.server.start()

    back = Device(broker.port, V5, back_id, clean=False)
    watcher = Device(broker.port, V5, watcher_id, clean=False)
    try:
        assert back.session_present is True
        got = {m.payload: m.timestamp - dropped_at for m in watcher.receive(3, timeout=delay + 5)}
        assert sorted(got) == [b"due", b"ended", b"overdue"]
        assert got[b"due"] >= delay - 0.1, got
        watcher.nothing_more(0.5)  # the returned device's will would have been due at the same sweep
    finally:
        back.close()
        watcher.close()


@pytest.mark.parametrize("broker", ["ferrymq"], indirect=True)
def test_after_a_crash_a_persistent_session_is_not_given_its_qos_2_message_again(broker):
    """FerryMQ's alone (mosquitto loses its sessions to SIGKILL, above). The session's file says how far
    it was served, and is on disk before the PUBLISH is sent (SYNC_FLUSH): the gateway's offsets, saved
    every 5 s, are behind after the crash, and the message is read again but not given again."""
    topic, client_id = _topic(), f"crash2-{uuid.uuid4().hex[:8]}"
    device = Device(broker.port, V5, client_id, clean=False)
    device.subscribe(f"{topic}/#", qos=2)
    publisher = Device(broker.port, V5)
    publisher.publish(f"{topic}/x", b"exactly once", 2)
    publisher.close()
    assert [(m.payload, m.qos) for m in device.receive(1)] == [(b"exactly once", 2)]
    time.sleep(0.3)  # the PUBCOMP arrived
    device.drop()
    broker.server.kill()
    broker.server.start()
    device = Device(broker.port, V5, client_id, clean=False)
    try:
        assert device.session_present is True
        device.nothing_more(1.5)
    finally:
        device.close()


class _RawDevice:
    """An MQTT 5 client of FerryMQ's own codec over a socket, to stop a QoS 2 flow half way."""

    def __init__(self, port: int, client_id: str):
        from ferrymq.gateways.mqtt.connection import Decoder
        from ferrymq.gateways.mqtt.packets import Connect
        from ferrymq.gateways.mqtt.properties import Properties

        self.sock = socket.create_connection((LOOPBACK, port), 5)
        self.sock.settimeout(5)
        self.decoder = Decoder("client", version=5)
        self.send(Connect(client_id, 5, clean_start=False, properties=Properties(session_expiry_interval=600)))
        self.connack = self.receive()

    def send(self, packet) -> None:
        from ferrymq.gateways.mqtt.packets import encode

        self.sock.sendall(encode(packet, 5))

    def receive(self):
        events = []
        while not events:
            events = self.decoder.feed(self.sock.recv(4096))
        return events[0]


def test_a_qos2_message_received_before_a_restart_is_released_after_it_exactly_once(broker):
    from ferrymq.gateways.mqtt.packets import PubComp, Publish, PubRec, PubRel

    topic, client_id, watcher_id = _topic(), f"raw-{uuid.uuid4().hex[:8]}", f"watch-{uuid.uuid4().hex[:8]}"
    watcher = Device(broker.port, V5, watcher_id, clean=False)
    watcher.subscribe(f"{topic}/#", qos=2)
    device = _RawDevice(broker.port, client_id)
    publish = Publish(f"{topic}/once", b"exactly once", 2, packet_identifier=7)
    device.send(publish)
    assert device.receive() == PubRec(7)  # stored (or held) by the broker; PUBREL not sent yet
    device.sock.close()
    time.sleep(0.3)
    watcher.drop()
    # mosquitto forwards a QoS 2 message at its PUBREL, FerryMQ once stored (spec 4.3.3 allows both)
    before = [(m.payload, m.qos) for m in list(watcher.messages.queue)]

    broker.restart()

    device = _RawDevice(broker.port, client_id)
    assert device.connack.session_present
    device.send(dataclasses.replace(publish, dup=True))  # the PUBREC never arrived, as far as it knows
    assert device.receive() == PubRec(7)
    device.send(PubRel(7))
    assert device.receive() == PubComp(7)  # the packet identifier was remembered: success
    device.sock.close()
    watcher = Device(broker.port, V5, watcher_id, clean=False)
    try:
        after = [] if before else [(m.payload, m.qos) for m in watcher.receive(1)]
        assert before + after == [(b"exactly once", 2)]
        watcher.nothing_more(0.5)
    finally:
        watcher.close()
