"""Issue 26, ACL 2.0 (docs/acl.md): Apache 5.5.0 and FerryMQ with authentication and authorization on, the same
settings, and the official Java client signing with ``AclClientRPCHook``: served with good credentials,
refused with the same code and reason with a wrong secret or none."""

from __future__ import annotations

import json

import pytest

from .apache import ApacheBroker, ApacheNamesrv
from .servers import Server

ROOT = ("rocketmq", "12345678")
#: The same keys on both servers; Apache needs its provider classes named, FerryMQ accepts them.
AUTH_CONFIG: dict[str, object] = {
    "authenticationEnabled": "true",
    "authorizationEnabled": "true",
    "authenticationProvider": "org.apache.rocketmq.auth.authentication.provider.DefaultAuthenticationProvider",
    "authenticationMetadataProvider":
        "org.apache.rocketmq.auth.authentication.provider.LocalAuthenticationMetadataProvider",
    "authorizationProvider": "org.apache.rocketmq.auth.authorization.provider.DefaultAuthorizationProvider",
    "authorizationMetadataProvider":
        "org.apache.rocketmq.auth.authorization.provider.LocalAuthorizationMetadataProvider",
    "initAuthenticationUser": json.dumps({"username": ROOT[0], "password": ROOT[1]}),
    "innerClientAuthenticationCredentials": json.dumps({"accessKey": ROOT[0], "secretKey": ROOT[1]}),
}


@pytest.fixture(scope="module")
def acl_servers(java5, tmp_path_factory):
    """Both servers, booted side by side: {"apache": Server, "ferrymq": Server}."""
    from ferrymq.testing import FerryMQServer

    home = tmp_path_factory.mktemp("acl")
    ns = ApacheNamesrv.launch(home / "apache-namesrv")
    broker = ApacheBroker.launch(home / "apache-broker", ns.addr, cluster="AclCluster", name="acl-broker-a",
                                 extra=AUTH_CONFIG)
    try:
        with FerryMQServer(home / "ferrymq", {"brokerClusterName": "AclCluster", "brokerName": "acl-broker-a",
                                              **AUTH_CONFIG}) as ferry:
            ns.wait_ready()
            broker.wait_ready()
            yield {"apache": Server("apache", ns.addr, broker.addr, broker.name, broker.cluster),
                   "ferrymq": Server("ferrymq", ferry.namesrv_addr, ferry.broker_addr, ferry.broker_name,
                                     ferry.cluster)}
    finally:
        broker.stop()
        ns.stop()


KINDS = ["apache", "ferrymq"]


@pytest.mark.parametrize("kind", KINDS)
def test_a_signed_client_sends_and_consumes(acl_servers, java5, kind):
    server = acl_servers[kind]
    topic, creds = f"AclSigned_{kind}", ("-ak", ROOT[0], "-sk", ROOT[1])
    sent = java5("send", "-n", server.namesrv_addr, "-t", topic, "-count", "2", *creds)
    assert [e["status"] for e in sent.of("sent")] == ["SEND_OK", "SEND_OK"], sent.explain()
    got = java5("consume", "-n", server.namesrv_addr, "-t", topic, "-g", f"AclGroup_{kind}", "-count", "2",
                "-from", "first", "-timeout", "40000", *creds)
    assert len(got.of("received")) == 2, got.explain()


def refusal(result) -> str:
    """The broker's answer in the text of the client's innermost exception: ``CODE: 16  DESC: <reason>``."""
    errors = result.of("send_error")
    assert errors and not result.of("sent"), result.explain()
    text = errors[0]["cause"]
    assert "CODE: 16" in text, text
    return text.split("DESC: ", 1)[1].split(" BROKER: ", 1)[0].strip()


@pytest.mark.parametrize("kind", KINDS)
def test_a_wrong_secret_and_no_credentials_are_refused_with_apaches_code_and_reason(acl_servers, java5, kind):
    server = acl_servers[kind]
    wrong = java5("send", "-n", server.namesrv_addr, "-t", f"AclWrong_{kind}", "-ak", ROOT[0], "-sk", "guess",
                  "-timeout", "6000")
    assert refusal(wrong) == "check signature failed."
    unsigned = java5("send", "-n", server.namesrv_addr, "-t", f"AclUnsigned_{kind}", "-timeout", "6000")
    assert refusal(unsigned) == "username cannot be null."
