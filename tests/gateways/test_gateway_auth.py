"""The gateways inside a broker that authenticates (docs/acl.md): their own RocketMQ clients sign with the
broker's ``innerClientAuthenticationCredentials``, so HTTP publishes and receives and MQTT devices exchange
messages while unsigned remoting clients are refused. MQTT devices log in as the broker's users and publish
and subscribe as their ACLs allow, with mosquitto (a password file and an acl_file saying the same) as the
reference."""

from __future__ import annotations

import io
import json
import socket
import time

import httpx
import pytest
from ferrymq.sdk.admin_cli import main as admin_main
from ferrymq.testing import admin
from ferrymq.testing.ports import LOOPBACK
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request
from ferrymq.wire.signature import sign

from .http_client import Gateway, names
from .mqtt.devices import V5, V311, Device, fresh_topic
from .mqtt.mosquitto import Mosquitto

ROOT = ("rocketmq", "12345678")
INNER = {"accessKey": "broker-inner", "secretKey": "inner-secret"}
AUTH = {"authenticationEnabled": True, "authorizationEnabled": True, "autoCreateTopicEnable": True,
        "metricsAuthEnabled": True,
        "initAuthenticationUser": json.dumps({"username": ROOT[0], "password": ROOT[1]}),
        "innerClientAuthenticationCredentials": json.dumps(INNER)}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path_factory.mktemp("gateway-auth"), AUTH, http=True, mqtt=True) as server:
        for command in (("createUser", "-u", ALICE[0], "-p", ALICE[1]),
                        ("createAcl", "-s", "User:alice", "-r", "Topic:AuthOk", "-a", "Pub,Sub", "-d", "Allow"),
                        ("createUser", "-u", BOB[0], "-p", BOB[1], "-t", "Super")):
            mqadmin(server, *command)
        yield server


def mqadmin(server, command: str, *args: str) -> None:
    """``ferrymq admin command args`` against ``server``, as its initial super user."""
    out, err = io.StringIO(), io.StringIO()
    assert admin_main([command, "-n", server.namesrv_addr, "-b", server.broker_addr, "--access-key", ROOT[0],
                       "--secret-key", ROOT[1], *args], out, err) == 0, err.getvalue()


#: alice may publish and subscribe on AuthOk; bob on anything (a super user; mosquitto: readwrite #)
ALICE = ("alice", "alice-secret")
BOB = ("bob", "bob-secret")
MOSQUITTO_ACL = "user alice\ntopic readwrite AuthOk/#\n\nuser bob\ntopic readwrite #\n"


@pytest.fixture(scope="module")
def mqtt_brokers(server, tmp_path_factory):
    """(name, MQTT port) of mosquitto with the same users and rules, then FerryMQ's gateway."""
    mosquitto = Mosquitto(tmp_path_factory.mktemp("mosquitto-auth"), users=dict([ALICE, BOB]), acl=MOSQUITTO_ACL)
    yield [("mosquitto", mosquitto.port), ("ferrymq", server.mqtt_port)]
    mosquitto.stop()


def _string(value: str | bytes) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return len(data).to_bytes(2, "big") + data


def connack(port: int, version: int, login: tuple[str, str] | None, client_id: str = "") -> int:
    """The return code (3.1.1) or reason code (5) of the CONNACK answering a CONNECT with ``login``,
    written on a plain socket."""
    flags = 0x02 | (0xC0 if login is not None else 0)
    variable = _string("MQTT") + bytes([version, flags]) + (60).to_bytes(2, "big") + (b"\0" if version == V5 else b"")
    payload = _string(client_id or f"login-{time.monotonic_ns()}")
    if login is not None:
        payload += _string(login[0]) + _string(login[1])
    body = variable + payload
    assert len(body) < 128
    with socket.create_connection((LOOPBACK, port), timeout=10) as sock:
        sock.sendall(bytes([0x10, len(body)]) + body)
        answer = b""
        while len(answer) < 4:
            chunk = sock.recv(4 - len(answer))
            assert chunk, f"closed without a CONNACK after {answer!r}"
            answer += chunk
    assert answer[0] == 0x20, answer
    return answer[3]


def test_the_broker_refuses_an_unsigned_remoting_client(server):
    answer = admin.call(server.broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO))
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "username cannot be null.")


def test_the_http_gateway_publishes_and_receives_as_the_brokers_inner_user(server):
    topic, group = names("HttpAuth", "HttpAuthGroup")
    gw = Gateway(server.http_url, auth=BOB)
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
    subscriber, publisher = Device(server.mqtt_port, V5, login=BOB), Device(server.mqtt_port, V5, login=BOB)
    try:
        subscriber.subscribe(f"{topic}/#", qos=1)
        publisher.publish(f"{topic}/t", b"signed inside", 1)
        assert [(m.topic, m.payload) for m in subscriber.receive(1)] == [(f"{topic}/t", b"signed inside")]
    finally:
        subscriber.close()
        publisher.close()


@pytest.mark.parametrize("version", [V311, V5])
def test_a_device_logs_in_with_a_users_name_and_password_else_is_not_authorized(mqtt_brokers, version):
    not_authorized = 0x87 if version == V5 else 5
    for name, port in mqtt_brokers:
        assert connack(port, version, None) == not_authorized, name
        assert connack(port, version, (ALICE[0], "guess")) == not_authorized, name
        assert connack(port, version, ("nobody", ALICE[1])) == not_authorized, name
        assert connack(port, version, ALICE) == 0, name


def test_a_device_may_sign_its_client_id_as_rocketmq_mqtt_devices_do(server):
    # FerryMQ only: mosquitto's passwords are compared as given
    password = sign(b"signed-device", ALICE[1])
    assert connack(server.mqtt_port, V5, (ALICE[0], password), client_id="signed-device") == 0
    assert connack(server.mqtt_port, V5, (ALICE[0], password), client_id="another-device") == 0x87


@pytest.mark.parametrize("version", [V311, V5])
def test_a_user_publishes_and_receives_only_where_its_acl_allows(mqtt_brokers, version):
    for name, port in mqtt_brokers:
        alice, bob = Device(port, version, login=ALICE), Device(port, V5, login=BOB)
        try:
            granted = alice.subscribe("AuthOk/#", "AuthDenied/#", qos=1)
            if name == "ferrymq":  # mosquitto grants any SUBSCRIBE and checks each delivery instead
                assert [code.value for code in granted] == [1, 0x87 if version == V5 else 0x80]
            denied = alice.publish("AuthDenied/x", b"from alice", 1)
            # MQTT 5 says Not authorized; 3.1.1 has no negative PUBACK, so the message is acknowledged and dropped
            assert denied == (0x87 if version == V5 else 0), name
            assert alice.publish("AuthOk/x", b"allowed", 1) == 0, name
            assert bob.publish("AuthDenied/y", b"from bob", 1) == 0, name
            assert [(m.topic, m.payload) for m in alice.receive(1)] == [("AuthOk/x", b"allowed")], name
            assert alice.nothing_more(), name
        finally:
            alice.close()
            bob.close()


def test_http_clients_authenticate_with_basic_credentials_and_are_refused_what_their_acl_does_not_allow(server):
    # FerryMQ only: Apache has no HTTP gateway, and mosquitto speaks no HTTP
    anonymous, wrong = Gateway(server.http_url), Gateway(server.http_url, auth=(ALICE[0], "guess"))
    alice = Gateway(server.http_url, auth=ALICE)
    try:
        for client, detail in ((anonymous, "no Authorization header"), (wrong, "the password is wrong")):
            refused = client.request("POST", "/v1/topics/AuthOk/messages", content=b"x")
            assert refused.status_code == 401 and detail in refused.json()["detail"], refused.text
            assert refused.headers["www-authenticate"].startswith("Basic "), refused.headers
            assert client.request("GET", "/v1/topics").status_code == 401
        assert alice.publish("AuthOk", "allowed")["status"] == "SEND_OK"
        denied = alice.request("POST", "/v1/topics/AuthDenied/messages", content=b"x")
        assert denied.status_code == 403, denied.text
        assert denied.json()["detail"] == "User:alice may not Pub on Topic:AuthDenied"
        not_hers = alice.request("GET", "/v1/topics/AuthDenied/messages", params={"group": "g", "wait": 0})
        assert not_hers.status_code == 403 and "may not Sub" in not_hers.json()["detail"], not_hers.text
    finally:
        for client in (anonymous, wrong, alice):
            client.close()


def test_the_web_console_shows_a_user_what_its_acl_allows(server):
    # FerryMQ only: Apache's dashboard is a project of its own, with logins of its own
    dave_login = ("dave", "dave-secret")
    topic, other, group = names("ConsoleSeen", "ConsoleHidden", "ConsoleGroup")
    mqadmin(server, "createUser", "-u", dave_login[0], "-p", dave_login[1])
    mqadmin(server, "createAcl", "-s", "User:dave", "-r", f"Topic:{topic}", "-a", "Get", "-d", "Allow")
    console = f"{server.http_url}/console"
    with httpx.Client(base_url=console, timeout=20, auth=dave_login) as dave, \
            httpx.Client(base_url=console, timeout=20, auth=BOB) as bob:
        for name in (topic, other):
            created = bob.post(f"{server.http_url}/v1/topics", json={"topic": name, "queueNums": 2})
            assert created.status_code == 201, created.text
        anonymous = httpx.get(f"{console}/", timeout=20)
        assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Basic ")
        assert httpx.get(f"{console}/", auth=(dave_login[0], "guess"), timeout=20).status_code == 401
        assert dave.get("/").status_code == 200  # the cluster: any user (Apache checks no ACL for its reads)
        seen = dave.get(f"/topics/{topic}")
        assert seen.status_code == 200 and f"Topic {topic}" in seen.text, seen.text
        # a lookup on its topic is let through to the store: no message has this key
        assert dave.get("/messages", params={"topic": topic, "key": "none"}).status_code == 404
        refusals = {  # path, query: (what is refused, the request's part that named it)
            ("/topics", None): ("List on Topic:*", None),
            (f"/topics/{other}", None): (f"Get on Topic:{other}", "path.topic"),
            ("/groups", None): ("List on Group:*", None),
            (f"/groups/{group}", None): (f"Get on Group:{group}", "path.group"),
            ("/messages", ("topic", other)): (f"Get on Topic:{other}", "query.topic"),
            ("/transactions", None): ("List on Topic:*", None),
        }
        for (path, query), (refused, field) in refusals.items():
            answer = dave.get(path, params=dict([query, ("key", "k")]) if query else None)
            assert answer.status_code == 403, (path, answer.text)
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.json()["detail"] == f"User:dave may not {refused}"
            assert answer.json().get("field") == field
        for (path, query) in refusals:  # a super user sees everything
            answer = bob.get(path, params=dict([query, ("key", "k")]) if query else None)
            assert answer.status_code in (200, 404), (path, answer.text)  # 404: no such group or message


def test_the_admin_routes_need_create_list_and_get_on_the_topic_or_group(server):
    # FerryMQ only: Apache has no HTTP gateway; the actions are those of the broker's admin request codes
    carol_login = ("carol", "carol-secret")
    mqadmin(server, "createUser", "-u", carol_login[0], "-p", carol_login[1])
    carol, bob = Gateway(server.http_url, auth=carol_login), Gateway(server.http_url, auth=BOB)
    topic, group = names("AuthAdmin", "AuthAdminGroup")
    calls = {  # (method, path, body): (what is refused, the request's part that named it, status when allowed)
        ("GET", "/v1/topics", None): ("List on Topic:*", None, 200),
        ("POST", "/v1/topics", topic): (f"Create on Topic:{topic}", "/topic", 201),
        ("GET", "/v1/groups", None): ("List on Group:*", None, 200),
        ("GET", f"/v1/groups/{group}", None): (f"Get on Group:{group}", "path.group", 404),
    }

    def call(client: Gateway, method: str, path: str, new_topic: str | None) -> httpx.Response:
        body = {"json": {"topic": new_topic, "queueNums": 2}} if new_topic else {}
        return client.request(method, path, **body)

    try:
        for (method, path, new_topic), (refused, field, _) in calls.items():
            answer = call(carol, method, path, new_topic)
            assert answer.status_code == 403, answer.text
            assert answer.headers["content-type"] == "application/problem+json"
            assert answer.json()["detail"] == f"User:carol may not {refused}"
            assert answer.json().get("field") == field
        created = call(bob, "POST", "/v1/topics", f"{topic}Bob")
        assert created.status_code == 201, created.text  # a super user may do anything
        mqadmin(server, "createAcl", "-s", "User:carol", "-r", f"Topic:*,Group:*,Topic:{topic},Group:{group}",
                "-a", "List,Create,Get", "-d", "Allow")
        for (method, path, new_topic), (_, _, allowed) in calls.items():
            answer = call(carol, method, path, new_topic)
            assert answer.status_code == allowed, (path, answer.text)
        assert topic in carol.request("GET", "/v1/topics").json()["topics"]
    finally:
        carol.close()
        bob.close()


def test_metrics_need_a_users_credentials_with_metrics_auth_enabled(server):
    # open by default (tests/gateways/test_http_metrics.py), as Apache's rocketmq-exporter serves them
    url = f"{server.http_url}/metrics"
    anonymous = httpx.get(url, timeout=20)
    assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Basic "), anonymous.text
    assert httpx.get(url, auth=(ALICE[0], "guess"), timeout=20).status_code == 401
    scraped = httpx.get(url, auth=ALICE, timeout=20)  # any user: reading the figures needs no ACL entry
    assert scraped.status_code == 200 and "rocketmq_" in scraped.text, scraped.text[:300]
