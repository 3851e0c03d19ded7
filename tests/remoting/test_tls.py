"""TLS on the transport: the modes' first-byte detection, certificates, client authentication, and the
client side's TLS, against Python's own ``ssl`` module as the independent other end."""

from __future__ import annotations

import ssl

import pytest
from OpenSSL import SSL

from ferrymq.remoting import RemotingClient, RemotingClosedError, RemotingServer
from ferrymq.remoting.tls import ClientAuth, ClientTls, KeyPair, PeerCheck, ServerTls, TlsMode
from ferrymq.testing.certs import make_certs
from ferrymq.wire.command import request
from ferrymq.wire.codes import ResponseCode

from .helpers import RawClient

ECHO = 1000


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("certs"))


@pytest.fixture
def serve(rt):
    made = []

    def start(tls: ServerTls) -> RemotingServer:
        table = {ECHO: lambda cmd, ch: cmd.response(ext_fields={"v": cmd.ext("v", "")})}
        srv = RemotingServer(table, name="test", tls=tls)
        rt.call(srv.listen, 0, "127.0.0.1")
        made.append(srv)
        return srv

    yield start
    for srv in made:
        rt.call(srv.stop, 1.0)


@pytest.fixture
def client(rt):
    made = []

    def make(tls: ClientTls | None = None) -> RemotingClient:
        c = RemotingClient(tls=tls)
        made.append(c)
        return c

    yield make
    for c in made:
        rt.call(c.close)


def _server_tls(certs, mode=TlsMode.PERMISSIVE, **kw) -> ServerTls:
    return ServerTls(mode, KeyPair(str(certs.server.cert), str(certs.server.key)), test_mode=False, **kw)


def _tls_socket(srv: RemotingServer, ca=None, cert=None) -> RawClient:
    """A RawClient whose socket speaks TLS through Python's ``ssl`` (checking the server against ``ca``)."""
    ctx = ssl.create_default_context(cafile=str(ca)) if ca else ssl._create_unverified_context()
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    raw = RawClient(("127.0.0.1", srv.port))
    raw.sock = ctx.wrap_socket(raw.sock, server_hostname="localhost")
    return raw


def _echo(rt, c: RemotingClient, srv: RemotingServer, v: str = "x") -> str:
    return rt.call(c.invoke, srv.address, request(ECHO, {"v": v}), 3).ext("v")


def test_permissive_serves_tls_and_plain_clients_on_one_port(rt, serve, client, certs):
    srv = serve(_server_tls(certs))
    assert _echo(rt, client(), srv, "plain") == "plain"
    assert _echo(rt, client(ClientTls()), srv, "tls") == "tls"
    raw = _tls_socket(srv, ca=certs.ca)  # the server's chain verifies against the CA, for localhost
    raw.send(request(ECHO, {"v": "stdlib"}))
    assert raw.recv().ext("v") == "stdlib"


def test_enforcing_closes_a_plain_connection_and_serves_tls(rt, serve, client, certs):
    srv = serve(_server_tls(certs, TlsMode.ENFORCING))
    raw = RawClient(("127.0.0.1", srv.port))
    raw.send(request(ECHO, {"v": "plain"}))
    assert raw.closed_by_peer()
    with pytest.raises(RemotingClosedError):
        _echo(rt, client(), srv)
    assert _echo(rt, client(ClientTls()), srv, "tls") == "tls"


def test_test_mode_serves_a_self_signed_certificate(rt, serve, client):
    srv = serve(ServerTls(TlsMode.ENFORCING))
    raw = _tls_socket(srv)
    raw.send(request(ECHO, {"v": "t"}))
    assert raw.recv().ext("v") == "t"
    assert raw.sock.getpeercert(binary_form=True)


def test_required_client_certificate_is_checked_against_the_trusted_ca(rt, serve, client, certs):
    srv = serve(_server_tls(certs, TlsMode.ENFORCING, client_auth=ClientAuth.REQUIRE,
                            check=PeerCheck(verify=True, trust_path=str(certs.ca))))
    with pytest.raises(RemotingClosedError):
        _echo(rt, client(ClientTls()), srv)
    own = KeyPair(str(certs.client.cert), str(certs.client.key))
    assert _echo(rt, client(ClientTls(own)), srv, "mutual") == "mutual"


def test_a_client_checking_the_server_refuses_an_untrusted_certificate(rt, serve, client, certs, tmp_path):
    srv = serve(_server_tls(certs))
    other_ca = make_certs(tmp_path / "other").ca
    with pytest.raises(RemotingClosedError):
        _echo(rt, client(ClientTls(check=PeerCheck(verify=True, trust_path=str(other_ca)))), srv)
    assert _echo(rt, client(ClientTls(check=PeerCheck(verify=True, trust_path=str(certs.ca)))), srv, "ok") == "ok"


def test_an_encrypted_key_needs_its_password(tmp_path):
    locked = make_certs(tmp_path, key_password="s3cret")
    ServerTls(TlsMode.ENFORCING, KeyPair(str(locked.server.cert), str(locked.server.key), "s3cret"),
              test_mode=False).check_files()
    with pytest.raises((ValueError, TypeError, SSL.Error)):
        ServerTls(TlsMode.ENFORCING, KeyPair(str(locked.server.cert), str(locked.server.key), "wrong"),
                  test_mode=False).check_files()


def test_disabled_mode_closes_a_tls_handshake_as_an_unreadable_frame(rt, serve, certs):
    srv = serve(ServerTls(TlsMode.DISABLED))
    with pytest.raises((ssl.SSLError, ConnectionError, OSError)):
        _tls_socket(srv).send(request(ECHO, {"v": "x"}))
    plain = RawClient(("127.0.0.1", srv.port))
    plain.send(request(ECHO, {"v": "p"}))
    assert plain.recv().code == ResponseCode.SUCCESS
