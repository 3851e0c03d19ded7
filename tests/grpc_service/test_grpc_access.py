"""TLS and ACL 2.0 on the gRPC port (docs/grpc.md), on a server in ``tls.server.mode=enforcing`` with
authentication and authorization on: gRPC is served over TLS only, and calls signed as the 5.x clients sign
them (``authorization`` over ``x-mq-date-time``) are served while unsigned, wrongly signed or not allowed
ones are answered with status UNAUTHORIZED and the proxy's reason. FerryMQ only: Apache's proxy with TLS
and ACL is another JVM to boot (compat_tests' ApacheProxy), beyond this module's share of the test-time
budget."""

from __future__ import annotations

import hashlib
import hmac
import json
import time
import uuid

import pytest

grpc = pytest.importorskip("grpc")
pytest.importorskip("rocketmq.grpc_protocol")

from ferrymq.remoting import RemotingClient
from ferrymq.remoting.tls import ClientTls
from ferrymq.sdk import Credentials, MQAdmin, reactor_thread
from ferrymq.sdk.access_admin import acl_info
from ferrymq.testing.certs import make_certs
from ferrymq.testing.server import FerryMQServer
from rocketmq.grpc_protocol import definition_pb2 as pb
from rocketmq.grpc_protocol import service_pb2 as service
from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc

from .placements import PLACEMENTS

ROOT = ("rocketmq", "12345678")
ALICE = ("alice", "alice-secret")
AUTH = {"authenticationEnabled": True, "authorizationEnabled": True, "autoCreateTopicEnable": True,
        "initAuthenticationUser": json.dumps({"username": ROOT[0], "password": ROOT[1]}),
        "innerClientAuthenticationCredentials": json.dumps({"accessKey": ROOT[0], "secretKey": ROOT[1]})}


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("grpc-certs"))


@pytest.fixture(scope="module", params=sorted(PLACEMENTS))
def server(request, tmp_path_factory, certs):
    conf = {**AUTH, "grpcEventLoop": request.param, "tls.server.mode": "enforcing", "tls.test.mode.enable": False,
            "tls.server.certPath": certs.server.cert, "tls.server.keyPath": certs.server.key}
    with FerryMQServer(tmp_path_factory.mktemp("grpc-acl"), conf, grpc=True) as running:
        client = RemotingClient(tls=ClientTls(), credentials=Credentials(*ROOT))
        admin = reactor_thread.call(MQAdmin, running.namesrv_addr, client)
        try:
            for call in (lambda: admin.access.create_user(running.broker_addr, *ALICE),
                         lambda: admin.access.create_acl(running.broker_addr, acl_info(
                             "User:alice", ["Topic:GrpcMine"], ["Pub", "Sub"], None, "Allow")),
                         lambda: admin.create_topic("GrpcMine", 4, broker_addr=running.broker_addr),
                         lambda: admin.create_topic("GrpcOther", 4, broker_addr=running.broker_addr)):
                reactor_thread.call(call)
        finally:
            reactor_thread.call(client.close)
        yield running


@pytest.fixture(scope="module")
def stub(server, certs):
    credentials = grpc.ssl_channel_credentials(root_certificates=certs.ca.read_bytes())
    with grpc.secure_channel(server.grpc_endpoint, credentials,
                             options=[("grpc.ssl_target_name_override", "localhost")]) as channel:
        yield service_grpc.MessagingServiceStub(channel)


def test_the_port_serves_tls_only(server):
    with grpc.insecure_channel(server.grpc_endpoint) as channel, pytest.raises(grpc.RpcError) as refused:
        service_grpc.MessagingServiceStub(channel).QueryRoute(
            service.QueryRouteRequest(topic=pb.Resource(name="GrpcMine")), metadata=signed(*ALICE), timeout=5)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE


def signed(user: str, secret: str) -> tuple[tuple[str, str], ...]:
    """The headers the 5.x clients send: the date and time, signed with HMAC-SHA1 in hex."""
    date_time = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    signature = hmac.new(secret.encode(), date_time.encode(), hashlib.sha1).hexdigest()
    return (("x-mq-client-id", "grpc-acl@1"), ("x-mq-date-time", date_time),
            ("authorization", (f"MQv2-HMAC-SHA1 Credential={user}/default/rocketmq, "
                               f"SignedHeaders=x-mq-date-time, Signature={signature}")))


def send(stub, topic: str, metadata) -> pb.Status:
    msg = pb.Message(topic=pb.Resource(name=topic), body=b"hello", system_properties=pb.SystemProperties(
        message_id=uuid.uuid4().hex.upper(), message_type=pb.NORMAL))
    return stub.SendMessage(service.SendMessageRequest(messages=[msg]), metadata=metadata).status


def test_a_signed_call_is_served_and_others_are_refused_with_the_proxys_reason(stub):
    assert send(stub, "GrpcMine", signed(*ALICE)).code == pb.OK
    unsigned = send(stub, "GrpcMine", (("x-mq-client-id", "grpc-acl@1"),))
    assert (unsigned.code, unsigned.message) == (pb.UNAUTHORIZED, "username cannot be null.")
    wrong = send(stub, "GrpcMine", signed(ALICE[0], "guess"))
    assert (wrong.code, wrong.message) == (pb.UNAUTHORIZED, "check signature failed.")
    other = send(stub, "GrpcOther", signed(*ALICE))
    assert other.code == pb.UNAUTHORIZED
    assert other.message.startswith("User:alice has no permission to access Topic:GrpcOther from 127.0.0.1"), other
    route = stub.QueryRoute(service.QueryRouteRequest(topic=pb.Resource(name="GrpcOther")), metadata=signed(*ALICE))
    assert route.status.code == pb.UNAUTHORIZED
    assert send(stub, "GrpcOther", signed(*ROOT)).code == pb.OK  # a super user


def test_telemetry_settings_naming_a_topic_the_user_may_not_publish_to_are_refused(stub):
    def first_answer(topic: str):
        settings = pb.Settings(client_type=pb.PRODUCER, publishing=pb.Publishing(topics=[pb.Resource(name=topic)]))
        stream = stub.Telemetry(iter([service.TelemetryCommand(settings=settings)]), metadata=signed(*ALICE),
                                timeout=10)
        try:
            return next(stream)
        finally:
            stream.cancel()

    assert first_answer("GrpcMine").status.code == pb.OK
    refused = first_answer("GrpcOther")
    assert refused.status.code == pb.UNAUTHORIZED and "Topic:GrpcOther" in refused.status.message, refused
