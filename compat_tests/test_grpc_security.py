"""Issue 26, the gRPC port under ACL 2.0 and TLS: the official gRPC client (rocketmq-client-java) signing its
calls with a ``StaticSessionCredentialsProvider`` against Apache 5.5.0's proxy in local mode and FerryMQ's
grpcListenPort, both with authenticationEnabled and authorizationEnabled. A normal user sends and receives
on the topic and group its ACL allows; a topic it does not allow, a wrong secret and no credentials are
refused with the proxy's status (UNAUTHORIZED, 40100) and reason. A client left on its default (TLS, the
builder's ``enableSsl``) is served on the same port as the plain ones, in the default
``tls.server.mode=permissive``.

The proxy's own settings (rmq-proxy.json) turn its checks on; its broker in the same JVM keeps the users
and ACLs. One client JVM per server runs every scenario at once, and the tests check what each saw.
"""

from __future__ import annotations

import contextlib
import io
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest
from ferrymq.sdk import BlockingMQAdmin, Credentials
from ferrymq.sdk.admin_cli import main as admin_main

from .harness import ScenarioResult
from .test_acl import AUTH_CONFIG, ROOT

pytest.importorskip("grpc", reason="the grpc extra is not installed")

ALICE = ("alice", "alice-secret")
SIGNED = ("-ak", ALICE[0], "-sk", ALICE[1])
TOPIC, DENIED, GROUP = "GrpcAclOk", "GrpcAclDenied", "GrpcAclGroup"
#: the proxy's settings: its checks on, reading users and ACLs from its broker
PROXY_AUTH = {
    "authenticationEnabled": True,
    "authorizationEnabled": True,
    "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
    "authenticationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthenticationMetadataProvider",
    "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
    "authorizationMetadataProvider": "org.apache.rocketmq.proxy.auth.ProxyAuthorizationMetadataProvider",
}
#: each scenario of the client's run (its index in the run is its position here): name -> arguments
SCENARIOS = {
    "send": ("send", "-t", TOPIC, *SIGNED),
    "receive": ("simple", "-t", TOPIC, "-g", GROUP, "-count", "2", "-timeout", "40000", *SIGNED),
    "denied topic": ("send", "-t", DENIED, *SIGNED),
    "wrong secret": ("send", "-t", TOPIC, "-ak", ALICE[0], "-sk", "guess"),
    "no credentials": ("send", "-t", TOPIC),
    "tls": ("send", "-t", TOPIC, *SIGNED, "-ssl", "default"),
}
BODIES = ["acl-0", "acl-1"]


@dataclass
class Secured:
    kind: str
    namesrv_addr: str
    broker_addr: str
    grpc_endpoint: str


def _prepare(server: Secured) -> None:
    """The topics, the group, and alice with Pub and Sub on TOPIC and GROUP, made as the initial super user."""
    from ferrymq.wire.bodies import SubscriptionGroupConfig

    with BlockingMQAdmin(server.namesrv_addr, credentials=Credentials(*ROOT)) as admin:
        for topic in (TOPIC, DENIED):
            admin.create_topic(topic, 2)
        admin.api.create_subscription_group(server.broker_addr, SubscriptionGroupConfig(group_name=GROUP))
        for topic in (TOPIC, DENIED):
            admin.wait_for_route(topic)
    for command in (("createUser", "-u", ALICE[0], "-p", ALICE[1]),
                    ("createAcl", "-s", f"User:{ALICE[0]}", "-r", f"Topic:{TOPIC},Group:{GROUP}", "-a", "Pub,Sub",
                     "-d", "Allow")):
        out, err = io.StringIO(), io.StringIO()
        assert admin_main([command[0], "-n", server.namesrv_addr, "-b", server.broker_addr, "--access-key", ROOT[0],
                           "--secret-key", ROOT[1], *command[1:]], out, err) == 0, err.getvalue()


@pytest.fixture(scope="module")
def secured(compat_home):
    """Apache's name server and proxy (local mode) with ACL 2.0, booted side by side with ``ferrymq standalone``
    with the same keys and grpcListenPort: {"apache": Secured, "ferrymq": Secured}."""
    from ferrymq.testing import FerryMQServer

    from .apache import ApacheNamesrv, ApacheProxy
    from .conftest import _need

    _need("java", "mvn")
    home = compat_home / "grpc-security"
    ns = ApacheNamesrv.launch(home / "apache-namesrv")
    proxy = ApacheProxy.launch(home / "apache-proxy", ns.addr, extra=AUTH_CONFIG, proxy_extra=PROXY_AUTH)
    try:
        # registering again soon when the first registration times out while the JVMs start
        with FerryMQServer(home / "ferrymq", {**AUTH_CONFIG, "registerNameServerPeriod": 2000}, grpc=True) as ferry:
            ns.wait_ready()
            proxy.wait_ready()
            yield {"apache": Secured("apache", ns.addr, proxy.broker.addr, proxy.grpc_endpoint),
                   "ferrymq": Secured("ferrymq", ferry.namesrv_addr, ferry.broker_addr, ferry.grpc_endpoint)}
    finally:
        proxy.stop()
        ns.stop()


@pytest.fixture(scope="module")
def runs(secured, tmp_path_factory) -> dict[str, dict[str, ScenarioResult]]:
    """Every scenario of :data:`SCENARIOS` in one client JVM per server, both servers at once:
    {kind: {scenario name: its lines}}."""
    from .test_grpc import grpc_java_runner

    grpc_java = grpc_java_runner(tmp_path_factory.mktemp("grpc-security-java"))
    spec = tmp_path_factory.mktemp("grpc-security-spec") / "messages.tsv"
    spec.write_text("".join(f"body={body}\n" for body in BODIES))

    def run(server: Secured) -> dict[str, ScenarioResult]:
        _prepare(server)
        argv: list[str] = []
        for scenario, *args in SCENARIOS.values():
            extra = ("-spec", str(spec)) if scenario == "send" else ()
            argv += [*(("--",) if argv else ()), scenario, "-endpoint", server.grpc_endpoint, *args, *extra]
        result = grpc_java(*argv, timeout=90)
        return {name: ScenarioResult(result.argv, result.returncode,
                                     "\n".join(json.dumps(e) for e in result.events if e.get("scenario") == index),
                                     result.stderr)
                for index, name in enumerate(SCENARIOS)}

    with ThreadPoolExecutor(len(secured)) as pool:
        futures = {kind: pool.submit(run, server) for kind, server in secured.items()}
        return {kind: future.result() for kind, future in futures.items()}


def refusal(result: ScenarioResult) -> str:
    """The proxy's reason in the client's error: ``[request-id=..., response-code=40100] <reason>``."""
    errors = result.of("error") + result.of("send_error")
    assert errors and not result.of("sent"), result.explain()
    text = errors[0]["error"]
    assert "response-code=40100]" in text, result.explain()  # UNAUTHORIZED
    return text.split("response-code=40100]", 1)[1].strip()


def test_a_user_sends_and_receives_on_the_topic_and_group_its_acl_allows(runs):
    for kind, result in runs.items():
        sent, received = result["send"], result["receive"]
        assert len(sent.of("sent")) == len(BODIES), (kind, sent.explain())
        # receiving is at least once (a message whose ack the proxy has not taken before its invisible time
        # ends comes again, as Apache's proxy did on a run here): every body, each at least once
        assert sorted({e["body"] for e in received.of("received")}) == BODIES, (kind, received.explain())


@pytest.mark.parametrize("scenario", ["denied topic", "wrong secret", "no credentials"])
def test_refused_with_the_proxys_status_and_reason(runs, scenario):
    reasons = {kind: refusal(result[scenario]) for kind, result in runs.items()}
    assert reasons["ferrymq"] == reasons["apache"], reasons


@pytest.mark.parametrize("kind", ["apache", "ferrymq"])
def test_the_default_mode_serves_a_client_on_its_default_tls_and_a_plain_one_on_the_same_port(runs, kind):
    tls, plain = runs[kind]["tls"], runs[kind]["send"]
    assert len(tls.of("sent")) == len(BODIES), tls.explain()
    assert len(plain.of("sent")) == len(BODIES), plain.explain()


#: bob may send to PROXIED_TOPIC from the clients of 10.20.30.0/24 alone (an ACL's sourceIps)
BOB = ("bob", "bob-secret")
PROXIED_TOPIC = "GrpcAclProxied"
#: where the client a PROXY protocol header names is, against bob's ACL
PROXIED_CLIENTS = {"inside": ("10.20.30.40", 4567), "outside": ("10.99.0.1", 4567), "no header": None}


def _send_as_bob(server: Secured, source: tuple[str, int] | None):
    """A message from bob to PROXIED_TOPIC, signed as Apache's Python SDK signs, through a relay writing a v2
    PROXY protocol header naming ``source`` (straight to the port when None): the send's status."""
    import uuid

    import grpc
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as service
    from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc
    from rocketmq.v5.client import ClientConfiguration
    from rocketmq.v5.client import Credentials as SdkCredentials
    from rocketmq.v5.util.signature import Signature

    from .proxy_relay import header, relay

    config = ClientConfiguration(server.grpc_endpoint, SdkCredentials(*BOB))
    message = pb.Message(topic=pb.Resource(name=PROXIED_TOPIC), body=b"proxied", system_properties=pb.SystemProperties(
        message_id=uuid.uuid4().hex.upper(), message_type=pb.NORMAL))
    with contextlib.ExitStack() as stack:
        endpoint = server.grpc_endpoint if source is None else stack.enter_context(
            relay(server.grpc_endpoint, header(2, source)))
        channel = stack.enter_context(grpc.insecure_channel(endpoint))
        answer = service_grpc.MessagingServiceStub(channel).SendMessage(
            service.SendMessageRequest(messages=[message]),
            metadata=Signature.metadata(config, f"compat-grpc-bob-{uuid.uuid4().hex}"), timeout=15)
    return pb.Code.Name(answer.status.code), answer.status.message


def test_an_acls_source_ips_match_the_client_a_proxy_protocol_header_names(secured):
    """Behind a load balancer the access checks see the client its PROXY protocol header names: bob's ACL
    lets his sends in from 10.20.30.0/24 only, so a header naming 10.20.30.40 passes, one naming 10.99.0.1
    and a connection without a header (from 127.0.0.1) are refused with the proxy's reason."""
    answers = {}
    for kind, server in secured.items():
        with BlockingMQAdmin(server.namesrv_addr, credentials=Credentials(*ROOT)) as admin:
            admin.create_topic(PROXIED_TOPIC, 2)
            admin.wait_for_route(PROXIED_TOPIC)
        for command in (("createUser", "-u", BOB[0], "-p", BOB[1]),
                        ("createAcl", "-s", f"User:{BOB[0]}", "-r", f"Topic:{PROXIED_TOPIC}", "-a", "Pub",
                         "-i", "10.20.30.0/24", "-d", "Allow")):
            out, err = io.StringIO(), io.StringIO()
            assert admin_main([command[0], "-n", server.namesrv_addr, "-b", server.broker_addr, "--access-key",
                               ROOT[0], "--secret-key", ROOT[1], *command[1:]], out, err) == 0, err.getvalue()
        answers[kind] = {case: _send_as_bob(server, source) for case, source in PROXIED_CLIENTS.items()}
    for kind, got in answers.items():
        assert {case: code for case, (code, _) in got.items()} == {
            "inside": "OK", "outside": "UNAUTHORIZED", "no header": "UNAUTHORIZED"}, (kind, got)
    assert answers["ferrymq"]["outside"][1] == answers["apache"]["outside"][1], answers
