"""Issue 26, ACL 2.0 (docs/acl.md): Apache 5.5.0 and FerryMQ with authentication and authorization on, the same
settings, and the official Java client signing with ``AclClientRPCHook``: served with good credentials,
refused with the same code and reason with a wrong secret or none; mqadmin's user and ACL commands (signing
with the ``conf/tools.yml`` credentials) print the same, and a normal user is refused what its ACL does not
allow (the Go client, signing with ``primitive.Credentials``, shows that). Each step runs its clients
against both servers at once (they are booted side by side too). FerryMQ's own clients sign the same way:
its admin client is served by both, and a FerryMQ slave of the Apache master syncs the master's tables
with its ``innerClientAuthenticationCredentials``."""

from __future__ import annotations

import io
import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from ferrymq.sdk import BlockingMQAdmin, Credentials
from ferrymq.sdk.admin_cli import main as admin_main
from ferrymq.sdk.errors import MQResponseError
from ferrymq.testing import admin
from ferrymq.wire import command
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request
from ferrymq.wire.signature import sign_command

from tests.ha.helpers import BrokerProcess, wait_for

from . import toolchain
from .apache import ApacheBroker, ApacheNamesrv
from .harness import JavaScenarios, MqAdmin, finish_all
from .servers import Server

ROOT = ("rocketmq", "12345678")
ALICE = ("alice", "alice-secret")
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
#: A refused send is answered at once; the client's own budget (3 s, its retries included) runs out on a busy
#: machine, and the error it reports then is its timeout instead of the broker's refusal.
SEND_TIMEOUT = ("-timeout", "15000")


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


def on_both(acl_servers, java5, runs):
    """``runs(server) -> {name: (scenario, *args)}`` run against both servers at once: {(kind, name): result}."""
    running = {(kind, name): java5.spawn(scenario, "-n", server.namesrv_addr, *args)
               for kind, server in acl_servers.items() for name, (scenario, *args) in runs(server).items()}
    return finish_all(running, timeout=120)


def refusal(result) -> str:
    """The broker's answer in the text of the client's innermost exception: ``CODE: 16  DESC: <reason>``."""
    errors = result.of("send_error")
    assert errors and not result.of("sent"), result.explain()
    text = errors[0]["cause"]
    assert "CODE: 16" in text, result.explain()
    return text.split("DESC: ", 1)[1].split(" BROKER: ", 1)[0].strip()


def test_a_signed_client_sends_and_consumes(acl_servers, java5):
    creds = ("-ak", ROOT[0], "-sk", ROOT[1])
    sent = on_both(acl_servers, java5, lambda s: {
        "send": ("send", "-t", f"AclSigned_{s.kind}", "-count", "2", *creds, *SEND_TIMEOUT)})
    for result in sent.values():
        assert [e["status"] for e in result.of("sent")] == ["SEND_OK", "SEND_OK"], result.explain()
    got = on_both(acl_servers, java5, lambda s: {
        "consume": ("consume", "-t", f"AclSigned_{s.kind}", "-g", f"AclGroup_{s.kind}", "-count", "2",
                    "-from", "first", "-timeout", "40000", *creds)})
    for result in got.values():
        assert len(result.of("received")) == 2, result.explain()


def test_a_4_9_client_signs_the_same_way(acl_servers, tmp_path_factory):
    java4 = JavaScenarios(toolchain.java_clients(toolchain.ROCKETMQ_4), tmp_path_factory.mktemp("acl-java4"))
    results = on_both(acl_servers, java4, lambda s: {
        "good": ("send", "-t", f"AclJava4_{s.kind}", "-ak", ROOT[0], "-sk", ROOT[1], *SEND_TIMEOUT),
        "wrong": ("send", "-t", f"AclJava4_{s.kind}", "-ak", ROOT[0], "-sk", "guess", *SEND_TIMEOUT)})
    for kind in acl_servers:
        good = results[kind, "good"]
        assert [e["status"] for e in good.of("sent")] == ["SEND_OK"], good.explain()
        assert refusal(results[kind, "wrong"]) == "check signature failed."


@pytest.fixture(scope="module")
def admin_outputs(acl_servers, java5, tmp_path_factory):
    """alice and her ACL made with mqadmin 5.5.0 on each server, signing as the initial super user (the
    credentials of ``$ROCKETMQ_HOME/conf/tools.yml``), and what its commands print."""
    home = tmp_path_factory.mktemp("acl-mqadmin")
    (home / "conf").mkdir()
    (home / "conf" / "tools.yml").write_text(f"accessKey: {ROOT[0]}\nsecretKey: {ROOT[1]}\n")
    mqadmin = MqAdmin(toolchain.java_clients(toolchain.ROCKETMQ_5), home)

    def commands(server: Server) -> list[str]:
        def run(*args):
            out = mqadmin(server.namesrv_addr, *args, "-b", server.broker_addr)
            return out.replace(server.broker_addr, "<broker>")
        return [run("createUser", "-u", ALICE[0], "-p", ALICE[1]),
                run("createAcl", "-s", "User:alice", "-r", "Topic:AclMine,Topic:AclApp*", "-a", "Pub,Sub",
                    "-d", "Allow"),
                run("listUser"),
                run("listAcl", "-s", "User:alice"),
                run("getUser", "-u", ALICE[0]),
                run("getAcl", "-s", "User:alice")]

    with ThreadPoolExecutor(len(acl_servers)) as pool:
        return dict(zip(acl_servers, pool.map(commands, acl_servers.values()), strict=True))


def test_mqadmin_user_and_acl_commands_print_the_same(admin_outputs):
    apache, ferry = admin_outputs["apache"], admin_outputs["ferrymq"]
    assert "alice" in apache[2] and "Topic:AclApp*" in apache[3], apache
    for mine, theirs in zip(ferry, apache, strict=True):
        assert mine == theirs


def ferrymq_admin(server: Server, *args: str) -> str:
    """What ``ferrymq admin`` prints for one command, signing as the initial super user."""
    out, err = io.StringIO(), io.StringIO()
    code = admin_main([args[0], "-n", server.namesrv_addr, "--access-key", ROOT[0], "--secret-key", ROOT[1],
                       *args[1:], "-b", server.broker_addr], out, err)
    assert code == 0, err.getvalue()
    return out.getvalue().replace(server.broker_addr, "<broker>")


def test_ferrymq_admin_prints_what_mqadmin_prints_on_either_server(acl_servers, admin_outputs):
    for kind, server in acl_servers.items():
        mqadmin = admin_outputs[kind]
        assert [ferrymq_admin(server, "listUser"), ferrymq_admin(server, "listAcl", "-s", "User:alice"),
                ferrymq_admin(server, "getUser", "-u", ALICE[0]),
                ferrymq_admin(server, "getAcl", "-s", "User:alice")] == mqadmin[2:], kind
        assert ferrymq_admin(server, "createUser", "-u", "erin", "-p", "erin-secret") == mqadmin[0], kind
        assert ferrymq_admin(server, "createAcl", "-s", "User:erin", "-r", "Topic:AclErin", "-a", "Pub",
                             "-d", "Allow") == mqadmin[1], kind
        assert ferrymq_admin(server, "deleteUser", "-u", "erin") == "delete user to <broker> success.\n", kind


def test_a_wrong_secret_and_no_credentials_are_refused_with_apaches_code_and_reason(acl_servers, java5):
    results = on_both(acl_servers, java5, lambda s: {
        "wrong": ("send", "-t", f"AclWrong_{s.kind}", "-ak", ROOT[0], "-sk", "guess", *SEND_TIMEOUT),
        "unsigned": ("send", "-t", f"AclUnsigned_{s.kind}", *SEND_TIMEOUT)})
    for kind in acl_servers:
        assert refusal(results[kind, "wrong"]) == "check signature failed."
        assert refusal(results[kind, "unsigned"]) == "username cannot be null."


def test_a_normal_user_publishes_only_where_its_acl_allows(acl_servers, admin_outputs, go_harness):
    running = {(kind, topic): go_harness.spawn("send", "-n", server.namesrv_addr, "-t", topic,
                                               "-ak", ALICE[0], "-sk", ALICE[1], "-timeout", "15s")
               for kind, server in acl_servers.items() for topic in ("AclApp1", "AclOther")}
    results = finish_all(running, timeout=60)
    for kind in acl_servers:
        allowed, other = results[kind, "AclApp1"], results[kind, "AclOther"]
        assert [e["status"] for e in allowed.of("sent")] == [0], allowed.explain()  # primitive.SendOK
        refused = "User:alice has no permission to access Topic:AclOther from 127.0.0.1, no matched policies."
        assert not other.of("sent") and refused in other.explain(), other.explain()


def test_the_go_client_signs_with_its_credentials(acl_servers, go_harness):
    running = {(kind, name): go_harness.spawn("send", "-n", server.namesrv_addr, "-t", f"AclGo_{kind}",
                                              "-ak", ROOT[0], "-sk", secret, "-timeout", "15s")
               for kind, server in acl_servers.items() for name, secret in (("good", ROOT[1]), ("wrong", "guess"))}
    results = finish_all(running, timeout=60)
    for kind in acl_servers:
        good, wrong = results[kind, "good"], results[kind, "wrong"]
        assert [e["status"] for e in good.of("sent")] == [0], good.explain()  # primitive.SendOK
        assert not wrong.of("sent") and "check signature failed." in wrong.explain(), wrong.explain()


@pytest.fixture
def ferry_slave_of_apache(acl_servers, tmp_path_factory):
    """A FerryMQ slave (brokerId 1) of the authenticating Apache master, signing as the master's inner user;
    Apache's 64 MiB commit-log segments, as a slave appends its master's bytes verbatim. A slave copies the
    master's topic table when it starts and then once a minute (Apache's schedule), so a test asks for it
    after making its topics."""
    apache = acl_servers["apache"]
    slave = BrokerProcess(tmp_path_factory.mktemp("acl-ferry-slave"), apache.namesrv_addr, {
        "brokerClusterName": apache.cluster, "brokerName": apache.broker_name, "brokerRole": "SLAVE",
        "brokerId": 1, "mappedFileSizeCommitLog": 64 * 1024 * 1024, **AUTH_CONFIG}).start()
    yield slave
    slave.kill()


def create_topic(server: Server, topic: str, credentials: Credentials | None) -> None:
    with BlockingMQAdmin(server.namesrv_addr, credentials=credentials) as mq_admin:
        mq_admin.create_topic(topic, 1, broker_addr=server.broker_addr)


def test_ferrymqs_admin_client_signs_as_apaches_and_its_slave_syncs_from_an_apache_master(
        acl_servers, request: pytest.FixtureRequest):
    root = Credentials(*ROOT)
    for kind, server in acl_servers.items():
        with pytest.raises(MQResponseError) as refused:
            create_topic(server, f"AclSdk_{kind}", None)
        assert (refused.value.code, refused.value.remark) == (ResponseCode.NO_PERMISSION,
                                                              "username cannot be null."), kind
        create_topic(server, f"AclSdk_{kind}", root)
    ferry_slave_of_apache = request.getfixturevalue("ferry_slave_of_apache")

    def slave_has_topic() -> bool:
        cmd = command.request(RequestCode.GET_TOPIC_CONFIG, {"topic": "AclSdk_apache"})
        sign_command(cmd, root)
        return admin.call(ferry_slave_of_apache.addr, cmd).code == ResponseCode.SUCCESS

    wait_for(slave_has_topic, "the FerryMQ slave has the topic made on its Apache master", timeout=20)
