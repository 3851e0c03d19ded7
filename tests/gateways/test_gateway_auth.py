"""The gateways inside a broker that authenticates (docs/acl.md): their own RocketMQ clients sign with the
broker's ``innerClientAuthenticationCredentials``, so HTTP publishes and receives and MQTT devices exchange
messages while unsigned remoting clients are refused."""

from __future__ import annotations

import json

import pytest

from ferrymq.testing import admin
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request

from .http_client import Gateway, names
from .mqtt.devices import V5, Device, fresh_topic

INNER = {"accessKey": "broker-inner", "secretKey": "inner-secret"}
AUTH = {"authenticationEnabled": True, "authorizationEnabled": True, "autoCreateTopicEnable": True,
        "initAuthenticationUser": json.dumps({"username": "rocketmq", "password": "12345678"}),
        "innerClientAuthenticationCredentials": json.dumps(INNER)}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path_factory.mktemp("gateway-auth"), AUTH, http=True, mqtt=True) as server:
        yield server


def test_the_broker_refuses_an_unsigned_remoting_client(server):
    answer = admin.call(server.broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "username cannot be null.")


def test_the_http_gateway_publishes_and_receives_as_the_brokers_inner_user(server):
    topic, group = names("HttpAuth", "HttpAuthGroup")
    gw = Gateway(server.http_url)
    try:
        assert gw.publish(topic, "creates the topic")["status"] == "SEND_OK"
        gw.receive(topic, group, wait=0)  # a new group starts at the end of the topic
        assert gw.publish(topic, "signed by the gateway")["status"] == "SEND_OK"
        got = gw.receive_all(topic, group, 1)
        assert [m["body"] for m in got] == ["signed by the gateway"]
    finally:
        gw.close()


def test_mqtt_devices_exchange_messages_through_an_authenticating_broker(server):
    topic = fresh_topic()
    subscriber, publisher = Device(server.mqtt_port, V5), Device(server.mqtt_port, V5)
    try:
        subscriber.subscribe(f"{topic}/#", qos=1)
        publisher.publish(f"{topic}/t", b"signed inside", 1)
        assert [(m.topic, m.payload) for m in subscriber.receive(1)] == [(f"{topic}/t", b"signed inside")]
    finally:
        subscriber.close()
        publisher.close()
