"""paho-mqtt 2.x as a device: a synchronous face over its network thread, for the behaviour tests."""

from __future__ import annotations

import queue
import socket
import threading
import uuid

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion
from paho.mqtt.packettypes import PacketTypes
from paho.mqtt.properties import Properties
from paho.mqtt.subscribeoptions import SubscribeOptions

from ferrymq.testing.ports import LOOPBACK

V311 = mqtt.MQTTv311
V5 = mqtt.MQTTv5
TIMEOUT = 10.0


def publish_properties(**fields) -> Properties:
    """MQTT 5 PUBLISH properties: ``user_property=[(k, v)]``, ``content_type=``, ``correlation_data=`` ..."""
    props = Properties(PacketTypes.PUBLISH)
    for name, value in fields.items():
        setattr(props, "".join(part.capitalize() for part in name.split("_")), value)
    return props


def fresh_topic() -> str:
    """A fresh first level: a RocketMQ topic name, so one scenario's messages never meet another's."""
    return f"Mqtt_{uuid.uuid4().hex[:10]}"


class Device:
    """One connected client; ``messages`` holds what it received, in order."""

    def __init__(self, port: int, version: int = V5, client_id: str | None = None, *, keepalive: int = 60,
                 will: tuple[str, bytes, int] | tuple[str, bytes, int, bool] | None = None, clean: bool = True, session_expiry: int = 3600,
                 will_delay: int = 0, manual_ack: bool = False, tls_ca: str | None = None,
                 login: tuple[str, str] | None = None):
        """``clean=False`` keeps the session after the connection: 3.1.1 Clean Session 0, MQTT 5 Clean
        Start 0 with a Session Expiry Interval of ``session_expiry`` seconds. ``will``: topic, payload, QoS
        and, if given, RETAIN; MQTT 5 delays it ``will_delay`` seconds. With ``manual_ack`` the
        device never completes what it receives (no PUBACK, no PUBCOMP): the server keeps it in flight.
        ``tls_ca``: connect over TLS, checking the server's certificate against this CA file. ``login``:
        the CONNECT's user name and password."""
        self.client_id = client_id or f"dev-{uuid.uuid4().hex[:10]}"
        self.version = version
        kwargs = {"clean_session": clean} if version == V311 else {}
        self.client = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=self.client_id, protocol=version,
                                  manual_ack=manual_ack, **kwargs)
        self.messages: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
        self._connected = threading.Event()
        self._acks: dict[int, threading.Event] = {}
        self.reason_codes: dict[int, list] = {}
        self.session_present = None
        if tls_ca is not None:
            self.client.tls_set(ca_certs=tls_ca)
        if login is not None:
            self.client.username_pw_set(*login)
        self.client.on_connect = self._on_connect
        self.client.on_message = lambda c, u, msg: self.messages.put(msg)
        self.client.on_subscribe = self._acked
        self.client.on_publish = self._published
        if will is not None:
            will_props = None
            if will_delay:
                will_props = Properties(PacketTypes.WILLMESSAGE)
                will_props.WillDelayInterval = will_delay
            self.client.will_set(*will, properties=will_props)
        connect = {}
        if version == V5:
            props = Properties(PacketTypes.CONNECT)
            if not clean:
                props.SessionExpiryInterval = session_expiry
            connect = {"clean_start": clean, "properties": props}
        self.client.connect(LOOPBACK, port, keepalive, **connect)
        self.client.loop_start()
        if not self._connected.wait(TIMEOUT):
            raise TimeoutError(f"{self.client_id}: no CONNACK")

    def _on_connect(self, client, userdata, flags, reason_code, properties) -> None:
        self.session_present = flags.session_present
        self._connected.set()

    def _published(self, client, userdata, mid, reason_code, properties) -> None:
        self.reason_codes[mid] = [reason_code]

    def _acked(self, client, userdata, mid, reason_codes, properties) -> None:
        self.reason_codes[mid] = reason_codes
        self._acks.setdefault(mid, threading.Event()).set()

    def subscribe(self, *filters: str, qos: int = 1, no_local: bool = False, retain_as_published: bool = False,
                  retain_handling: int = 0) -> list:
        """Subscribe and wait for the SUBACK; its reason codes. The options other than ``qos`` are MQTT 5's."""
        options = qos
        if no_local or retain_as_published or retain_handling:
            options = SubscribeOptions(qos=qos, noLocal=no_local, retainAsPublished=retain_as_published,
                                       retainHandling=retain_handling)
        _, mid = self.client.subscribe([(f, options) for f in filters])
        assert self._acks.setdefault(mid, threading.Event()).wait(TIMEOUT), f"{self.client_id}: no SUBACK"
        return self.reason_codes[mid]

    def publish(self, topic: str, payload: bytes, qos: int = 0, properties: Properties | None = None, *,
                retain: bool = False) -> int:
        """Publish and wait until the QoS flow completed (PUBACK, PUBCOMP; QoS 0: written); the reason code
        of the acknowledgement (0 for QoS 0)."""
        info = self.client.publish(topic, payload, qos, retain, properties=properties)
        info.wait_for_publish(TIMEOUT)
        assert info.is_published(), f"{self.client_id}: {topic} QoS {qos} not acknowledged"
        return int(getattr(self.reason_codes.get(info.mid, [0])[0], "value", 0))

    def receive(self, n: int, timeout: float = TIMEOUT) -> list[mqtt.MQTTMessage]:
        got = []
        for _ in range(n):
            try:
                got.append(self.messages.get(timeout=timeout))
            except queue.Empty:
                raise AssertionError(f"{self.client_id}: {len(got)} of {n} messages: "
                                     f"{[(m.topic, m.payload) for m in got]}") from None
        return got

    def nothing_more(self, wait: float = 0.5) -> bool:
        try:
            extra = self.messages.get(timeout=wait)
        except queue.Empty:
            return True
        raise AssertionError(f"{self.client_id}: unexpected {extra.topic} {extra.payload!r}")

    def drop(self) -> None:
        """Close the network connection without DISCONNECT, as a device that lost power does."""
        self.client.loop_stop()
        self.client.socket().close()

    def hold(self) -> None:
        """Stop the network thread and leave the connection open: the device neither reads, pings nor
        reconnects, so the connection is the server's to close (as it stops); :meth:`let_go` after."""
        self.client.loop_stop()

    def let_go(self) -> None:
        self.client.socket().close()

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()


def drop_all(*devices: Device) -> None:
    """:meth:`Device.drop` each at once: stopping a network thread waits up to a second for its loop."""
    _each_at_once(Device.drop, devices)


def hold_all(*devices: Device) -> None:
    """:meth:`Device.hold` each at once."""
    _each_at_once(Device.hold, devices)


def _each_at_once(method, devices) -> None:
    threads = [threading.Thread(target=method, args=(device,)) for device in devices]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def raw_connection(port: int, version: int = 5, keep_alive: int = 60):
    """A socket that has sent a CONNECT, a client-side decoder (FerryMQ's own codec, for exact bytes), and
    the CONNACK."""
    from ferrymq.gateways.mqtt.connection import Decoder
    from ferrymq.gateways.mqtt.packets import Connect, encode

    sock = socket.create_connection((LOOPBACK, port), 5)
    sock.sendall(encode(Connect(f"raw-{uuid.uuid4().hex[:8]}", version, keep_alive=keep_alive), version))
    decoder = Decoder("client", version=version)
    events = []
    while not events:
        events += decoder.feed(sock.recv(4096))
    return sock, decoder, events[0]


def publish_burst(port: int, version: int, topic: str, burst: int, first: int = 1) -> list:
    """Send ``burst`` QoS 1 PUBLISHes to ``topic`` in one write; the PUBACKs, as they came."""
    return publish_burst_to(port, version, [(topic, b"m%d" % i) for i in range(burst)], first)


def publish_burst_to(port: int, version: int, messages: list[tuple[str, bytes]], first: int = 1) -> list:
    """Send QoS 1 PUBLISHes of ``messages`` ((topic, payload)) in one write; the PUBACKs, as they came."""
    from ferrymq.gateways.mqtt.packets import Publish, encode

    sock, decoder, _ = raw_connection(port, version)
    try:
        sock.sendall(b"".join(encode(Publish(topic, payload, 1, packet_identifier=first + i), version)
                              for i, (topic, payload) in enumerate(messages)))
        acks = []
        sock.settimeout(10)
        while len(acks) < len(messages):
            data = sock.recv(65536)
            assert data, f"closed after {len(acks)} PUBACKs"
            acks += decoder.feed(data)
        return acks
    finally:
        sock.close()
