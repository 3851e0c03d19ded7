"""Brokers under Apache RocketMQ 5.5.0's controller (controller mode, issue 24, docs/ha.md).

One Apache name server with its embedded controller (``enableControllerInNamesrv``, a one-node DLedger
group) serves the module. Each scenario runs on a group of two Apache brokers first, then on a group of
two FerryMQ brokers under the same controller: the brokers get their ids from the controller, one is
elected master, the slave replicates with the AutoSwitch protocol and joins the sync state set, mqadmin
(getSyncStateSet asks the controller, getBrokerEpoch the brokers) reads the same for both groups, a
killed master is replaced by its slave and comes back as a slave, no message the official Java and Go
producers saw acknowledged is lost over two kill rounds (the brokers run allAckInSyncStateSet with
SYNC_FLUSH), and a sync state set smaller than minInSyncReplicas refuses sends (also what devices publish
to the MQTT gateway in the master's process).
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest
from ferrymq.testing import admin
from ferrymq.testing.ports import free_port
from ferrymq.wire.bodies import SyncStateSet
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request
from ferrymq.wire.message import iter_records

from tests.gateways.mqtt.devices import V5, Device
from tests.ha.helpers import (
    BrokerProcess,
    commitlog_bytes,
    commitlog_range,
    send,
    send_request,
    wait_for,
)
from tests.remoting.helpers import RawClient

from .apache import ApacheBroker, ApacheNamesrv

#: quick heartbeats and metadata polls instead of Apache's seconds
CONTROLLER_TIMING = {"brokerHeartbeatInterval": 500, "syncBrokerMetadataPeriod": 1000,
                     "controllerHeartBeatTimeoutMills": 3000, "checkSyncStateSetPeriod": 1000}
SEGMENT = 64 * 1024 * 1024
CLUSTER = "CtlCluster"
GROUPS = {"apache": "ctl-apache", "ferrymq": "ctl-ferry"}
TOPIC = "CtlFailover"
MESSAGES = 20


@pytest.fixture(scope="module")
def controller(java5, tmp_path_factory):
    """Apache's name server with its controller; ``.controller_addr`` is the controller's (DLedger) port."""
    ns = ApacheNamesrv.launch_with_controller(tmp_path_factory.mktemp("controller"), "ferrymq-ctl")
    ns.wait_ready()
    yield ns
    ns.stop()


def controller_mode(controller, name: str) -> dict[str, object]:
    """A SYNC_MASTER's guarantee in controller mode: a send is answered once flushed and held by every
    broker of the sync state set."""
    return {"brokerClusterName": CLUSTER, "brokerName": name, "enableControllerMode": "true",
            "controllerAddr": controller.controller_addr, "mappedFileSizeCommitLog": SEGMENT,
            "allAckInSyncStateSet": "true", "flushDiskType": "SYNC_FLUSH", **CONTROLLER_TIMING}


class ControllerBroker(BrokerProcess):
    """A FerryMQ broker whose id the controller assigns: ready once the name server lists its address
    (a start-up attempt the controller does not answer is retried after 5 s, as Apache's)."""

    ready_timeout = 60.0

    def _registered(self, _broker_id: int) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log[-3000:]}")
        try:
            info = admin.cluster_info(self.namesrv_addr)
        except OSError:
            return False
        data = info.broker_addr_table.get(str(self.conf["brokerName"]))
        return data is not None and self.addr in data.broker_addrs.values()


@pytest.fixture(scope="module")
def groups(controller, tmp_path_factory):
    """A group of two Apache brokers and a group of two FerryMQ brokers under the one controller, booted side
    by side: {"apache": [...], "ferrymq": [...]}."""
    home = tmp_path_factory.mktemp("ctl-groups")
    apache = [ApacheBroker.launch(home / f"apache-{i}", controller.addr, cluster=CLUSTER, name=GROUPS["apache"],
                                  extra=controller_mode(controller, GROUPS["apache"])) for i in range(2)]
    ferry: list[ControllerBroker] = []
    try:
        for i in range(2):
            ferry.append(ControllerBroker(home / f"ferrymq-{i}", controller.addr,
                                          {**controller_mode(controller, GROUPS["ferrymq"]),
                                           "mqttListenPort": free_port()}).start())
        for broker in apache:
            broker.wait_ready()
        yield {"apache": apache, "ferrymq": ferry}
    finally:
        for broker in ferry:
            broker.kill()
        for broker in apache:
            broker.stop()


def elected(namesrv_addr: str, name: str) -> dict[int, str] | None:
    """The group's route once it lists a master (id 0) and one slave."""
    data = admin.cluster_info(namesrv_addr).broker_addr_table.get(name)
    ids = dict(data.broker_addrs) if data is not None else {}
    return ids if 0 in ids and len(ids) == 2 else None


@dataclass(frozen=True)
class SyncStateSetView:
    """mqadmin getSyncStateSet, addresses as the brokers' roles."""

    master_id: int
    master_addr: str
    master_epoch: int
    in_sync: dict[int, str]
    not_in_sync: dict[int, str]

    @classmethod
    def parse(cls, out: str) -> SyncStateSetView:
        fields = dict(re.findall(r"^#(\w+)\s+(\S+)", out, re.MULTILINE))
        replicas = re.findall(r"^(InSyncReplica|NotInSyncReplica):.*?brokerId=(\d+), brokerAddress='([^']*)'", out, re.MULTILINE)
        return cls(int(fields["MasterBrokerId"]), fields["MasterAddr"], int(fields["MasterEpoch"]),
                   {int(i): a for kind, i, a in replicas if kind == "InSyncReplica"},
                   {int(i): a for kind, i, a in replicas if kind == "NotInSyncReplica"})


def broker_epochs(out: str) -> dict[str, tuple[int, list[tuple[int, int, int]]]]:
    """mqadmin getBrokerEpoch: broker address -> (the brokerId it reports, its epoch entries)."""
    found = {}
    for block in out.split("#clusterName")[1:]:
        addr = re.search(r"#brokerAddr\s+(\S+)", block).group(1)
        broker_id = int(re.search(r"#brokerId\s+(-?\d+)", block).group(1))
        entries = [tuple(map(int, e)) for e in
                   re.findall(r"epoch=(\d+), startOffset=(\d+), endOffset=(\d+)", block)]
        found[addr] = (broker_id, entries)
    return found


@pytest.mark.parametrize("impl", ["apache", "ferrymq"])
def test_the_controller_assigns_ids_and_elects_one_master(impl, groups, controller, mqadmin5):
    brokers, name = groups[impl], GROUPS[impl]
    route = wait_for(lambda: elected(controller.addr, name), f"{name}: a master (id 0) and a slave", timeout=30)
    assert set(route.values()) == {b.addr for b in brokers}
    master_addr = route[0]
    (slave_id, slave_addr), = ((i, a) for i, a in route.items() if i)

    view = SyncStateSetView.parse(mqadmin5(controller.addr, "getSyncStateSet", "-a", controller.controller_addr,
                                           "-b", name))
    # the controller numbers a group's brokers from 1; the route names the slave by that id, the master by 0
    assert {view.master_id, slave_id} == {1, 2}
    assert view.master_addr == master_addr and view.master_epoch == 1
    assert view.in_sync.get(view.master_id) == master_addr
    assert {**view.in_sync, **view.not_in_sync} == {view.master_id: master_addr, slave_id: slave_addr}

    epochs = broker_epochs(mqadmin5(controller.addr, "getBrokerEpoch", "-b", name))
    # the master reports brokerId 0 and one epoch from offset 0 to its (empty) log's end
    assert epochs[master_addr] == (0, [(1, 0, 0)])
    assert epochs[slave_addr][0] == slave_id


def controller_sync_state_set(controller_addr: str, name: str) -> set[int]:
    """The group's sync state set as the controller at ``controller_addr`` holds it (GET_REPLICA_INFO, what
    a broker polls)."""
    reply = admin.call(controller_addr, request(RequestCode.CONTROLLER_GET_REPLICA_INFO, {"brokerName": name}))
    return set(SyncStateSet.decode(reply.body).sync_state_set) if reply.code == ResponseCode.SUCCESS else set()


def test_the_slave_replicates_with_epochs_and_joins_the_sync_state_set(groups, controller, mqadmin5):
    """Sends to the master reach the slave byte for byte; the slave joins the sync state set and holds the
    master's epoch entries."""
    routes = {impl: wait_for(lambda impl=impl: elected(controller.addr, GROUPS[impl]), f"{impl}: elected",
                             timeout=30) for impl in GROUPS}
    for impl, ids in routes.items():
        for i in range(MESSAGES):
            assert send(ids[0], TOPIC, f"replicated #{i}".encode()).code == ResponseCode.SUCCESS, impl
    for impl, ids in routes.items():
        by_addr = {b.addr: b for b in groups[impl]}
        master_addr = ids[0]
        (slave_id, slave_addr), = ((i, a) for i, a in ids.items() if i)
        end = commitlog_range(master_addr)[1]
        wait_for(lambda slave_addr=slave_addr, end=end: commitlog_range(slave_addr)[1] == end or None,
                 f"{impl}: the slave {slave_addr} reaches the master's end {end}", timeout=30)
        assert commitlog_bytes(by_addr[slave_addr].store / "commitlog", 0, end) == \
            commitlog_bytes(by_addr[master_addr].store / "commitlog", 0, end), impl
        wait_for(lambda impl=impl: len(controller_sync_state_set(controller.controller_addr, GROUPS[impl])) == 2 or None,
                 f"{impl}: both brokers in the sync state set", timeout=30)
        epochs = broker_epochs(mqadmin5(controller.addr, "getBrokerEpoch", "-b", GROUPS[impl]))
        assert epochs[slave_addr] == (slave_id, [(1, 0, end)]), impl
        assert epochs[master_addr] == (0, [(1, 0, end)]), impl


def route(namesrv_addr: str, name: str) -> dict[int, str]:
    data = admin.cluster_info(namesrv_addr).broker_addr_table.get(name)
    return dict(data.broker_addrs) if data is not None else {}


def sigkill(broker: ApacheBroker | ControllerBroker) -> None:
    broker.child.kill() if isinstance(broker, ApacheBroker) else broker.kill()


def held_send(client: RawClient, body: bytes) -> int:
    """The answer to a send on a connection kept open."""
    cmd = send_request(TOPIC, body)
    client.send(cmd)
    answer = client.recv()
    assert answer.opaque == cmd.opaque
    return answer.code


def test_a_killed_master_is_replaced_and_rejoins_as_slave(groups, controller):
    """SIGKILL each group's master: the controller elects the slave, which turns master without a restart
    and takes sends, also on a connection a client opened while it was a slave (a producer whose route
    still named it master); the old master, started again, comes back as a slave under its old id and
    refuses them."""
    before = {impl: wait_for(lambda impl=impl: elected(controller.addr, GROUPS[impl]), f"{impl}: elected",
                             timeout=30) for impl in GROUPS}
    masters = {impl: next(b for b in groups[impl] if b.addr == before[impl][0]) for impl in GROUPS}
    slaves = {impl: next((i, a) for i, a in before[impl].items() if i) for impl in GROUPS}
    held = {}
    try:
        for impl, (_id, slave_addr) in slaves.items():
            host, _, port = slave_addr.rpartition(":")
            held[impl] = RawClient((host, int(port)))
        # a slave's answer to a send, before and after the failover: Apache's and FerryMQ's must agree
        answers = {impl: [held_send(held[impl], b"to a slave")] for impl in GROUPS}
        for master in masters.values():
            sigkill(master)
        for impl, (_id, promoted) in slaves.items():
            wait_for(lambda impl=impl, promoted=promoted: route(controller.addr, GROUPS[impl]).get(0) == promoted
                     or None, f"{impl}: the slave {promoted} is master in the route", timeout=30)
            wait_for(lambda promoted=promoted: send(promoted, TOPIC, b"to the new master").code
                     == ResponseCode.SUCCESS or None, f"{impl}: the new master {promoted} takes sends", timeout=15)
            answers[impl].append(held_send(held[impl], b"to the new master, on the slave's connection"))
    finally:
        for client in held.values():
            client.close()

    old = masters["apache"]
    relaunched = ApacheBroker.launch(old.home, controller.addr, cluster=CLUSTER, name=GROUPS["apache"],
                                     extra=controller_mode(controller, GROUPS["apache"]))
    groups["apache"][groups["apache"].index(old)] = relaunched
    masters["ferrymq"].start()
    relaunched.wait_ready()
    for impl, back in (("apache", relaunched), ("ferrymq", masters["ferrymq"])):
        (slave_id, promoted) = slaves[impl]
        old_id = 3 - slave_id  # the group's ids are 1 and 2
        wanted = {0: promoted, old_id: back.addr}
        wait_for(lambda impl=impl, wanted=wanted: route(controller.addr, GROUPS[impl]) == wanted or None,
                 f"{impl}: the route {wanted}", timeout=60)
        answers[impl].append(send(back.addr, TOPIC, b"to the old master, now a slave").code)
    assert answers["apache"] == [ResponseCode.SYSTEM_BUSY, ResponseCode.SUCCESS, ResponseCode.SYSTEM_BUSY]
    assert answers["ferrymq"] == answers["apache"]


#: kill rounds of the acknowledged-messages test, and how many acknowledged sends each producer makes
#: before the kill and through the new master
KILL_ROUNDS = 2
ACKED_BEFORE, ACKED_AFTER = 15, 10
ACKED_TOPICS = {"apache": "CtlAckedApache", "ferrymq": "CtlAckedFerry"}
#: the producers' pause between two sends (ms): they keep sending through the failover
SEND_INTERVAL_MS = 20


def acked_bodies(result, prefix: str, ok: object) -> set[str]:
    """The bodies of the sends a producer saw acknowledged (status ``ok``); the harness numbers bodies
    ``<prefix> #<index>``."""
    return {f"{prefix} #{e['index']}" for e in result.of("sent") if e["status"] == ok}


def topic_bodies(store: Path, end: int, topic: str) -> Counter[str]:
    """How often each body of ``topic`` occurs in the commit log under ``store`` up to ``end``."""
    found: Counter[str] = Counter()
    for msg in iter_records(commitlog_bytes(store / "commitlog", 0, end)):
        if msg.topic == topic:
            found[msg.body.decode()] += 1
    return found


def in_sync(controller, impl: str) -> bool | None:
    return len(controller_sync_state_set(controller.controller_addr, GROUPS[impl])) == 2 or None


def relaunch(groups, controller, impl: str, broker):
    """Start a killed broker of ``impl``'s group again on its store (Apache's gets a new port)."""
    if not isinstance(broker, ApacheBroker):
        return broker.start()
    back = ApacheBroker.launch(broker.home, controller.addr, cluster=CLUSTER, name=GROUPS[impl],
                               extra=controller_mode(controller, GROUPS[impl]))
    groups[impl][groups[impl].index(broker)] = back
    return back


def test_no_acknowledged_message_is_lost_over_kill_rounds(groups, controller, java5, go_harness):
    """allAckInSyncStateSet + SYNC_FLUSH: the Java and the Go producer send numbered messages while the
    master is SIGKILLed, KILL_ROUNDS times, and send through each new master (the Go client, which polls
    routes every 30 s, is waited for in the first round only). Each acknowledged body is in the final master's commit log, no
    body twice; each killed master, restarted, rejoins as slave with the new master's commit log byte for
    byte up to its end (what it wrote and no one acknowledged is cut)."""
    for impl, topic in ACKED_TOPICS.items():
        wait_for(lambda impl=impl: elected(controller.addr, GROUPS[impl]), f"{impl}: elected", timeout=30)
        for broker in groups[impl]:  # the slave has it too, so the new master routes it at once
            admin.create_topic(broker.addr, topic, 4)
    producers = {}
    for impl, topic in ACKED_TOPICS.items():
        producers[impl, "java", f"java {impl}"] = java5.spawn(
            "send", "-n", controller.addr, "-t", topic, "-count", "1000000", "-interval", str(SEND_INTERVAL_MS),
            "-body", f"java {impl}", "-group", f"acked_java_{impl}")
        producers[impl, "go", f"go {impl}"] = go_harness.spawn(
            "send", "-n", controller.addr, "-t", topic, "-count", "1000000", "-interval", f"{SEND_INTERVAL_MS}ms",
            "-body", f"go {impl}", "-group", f"acked_go_{impl}")

    def sent_at_least(more: int, what: str, timeout: float, clients: tuple[str, ...] = ("java", "go")) -> None:
        marks = {key: len(r.result().of("sent")) for key, r in producers.items()}
        for key, r in producers.items():
            if key[1] not in clients:
                continue
            try:
                wait_for(lambda r=r, n=marks[key] + more: len(r.result().of("sent")) >= n or r.proc.poll() is not None,
                         f"{key}: {more} sends {what}", timeout=timeout)
            except TimeoutError as exc:
                raise AssertionError(f"{exc}\n{r.result().explain()}") from None
            assert r.proc.poll() is None, r.result().explain()

    try:
        for kill_round in range(KILL_ROUNDS):
            routes = {impl: wait_for(lambda impl=impl: elected(controller.addr, GROUPS[impl]), f"{impl}: elected",
                                     timeout=30) for impl in GROUPS}
            for impl in GROUPS:
                wait_for(lambda impl=impl: in_sync(controller, impl), f"{impl}: two brokers in sync", timeout=30)
            sent_at_least(ACKED_BEFORE, "before the kill", timeout=120)
            masters = {impl: next(b for b in groups[impl] if b.addr == routes[impl][0]) for impl in GROUPS}
            promoted = {impl: next(a for i, a in routes[impl].items() if i) for impl in GROUPS}
            for master in masters.values():
                sigkill(master)
            for impl, name in GROUPS.items():
                wait_for(lambda name=name, p=promoted[impl]: route(controller.addr, name).get(0) == p or None,
                         f"{impl}: the slave {promoted[impl]} is master", timeout=30)
            back = {impl: relaunch(groups, controller, impl, master) for impl, master in masters.items()}
            # the Go client polls routes every 30 s: it is waited for once, the last round ends with Java's
            last = kill_round == KILL_ROUNDS - 1
            sent_at_least(ACKED_AFTER, "through the new master", timeout=90, clients=("java",) if last else ("java", "go"))
            for impl, broker in back.items():
                if isinstance(broker, ApacheBroker):
                    broker.wait_ready()
                wait_for(lambda impl=impl, b=broker: b.addr in route(controller.addr, GROUPS[impl]).values() or None,
                         f"{impl}: {broker.addr} back as a slave", timeout=60)
                joined = commitlog_range(promoted[impl])[1]
                end = wait_for(lambda b=broker, joined=joined: commitlog_range(b.addr)[1] >= joined
                               and commitlog_range(b.addr)[1], f"{impl}: the rejoined slave reaches {joined}", timeout=30)
                new_master = next(b for b in groups[impl] if b.addr == promoted[impl])
                assert commitlog_bytes(broker.store / "commitlog", 0, end) == \
                    commitlog_bytes(new_master.store / "commitlog", 0, end), f"{impl} round {kill_round}"
    finally:
        for running in producers.values():
            running.kill()

    for impl, topic in ACKED_TOPICS.items():
        acked = set()
        for (of_impl, client, prefix), running in producers.items():
            if of_impl == impl:
                acked |= acked_bodies(running.result(), prefix, "SEND_OK" if client == "java" else 0)
        master_addr = wait_for(lambda impl=impl: elected(controller.addr, GROUPS[impl]), f"{impl}: elected")[0]
        master = next(b for b in groups[impl] if b.addr == master_addr)
        stored = topic_bodies(master.store, commitlog_range(master_addr)[1], topic)
        assert acked and not acked - set(stored), (impl, sorted(acked - set(stored)))
        assert {body: n for body, n in stored.items() if n > 1} == {}, impl


def set_broker_config(broker_addr: str, key: str, value: object) -> None:
    reply = admin.call(broker_addr, request(RequestCode.UPDATE_BROKER_CONFIG, body=f"{key}={value}\n".encode()))
    assert reply.code == ResponseCode.SUCCESS, reply.remark


def test_a_sync_state_set_smaller_than_min_in_sync_replicas_refuses_sends(groups, controller):
    """minInSyncReplicas above the size of the sync state set (master and slave, 2): the master refuses a
    send before storing it, SYSTEM_ERROR 'in-sync replicas not enough' (Apache's IN_SYNC_REPLICAS_NOT_ENOUGH,
    which the clients retry); with the key back at 2 it takes sends again."""
    answers = {}
    for impl, name in GROUPS.items():
        master = wait_for(lambda name=name: elected(controller.addr, name), f"{impl}: elected", timeout=30)[0]
        wait_for(lambda impl=impl: in_sync(controller, impl), f"{impl}: two brokers in sync", timeout=30)
        set_broker_config(master, "minInSyncReplicas", 3)
        end = commitlog_range(master)[1]
        reply = send(master, TOPIC, b"short of in-sync replicas")
        answers[impl] = (reply.code, reply.remark)
        assert commitlog_range(master)[1] == end, impl
        set_broker_config(master, "minInSyncReplicas", 2)
        assert send(master, TOPIC, b"enough in-sync replicas").code == ResponseCode.SUCCESS, impl
    assert answers["apache"] == (ResponseCode.SYSTEM_ERROR, "in-sync replicas not enough")
    assert answers["ferrymq"] == answers["apache"]


def test_a_master_short_of_in_sync_replicas_refuses_what_devices_publish(groups, controller):
    """FerryMQ's alone (Apache's brokers serve no MQTT; the send of the test above is the reference): the
    MQTT gateway in the master's process stores what devices publish without a send request, yet with
    minInSyncReplicas above the sync state set it stores nothing either, and a QoS 1 PUBLISH is answered
    as a refused send maps (PUBACK *Unspecified error*, 0x80); with the key back at 2 it is stored. The
    topic is the FerryMQ group's alone (its first PUBLISH creates it there), so no other broker of the
    cluster could take the message."""
    name = GROUPS["ferrymq"]
    master_addr = wait_for(lambda: elected(controller.addr, name), "ferrymq: elected", timeout=30)[0]
    wait_for(lambda: in_sync(controller, "ferrymq"), "ferrymq: two brokers in sync", timeout=30)
    master = next(b for b in groups["ferrymq"] if b.addr == master_addr)
    device = Device(int(master.conf["mqttListenPort"]), V5)
    topic = "CtlMqttFerry/device"
    try:
        assert device.publish(topic, b"created here", 1) == 0x00
        set_broker_config(master_addr, "minInSyncReplicas", 3)
        end = commitlog_range(master_addr)[1]
        try:
            assert device.publish(topic, b"short of in-sync replicas", 1) == 0x80
            assert commitlog_range(master_addr)[1] == end
        finally:
            set_broker_config(master_addr, "minInSyncReplicas", 2)
        assert device.publish(topic, b"enough in-sync replicas", 1) == 0x00
        assert commitlog_range(master_addr)[1] > end
    finally:
        device.close()
