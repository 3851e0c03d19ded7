"""TLS on the remoting port (issue 26): Apache 5.5.0 and FerryMQ with ``tls.server.mode=enforcing`` and the
certificate and key of a ``tls.config.file``, driven by the official Java 5.5.0 client and mqadmin with
``-Dtls.enable=true``; a plain connection is closed by both; the default mode (permissive) serves TLS and
plain clients on one port on both. Mutual TLS (``tls.server.need.client.auth=require``) on both name
servers: the Java client presenting a certificate of the trusted CA (``tls.client.certPath``/``keyPath``)
is served, a client presenting none is refused.

Apache reads the tls.* keys as JVM system properties only; FerryMQ reads the same names from its config file.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from ferrymq.testing.certs import CertSet, make_certs
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request

from .apache import ApacheBroker, ApacheNamesrv, write_conf
from .socket_client import Connection

#: what the clients need to speak TLS (Apache's client side; test mode: the server certificate is not checked)
TLS_CLIENT = {"tls.enable": "true"}


@dataclass
class Enforcing:
    kind: str
    namesrv_addr: str
    broker_addr: str
    broker_name: str


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
def both_enforcing(tls_file, compat_home):
    """Apache's and FerryMQ's name server and broker taking TLS clients only, booted side by side; each
    broker registers over TLS (tls.enable's default follows enforcing mode on both)."""
    from ferrymq.testing import FerryMQServer

    settings = {"tls.server.mode": "enforcing", "tls.config.file": str(tls_file)}
    home = compat_home / "tls"
    ns = ApacheNamesrv.launch(home / "apache-namesrv", system_properties=settings)
    broker = ferry = None
    try:
        broker = ApacheBroker.launch(home / "apache-broker", ns.addr, cluster="TlsCluster", name="tls-broker-a",
                                     system_properties=settings, namesrv_tls=True)
        # registering again soon when the first registration times out while the JVMs start
        ferry = FerryMQServer(home / "ferrymq", {"brokerClusterName": "TlsCluster", "brokerName": "tls-broker-a",
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


@pytest.fixture(params=["apache", "ferrymq"])
def enforcing(request, both_enforcing) -> Enforcing:
    return both_enforcing[request.param]


def _route_code(addr: str, tls: bool) -> int:
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


def test_the_default_mode_serves_tls_and_plain_clients_on_one_port(server):
    """Apache's default tls.server.mode is permissive, with a self-signed certificate (test mode)."""
    assert _route_code(server.namesrv_addr, tls=False) == ResponseCode.SUCCESS
    assert _route_code(server.namesrv_addr, tls=True) == ResponseCode.SUCCESS
    assert _route_code(server.broker_addr, tls=False) == _route_code(server.broker_addr, tls=True)


# ---------------------------------------------------------------------- mutual TLS


@pytest.fixture(scope="module")
def mutual_namesrvs(certs, compat_home):
    """Apache's and FerryMQ's name servers requiring a client certificate signed by the test CA, booted side
    by side: {kind: address}. Name servers alone: the handshake is the remoting port's, the same on a broker."""
    from .apache import ApacheNamesrv
    from .conftest import FerryNamesrv

    mutual = write_conf(certs.ca.parent / "mutual.properties", {
        "tls.test.mode.enable": "false",
        "tls.server.certPath": certs.server.cert,
        "tls.server.keyPath": certs.server.key,
        "tls.server.need.client.auth": "require",
        "tls.server.authClient": "true",
        "tls.server.trustCertPath": certs.ca,
        # what the server's own client connections present (Apache's name server connects to itself)
        "tls.client.certPath": certs.client.cert,
        "tls.client.keyPath": certs.client.key,
    })
    settings = {"tls.server.mode": "enforcing", "tls.config.file": str(mutual)}
    home = compat_home / "mutual-tls"
    apache = ApacheNamesrv.launch(home / "apache-namesrv", system_properties=settings)
    try:
        ferry = FerryNamesrv(home / "ferrymq-namesrv", settings)
        try:
            apache.wait_ready()
            yield {"apache": apache.addr, "ferrymq": ferry.addr}
        finally:
            ferry.stop()
    finally:
        apache.stop()


def test_mutual_tls_serves_a_client_certificate_of_the_trusted_ca_and_refuses_none(mutual_namesrvs, certs, java5):
    """The Java client asks for TBW102's route, which a name server without brokers answers TOPIC_NOT_EXIST:
    that answer shows the handshake passed (a first handshake on a busy machine can pass the client's default
    3 s). A TLS client presenting no certificate is refused."""
    with_certificate = {**TLS_CLIENT, "tls.test.mode.enable": "false", "tls.client.certPath": str(certs.client.cert),
                        "tls.client.keyPath": str(certs.client.key), "tls.client.authServer": "true",
                        "tls.client.trustCertPath": str(certs.ca)}
    with ThreadPoolExecutor(len(mutual_namesrvs)) as pool:
        served = dict(zip(mutual_namesrvs, pool.map(
            lambda addr: java5("route", "-n", addr, "-t", "TBW102", "-timeout", "15000",
                               system_properties=with_certificate), mutual_namesrvs.values())))
    for kind, addr in mutual_namesrvs.items():
        assert "No topic route info in name server for the topic: TBW102" in served[kind].stderr, served[kind].explain()
        with pytest.raises(OSError):  # the server's alert: certificate required
            _route_code(addr, tls=True)
