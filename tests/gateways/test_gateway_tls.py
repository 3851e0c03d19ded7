"""TLS on the gateways' listeners: HTTPS with ``httpTlsEnable`` (httpx) and MQTT over TLS on
``mqttTlsListenPort`` (paho), with mosquitto's TLS listener as the reference for MQTT's behaviour."""

from __future__ import annotations

import socket
import ssl

import httpx
import pytest

from ferrymq.testing.certs import make_certs
from ferrymq.testing.ports import LOOPBACK, free_port

from .mqtt.devices import V5, Device, fresh_topic
from .mqtt.mosquitto import Mosquitto

#: an MQTT 3.1.1 CONNECT of client "a", sent in the clear
PLAIN_CONNECT = b"\x10\x0d\x00\x04MQTT\x04\x02\x00\x3c\x00\x01a"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture(scope="module")
def ferrymq_tls(tmp_path_factory, certs):
    """Both gateways over TLS, on a server in enforcing mode: their own RocketMQ clients connect with TLS."""
    from ferrymq.testing.server import FerryMQServer

    conf = {"httpTlsEnable": True, "mqttTlsListenPort": free_port(), "autoCreateTopicEnable": True,
            "tls.server.mode": "enforcing", "tls.server.certPath": certs.server.cert,
            "tls.server.keyPath": certs.server.key}
    with FerryMQServer(tmp_path_factory.mktemp("gateway-tls"), conf, http=True, mqtt=True) as server:
        yield server


@pytest.fixture(scope="module")
def mosquitto_tls(tmp_path_factory, certs):
    broker = Mosquitto(tmp_path_factory.mktemp("mosquitto-tls"), tls=certs)
    yield broker
    broker.stop()


@pytest.fixture(scope="module")
def tls_brokers(mosquitto_tls, ferrymq_tls):
    """(name, MQTT-over-TLS port) of the reference broker, then FerryMQ's MQTT gateway."""
    return [("mosquitto", mosquitto_tls.port), ("ferrymq", int(ferrymq_tls.conf["mqttTlsListenPort"]))]


def test_the_http_gateway_serves_https_and_refuses_plain_http(ferrymq_tls, certs):
    port = ferrymq_tls.http_port
    https = httpx.Client(base_url=f"https://localhost:{port}", timeout=10,
                         verify=ssl.create_default_context(cafile=str(certs.ca)))
    with https:
        assert https.get("/openapi.json").json()["openapi"]
        sent = https.post(f"/v1/topics/{fresh_topic()}/messages", content=b"over https")
    assert sent.status_code == 200 and sent.json()["status"] == "SEND_OK", sent.text
    with pytest.raises(httpx.TransportError):
        httpx.get(f"http://{LOOPBACK}:{port}/openapi.json", timeout=10)


def test_mqtt_over_tls_round_trips_and_a_plain_connect_is_closed(tls_brokers, certs):
    for name, port in tls_brokers:
        topic = fresh_topic()
        subscriber, publisher = Device(port, V5, tls_ca=str(certs.ca)), Device(port, V5, tls_ca=str(certs.ca))
        try:
            subscriber.subscribe(f"{topic}/#", qos=1)
            publisher.publish(f"{topic}/t", b"over tls", 1)
            assert [(m.topic, m.payload) for m in subscriber.receive(1)] == [(f"{topic}/t", b"over tls")], name
        finally:
            subscriber.close()
            publisher.close()
        assert not _plain_connect_answer(port).startswith(b"\x20"), f"{name} sent a CONNACK on its TLS port"


def _plain_connect_answer(port: int) -> bytes:
    """What a plain CONNECT to ``port`` gets before the server closes the connection (a TLS alert at most);
    a server that keeps it open fails with a timeout."""
    received = b""
    with socket.create_connection((LOOPBACK, port), timeout=5) as plain:
        plain.sendall(PLAIN_CONNECT)
        try:
            while chunk := plain.recv(64):
                received += chunk
        except ConnectionResetError:
            pass
    return received
