"""FerryMQ's own clients sign their requests as Apache's ``AclClientRPCHook`` does (docs/acl.md): an SDK
client given credentials is served by a broker with authentication on, and a slave signs its metadata sync
with ``innerClientAuthenticationCredentials``. A name server, an authenticating master and its slave run in
the SDK's reactor thread."""

from __future__ import annotations

import io
import json
import time

import pytest
from ferrymq.sdk import (
    BlockingProducer,
    ClientConfig,
    Credentials,
    Message,
    reactor_thread,
)
from ferrymq.sdk.admin_cli import main as admin_main
from ferrymq.sdk.errors import MQResponseError
from ferrymq.sdk.mq_admin import MQAdmin
from ferrymq.server.broker.service import Broker
from ferrymq.server.config import (
    AuthConfig,
    BrokerConfig,
    NamesrvConfig,
    NettyServerConfig,
)
from ferrymq.server.namesrv.service import NameServer
from ferrymq.testing.ports import free_port
from ferrymq.wire.codes import ResponseCode

ROOT = Credentials("rocketmq", "12345678")
INNER = Credentials("broker-inner", "inner-secret")
AUTH = {"authenticationEnabled": True, "authorizationEnabled": True,
        "initAuthenticationUser": json.dumps({"username": ROOT.access_key, "password": ROOT.secret_key}),
        "innerClientAuthenticationCredentials": json.dumps({"accessKey": INNER.access_key,
                                                            "secretKey": INNER.secret_key})}
STORE = {"mappedFileSizeConsumeQueue": "6000", "maxIndexNum": "1000", "maxHashSlotNum": "100"}
#: created on the master before its slave starts; the slave's signed metadata sync copies it
SYNCED_TOPIC = "SyncedToSlave"


def wait_for(check, what: str, timeout: float = 15.0):
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout} s")
        time.sleep(0.05)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """(name server address, master, slave): both brokers authenticate; the slave signs as its inner user."""
    reactor_thread.ensure_running()
    rt = reactor_thread
    root = tmp_path_factory.mktemp("signing")
    namesrv = rt.call(NameServer, NamesrvConfig(kvConfigPath=str(root / "kv.json"),
                                                configStorePath=str(root / "ns.properties")),
                      NettyServerConfig(bindAddress="127.0.0.1", listenPort=0))
    rt.call(namesrv.start)
    namesrv_addr = f"127.0.0.1:{namesrv.port}"
    brokers = []
    for broker_id, role in ((0, "ASYNC_MASTER"), (1, "SLAVE")):
        config = BrokerConfig(brokerName="broker-auth", brokerIP1="127.0.0.1", brokerId=broker_id,
                              listenPort=free_port(also_free=(-2, 1)),  # the master's HA port is listenPort + 1
                              brokerRole=role, namesrvAddr=namesrv_addr, mappedFileSizeCommitLog=1 << 20,
                              storePathRootDir=str(root / f"store-{broker_id}"))
        broker = Broker(config, NettyServerConfig(bindAddress="127.0.0.1"), store_props=STORE,
                        auth=AuthConfig(**AUTH))
        rt.call(broker.start)
        brokers.append(broker)
        if role != "SLAVE":
            # before the slave starts: its first round copies every table, the next only a minute later
            create_topic(namesrv_addr, broker.addr, SYNCED_TOPIC, ROOT)
    yield namesrv_addr, *brokers
    for broker in reversed(brokers):
        rt.call(broker.stop, 1.0)
    rt.call(namesrv.stop, 1.0)


def create_topic(namesrv_addr: str, broker_addr: str, topic: str, credentials: Credentials | None) -> None:
    admin = reactor_thread.call(MQAdmin, namesrv_addr, credentials=credentials)
    try:
        reactor_thread.call(admin.create_topic, topic, 1, broker_addr=broker_addr)
    finally:
        reactor_thread.call(admin.close)


def test_an_admin_client_without_credentials_is_refused_and_with_them_is_served(cluster):
    namesrv_addr, master, _slave = cluster
    with pytest.raises(MQResponseError) as refused:
        create_topic(namesrv_addr, master.addr, "SignedTopic", None)
    assert refused.value.code == ResponseCode.NO_PERMISSION
    assert "username cannot be null." in str(refused.value)
    create_topic(namesrv_addr, master.addr, "SignedTopic", ROOT)
    assert master.ctx.topics.get("SignedTopic") is not None


def test_a_producer_with_a_users_credentials_sends(cluster):
    namesrv_addr, master, _slave = cluster
    create_topic(namesrv_addr, master.addr, "SignedSend", ROOT)
    config = ClientConfig(namesrv_addr, credentials=ROOT)
    with BlockingProducer("signed-producer", config=config) as producer:
        result = producer.send(Message("SignedSend", b"signed"))
    assert result.status.name == "SEND_OK"
    wrong = ClientConfig(namesrv_addr, credentials=Credentials(ROOT.access_key, "guess"))
    with BlockingProducer("wrong-producer", config=wrong) as producer, pytest.raises(MQResponseError) as refused:
        producer.send(Message("SignedSend", b"unsigned"))
    assert "check signature failed." in str(refused.value)


def test_a_slave_syncs_from_an_authenticating_master_with_its_inner_credentials(cluster):
    _namesrv_addr, master, slave = cluster
    assert master.ctx.topics.get(SYNCED_TOPIC) is not None
    wait_for(lambda: slave.ctx.topics.get(SYNCED_TOPIC) is not None, "the slave has the master's topic")
    assert slave.slave_sync.client.credentials == INNER


def admin(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return admin_main(list(argv), out, err), out.getvalue(), err.getvalue()


def test_ferrymq_admin_signs_with_its_options_or_mqadmins_tools_yml(cluster, tmp_path, monkeypatch):
    namesrv_addr, master, _slave = cluster
    monkeypatch.delenv("ROCKETMQ_HOME", raising=False)
    code, _, err = admin("updateTopic", "-n", namesrv_addr, "-b", master.addr, "-t", "AdminUnsigned")
    assert code == 1 and "username cannot be null." in err
    code, out, err = admin("updateTopic", "-n", namesrv_addr, "-b", master.addr, "-t", "AdminSigned",
                           "--access-key", ROOT.access_key, "--secret-key", ROOT.secret_key)
    assert code == 0 and "create topic to" in out, err
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "tools.yml").write_text(f"accessKey: {ROOT.access_key}\nsecretKey: {ROOT.secret_key}\n")
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))
    code, out, err = admin("updateTopic", "-n", namesrv_addr, "-b", master.addr, "-t", "AdminToolsYml")
    assert code == 0 and "create topic to" in out, err
    assert master.ctx.topics.get("AdminSigned") and master.ctx.topics.get("AdminToolsYml")


def test_ferrymq_admin_manages_users_and_acls_as_mqadmin_does(cluster):
    namesrv_addr, master, _slave = cluster
    signed = ("-n", namesrv_addr, "--access-key", ROOT.access_key, "--secret-key", ROOT.secret_key)
    to_master = (*signed, "-b", master.addr)
    assert admin("createUser", *to_master, "-u", "carol", "-p", "carol-pw")[1] == \
        f"create user to {master.addr} success.\n"
    assert admin("updateUser", *to_master, "-u", "carol", "-s", "disable")[1] == \
        f"update user to {master.addr} success.\n"
    code, out, err = admin("getUser", *signed, "-c", master.config.brokerClusterName, "-u", "carol")
    row = "%-16s  %-22s  %-22s  %-22s\n"
    assert out == row % ("#UserName", "#Password", "#UserType", "#UserStatus") + \
        row % ("carol", "carol-pw", "Normal", "disable"), err
    assert admin("createAcl", *to_master, "-s", "User:carol", "-r", "Topic:a,Group:g", "-a", "Pub,Sub",
                 "-i", "10.0.0.0/8", "-d", "Allow")[0] == 0
    code, out, err = admin("listAcl", *to_master, "-s", "User:carol")
    header = "%-16s  %-10s  %-22s  %-20s  %-24s  %-10s\n"
    assert out == (header % ("#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision")
                   + header % ("User:carol", "Custom", "Topic:a", "[Pub, Sub]", "[10.0.0.0/8]", "Allow")
                   + header % ("User:carol", "Custom", "Group:g", "[Pub, Sub]", "[10.0.0.0/8]", "Allow")), err
    assert admin("deleteAcl", *to_master, "-s", "User:carol", "-r", "Group:g")[0] == 0
    assert [e.resource.key for e in master.access.acls.get("User:carol").entries()] == ["Topic:a"]
    code, _, err = admin("createAcl", *to_master, "-s", "User:nobody", "-r", "Topic:a", "-a", "Pub", "-d", "Allow")
    assert code == 1 and "The subject of User:nobody is not exist." in err
    assert admin("deleteUser", *to_master, "-u", "carol")[1] == f"delete user to {master.addr} success.\n"
    assert master.access.users.get("carol") is None
