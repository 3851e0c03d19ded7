"""TLS on the remoting port (issue 26): Apache 5.5.0 and FerryMQ with ``tls.server.mode=enforcing`` and the
certificate and key of a ``tls.config.file``, driven by the official Java 5.5.0 client and mqadmin with
``-Dtls.enable=true``; a plain connection is closed by both; the default mode (permissive) serves TLS and
plain clients on one port on both. In enforcing mode the gRPC port takes TLS clients only too: the Java 5.x
gRPC client with ``enableSsl`` sends through Apache's proxy and FerryMQ's grpcListenPort, without TLS it is
refused. Mutual TLS (``tls.server.need.client.auth=require``) on both name servers and brokers: the Java
client presenting a certificate of the trusted CA (``tls.client.certPath``/``keyPath``) sends and consumes,
a client presenting none is refused.

Apache reads the tls.* keys as JVM system properties only; FerryMQ reads the same names from its config file.
"""

from __future__ import annotations

import ssl
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from ferrymq.testing import admin
from ferrymq.testing.certs import CertSet, Pem, make_certs
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request

from .apache import ApacheBroker, ApacheNamesrv, ApacheProxy, write_conf
from .harness import ScenarioResult
from .socket_client import Connection

#: what the clients need to speak TLS (Apache's client side; test mode: the server certificate is not checked)
TLS_CLIENT = {"tls.enable": "true"}


@dataclass
class Enforcing:
    kind: str
    namesrv_addr: str
    broker_addr: str
    broker_name: str
    grpc_endpoint: str = ""


def presenting(pem: Pem) -> ssl.SSLContext:
    """A TLS client context presenting ``pem`` (the server's certificate not checked)."""
    context = ssl._create_unverified_context()
    context.load_cert_chain(pem.cert, pem.key)
    return context


@pytest.fixture(scope="module")
def certs(tmp_path_factory) -> CertSet:
    return make_certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def tls_file(certs):
    """A ``tls.config.file`` with a CA-signed server certificate (test mode off), for both servers."""
    return write_conf(certs.ca.parent / "tls.properties", {
        "tls.test.mode.enable": "false",
        "tls.server.certPath": certs.server.cert,
        "tls.server.keyPath": certs.server.key,
    })


@pytest.fixture(scope="module")
def both_enforcing(certs, tls_file, compat_home):
    """Apache's name server and proxy (local mode: its broker in the same JVM) and FerryMQ's name server,
    broker and gRPC port taking TLS clients only, booted side by side; each broker registers over TLS
    (tls.enable's default follows enforcing mode on both). The proxy's gRPC port reads the mode from the
    same system property and its certificate from its own keys."""
    from ferrymq.testing import FerryMQServer

    settings = {"tls.server.mode": "enforcing", "tls.config.file": str(tls_file)}
    home = compat_home / "tls"
    ns = ApacheNamesrv.launch(home / "apache-namesrv", system_properties=settings)
    proxy = ferry = None
    try:
        proxy = ApacheProxy.launch(home / "apache-proxy", ns.addr, cluster="TlsCluster", name="tls-broker-a",
                                   system_properties=settings, namesrv_tls=True,
                                   proxy_extra={"tlsTestModeEnable": False, "tlsCertPath": certs.server.cert,
                                                "tlsKeyPath": certs.server.key})
        # registering again soon when the first registration times out while the JVMs start
        ferry = FerryMQServer(home / "ferrymq", {"brokerClusterName": "TlsCluster", "brokerName": "tls-broker-a",
                                                 "registerNameServerPeriod": 2000, **settings}, grpc=True).start()
        ns.wait_ready()
        proxy.wait_ready()
        yield {"apache": Enforcing("apache", ns.addr, proxy.broker.addr, proxy.broker.name, proxy.grpc_endpoint),
               "ferrymq": Enforcing("ferrymq", ferry.namesrv_addr, ferry.broker_addr, ferry.broker_name,
                                    ferry.grpc_endpoint)}
    finally:
        if ferry is not None:
            ferry.stop()
        if proxy is not None:
            proxy.stop()
        ns.stop()


@pytest.fixture(params=["apache", "ferrymq"])
def enforcing(request, both_enforcing) -> Enforcing:
    return both_enforcing[request.param]


def _route_code(addr: str, tls: bool | ssl.SSLContext) -> int:
    """The answer's code to GET_ROUTEINFO_BY_TOPIC (a broker answers it as a code it does not serve)."""
    with Connection(addr, 5.0, tls=tls) as conn:
        return conn.call(request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TBW102"})).code


def test_a_plain_connection_is_closed(enforcing):
    for addr in (enforcing.namesrv_addr, enforcing.broker_addr):
        with pytest.raises(ConnectionError, match="closed the connection"):
            _route_code(addr, tls=False)
        assert _route_code(addr, tls=True) in (ResponseCode.SUCCESS, ResponseCode.REQUEST_CODE_NOT_SUPPORTED)


def test_the_java_client_sends_and_consumes_over_tls(enforcing, java5):
    topic = f"Tls{uuid.uuid4().hex[:8]}"
    ns = enforcing.namesrv_addr
    # a first TLS handshake on a busy machine (JDK TLS set-up on both ends) can pass the default 3 s
    java5("send", "-n", ns, "-t", topic, "-count", "2", "-body", "tls", "-timeout", "15000",
          system_properties=TLS_CLIENT).check()
    received = java5("consume", "-n", ns, "-t", topic, "-g", f"g{topic}", "-count", "2", "-timeout", "30000",
                     system_properties=TLS_CLIENT).check().of("received")
    assert sorted(e["body"] for e in received) == ["tls #0", "tls #1"]


def test_mqadmin_lists_the_cluster_over_tls(enforcing, mqadmin5):
    out = mqadmin5(enforcing.namesrv_addr, "clusterList", system_properties=TLS_CLIENT)
    assert "TlsCluster" in out and enforcing.broker_name in out


def _create_topic(server: Enforcing, topic: str) -> None:
    """``topic`` on the server's broker, over TLS, once its name server routes it."""
    admin.create_topic(server.broker_addr, topic, 2, tls=True)
    deadline = time.monotonic() + 10
    while admin.route(server.namesrv_addr, topic, tls=True) is None:
        assert time.monotonic() < deadline, f"{server.kind}: no route for {topic} after 10 s"
        time.sleep(0.05)


def test_the_grpc_port_serves_the_grpc_client_over_tls_and_refuses_it_plain(both_enforcing, tmp_path_factory):
    """rocketmq-client-java with ``enableSsl(true)`` sends; without it, it is refused before its first call
    is answered. One client JVM per server runs both at once, both servers at the same time."""
    from .test_grpc import grpc_java_runner

    grpc_java = grpc_java_runner(tmp_path_factory.mktemp("tls-grpc-java"))
    topic = f"TlsGrpc{uuid.uuid4().hex[:8]}"
    spec = tmp_path_factory.mktemp("tls-grpc-spec") / "messages.tsv"
    spec.write_text("body=grpc over tls\n")

    def run(server: Enforcing) -> ScenarioResult:
        _create_topic(server, topic)
        send = ("send", "-endpoint", server.grpc_endpoint, "-t", topic, "-spec", str(spec))
        return grpc_java(*send, "-ssl", "true", "--", *send, timeout=60)

    with ThreadPoolExecutor(len(both_enforcing)) as pool:
        runs = dict(zip(both_enforcing, pool.map(run, both_enforcing.values())))
    refusals = {}
    for kind, result in runs.items():
        tls, plain = ([e for e in result.events if e.get("scenario") == i] for i in (0, 1))
        assert [e["event"] for e in tls if e["event"] in ("sent", "send_error", "error")] == ["sent"], \
            (kind, result.explain())
        assert [e["event"] for e in plain] == ["error"], (kind, result.explain())
        refusals[kind] = plain[0]["error"]
    # the client's first call fails: "StatusRuntimeException: UNAVAILABLE: Network closed for unknown reason"
    assert "UNAVAILABLE" in refusals["apache"] and refusals["ferrymq"] == refusals["apache"], refusals


def test_the_default_mode_serves_tls_and_plain_clients_on_one_port(server):
    """Apache's default tls.server.mode is permissive, with a self-signed certificate (test mode)."""
    assert _route_code(server.namesrv_addr, tls=False) == ResponseCode.SUCCESS
    assert _route_code(server.namesrv_addr, tls=True) == ResponseCode.SUCCESS
    assert _route_code(server.broker_addr, tls=False) == _route_code(server.broker_addr, tls=True)


# ---------------------------------------------------------------------- mutual TLS


@pytest.fixture(scope="module")
def mutual(certs, compat_home):
    """Apache's name server and broker and FerryMQ's requiring a client certificate signed by the test CA,
    booted side by side: {kind: Enforcing}. Each broker registers presenting ``tls.client.certPath``."""
    from ferrymq.testing import FerryMQServer

    mutual = write_conf(certs.ca.parent / "mutual.properties", {
        "tls.test.mode.enable": "false",
        "tls.server.certPath": certs.server.cert,
        "tls.server.keyPath": certs.server.key,
        "tls.server.need.client.auth": "require",
        "tls.server.authClient": "true",
        "tls.server.trustCertPath": certs.ca,
        # what the servers' own client connections present (a broker registering, Apache's name server
        # connecting to itself)
        "tls.client.certPath": certs.client.cert,
        "tls.client.keyPath": certs.client.key,
    })
    settings = {"tls.server.mode": "enforcing", "tls.config.file": str(mutual)}
    home = compat_home / "mutual-tls"
    ns = ApacheNamesrv.launch(home / "apache-namesrv", system_properties=settings)
    broker = ferry = None
    try:
        broker = ApacheBroker.launch(home / "apache-broker", ns.addr, cluster="MutualCluster", name="mutual-broker-a",
                                     system_properties=settings, namesrv_tls=presenting(certs.client))
        # registering again soon when the first registration times out while the JVMs start
        ferry = FerryMQServer(home / "ferrymq", {"brokerClusterName": "MutualCluster", "brokerName": "mutual-broker-a",
                                                 "registerNameServerPeriod": 2000, **settings}).start()
        ns.wait_ready()
        broker.wait_ready()
        yield {"apache": Enforcing("apache", ns.addr, broker.addr, broker.name),
               "ferrymq": Enforcing("ferrymq", ferry.namesrv_addr, ferry.broker_addr, ferry.broker_name)}
    finally:
        if ferry is not None:
            ferry.stop()
        if broker is not None:
            broker.stop()
        ns.stop()


def test_mutual_tls_serves_a_client_certificate_of_the_trusted_ca_and_refuses_none(mutual, certs, java5):
    """The Java client presenting a certificate sends through the name server and the broker and consumes
    (a first handshake on a busy machine can pass the client's default 3 s). A TLS client presenting no
    certificate is refused by the name server and the broker; presenting one, it is served."""
    with_certificate = {**TLS_CLIENT, "tls.test.mode.enable": "false", "tls.client.certPath": str(certs.client.cert),
                        "tls.client.keyPath": str(certs.client.key), "tls.client.authServer": "true",
                        "tls.client.trustCertPath": str(certs.ca)}
    topic = f"Mutual{uuid.uuid4().hex[:8]}"

    def exchange(server: Enforcing) -> list[dict]:
        java5("send", "-n", server.namesrv_addr, "-t", topic, "-count", "2", "-body", "mutual", "-timeout", "15000",
              system_properties=with_certificate).check()
        return java5("consume", "-n", server.namesrv_addr, "-t", topic, "-g", f"g{topic}", "-count", "2",
                     "-timeout", "30000", system_properties=with_certificate).check().of("received")

    with ThreadPoolExecutor(len(mutual)) as pool:
        received = dict(zip(mutual, pool.map(exchange, mutual.values())))
    for kind, server in mutual.items():
        assert sorted(e["body"] for e in received[kind]) == ["mutual #0", "mutual #1"], kind
        for addr in (server.namesrv_addr, server.broker_addr):
            with pytest.raises(OSError):  # the server's alert: certificate required
                _route_code(addr, tls=True)
            assert _route_code(addr, tls=presenting(certs.client)) in (ResponseCode.SUCCESS,
                                                                       ResponseCode.REQUEST_CODE_NOT_SUPPORTED)
