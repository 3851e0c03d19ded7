"""Controller mode beyond one implementation's group (issue 24, docs/ha.md): a group of one FerryMQ and one
Apache 5.5.0 broker failing over both ways, a master cut off by a partition, and a rolling restart (each of the
last two on an Apache group as the reference and on a FerryMQ group).

One Apache name server with its embedded controller serves the module. Its push of role changes is off
(``notifyBrokerRoleChanged=false``): the brokers learn an election by polling the controller
(syncBrokerMetadataPeriod), so a partitioned master hears of its replacement only once the partition
heals. A partition is a :class:`~.partition.Partition`: the broker reaches the name server and the
controller through proxies the test severs.
"""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from ferrymq.sdk import BlockingProducer, ClientConfig, Message, SendStatus
from ferrymq.testing import admin
from ferrymq.wire import headers as h
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request

from tests.ha.helpers import commitlog_bytes, commitlog_range, send, wait_for

from .apache import ApacheBroker, ApacheNamesrv
from .partition import Partition
from .test_ha_controller import (
    CONTROLLER_TIMING,
    SEGMENT,
    ControllerBroker,
    controller_sync_state_set,
)

CLUSTER = "MixCluster"
MIXED = "mix-group"
PARTITIONED = {"apache": "cut-apache", "ferrymq": "cut-ferry"}
#: the groups restarted broker by broker, and the topic each one's producer sends to (on that group only)
ROLLING = {"apache": ("roll-apache", "RollApache"), "ferrymq": ("roll-ferry", "RollFerry")}
TOPIC = "MixTopic"
MESSAGES = 10
#: the rolling groups' brokers poll the controller every 5 s: a new master learns of its election up to 5 s
#: late, so the old master restarted meanwhile registers with the name server first and gets no master's
#: HA address in the answer (it must still rejoin the sync state set within seconds)
ROLLING_POLL = {"syncBrokerMetadataPeriod": 5000}
#: s for a FerryMQ broker to boot and register beside the module's JVMs on a busy machine
BOOT_TIMEOUT = 60.0


@pytest.fixture(scope="module")
def controller(java5, tmp_path_factory):
    """Apache's name server with its controller (``.controller_addr``), which pushes no role changes. It
    returns while the JVM boots (``brokers`` waits for it, its own JVMs booting beside it)."""
    ns = ApacheNamesrv.launch_with_controller(tmp_path_factory.mktemp("mix-controller"), "ferrymq-mix",
                                              notify_role_changes=False)
    yield ns
    ns.stop()


def controller_mode(controller_addr: str, name: str, **extra: object) -> dict[str, object]:
    return {"brokerClusterName": CLUSTER, "brokerName": name, "enableControllerMode": "true",
            "controllerAddr": controller_addr, "mappedFileSizeCommitLog": SEGMENT, **CONTROLLER_TIMING, **extra}


class Brokers:
    """Every broker of the module, booted side by side, and what stops them."""

    def __init__(self, controller, home: Path):
        self.controller = controller
        self.home = home
        self.apache: dict[str, ApacheBroker] = {}
        self.ferrymq: dict[str, ControllerBroker] = {}
        self.partitions: dict[str, Partition] = {}

    def launch_apache(self, key: str, name: str, partition: bool = False, **extra: object) -> ApacheBroker:
        namesrv, ctl = self._paths(key, partition)
        broker = ApacheBroker.launch(self.home / key, namesrv, cluster=CLUSTER, name=name,
                                     extra=controller_mode(ctl, name, **extra))
        self.apache[key] = broker
        return broker

    def launch_ferrymq(self, key: str, name: str, partition: bool = False, **extra: object) -> ControllerBroker:
        namesrv, ctl = self._paths(key, partition)
        broker = self.ferrymq[key] = ControllerBroker(self.home / key, namesrv, controller_mode(ctl, name, **extra))
        return broker.launch()

    def _paths(self, key: str, partition: bool) -> tuple[str, str]:
        if not partition:
            return self.controller.addr, self.controller.controller_addr
        if key not in self.partitions:
            self.partitions[key] = Partition(self.controller.addr, self.controller.controller_addr)
        p = self.partitions[key]
        return p.namesrv.addr, p.controller.addr

    def close(self) -> None:
        for broker in self.ferrymq.values():
            broker.kill()
        for broker in self.apache.values():
            broker.stop()
        for p in self.partitions.values():
            p.close()


@pytest.fixture(scope="module")
def brokers(controller, tmp_path_factory):
    """The brokers of every scenario, launched side by side with the name server."""
    found = Brokers(controller, tmp_path_factory.mktemp("mix-brokers"))
    try:
        found.launch_apache("mixed-apache", MIXED)
        for i in range(2):
            found.launch_apache(f"cut-apache-{i}", PARTITIONED["apache"], partition=True)
            found.launch_apache(f"{ROLLING['apache'][0]}-{i}", ROLLING["apache"][0], allAckInSyncStateSet="true",
                                **ROLLING_POLL)
        controller.wait_ready()
        for i in range(2):
            found.launch_ferrymq(f"cut-ferry-{i}", PARTITIONED["ferrymq"], partition=True)
            found.launch_ferrymq(f"{ROLLING['ferrymq'][0]}-{i}", ROLLING["ferrymq"][0], allAckInSyncStateSet="true",
                                 **ROLLING_POLL)
        for broker in found.ferrymq.values():
            broker.wait_registered(BOOT_TIMEOUT)
        for broker in found.apache.values():
            broker.wait_ready()
        yield found
    finally:
        found.close()


def master_of(controller, name: str) -> tuple[int, str, int] | None:
    """(brokerId, address, epoch) of the group's master as the controller holds it; None while none."""
    reply = admin.call(controller.controller_addr, request(RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                                           {"brokerName": name}))
    if reply.code != ResponseCode.SUCCESS:
        return None
    role = h.ReplicaRoleHeader.from_ext(reply.ext_fields)
    if role.master_broker_id is None or not role.master_address:
        return None
    return role.master_broker_id, role.master_address, role.master_epoch or 0


def wait_master(controller, name: str, addr: str | None = None, timeout: float = 30) -> tuple[int, str, int]:
    """The group's master once there is one (at ``addr`` when given)."""
    return wait_for(lambda: (m := master_of(controller, name)) and (addr is None or m[1] == addr) and m,
                    f"{name}: master {addr or ''}", timeout=timeout, every=0.1)


def wait_caught_up(slave_addr: str, slave_log: Path, master_addr: str, master_log: Path, what: str) -> int:
    """Wait for the slave's commit log to end where the master's does; assert both hold the same bytes there.
    The shared end."""
    end = commitlog_range(master_addr)[1]
    wait_for(lambda: commitlog_range(slave_addr)[1] == end or None, f"{what}: {slave_addr} reaches {end}",
             timeout=30, every=0.1)
    assert commitlog_bytes(slave_log, 0, end) == commitlog_bytes(master_log, 0, end), what
    return end


def takes_sends(addr: str, what: str) -> None:
    wait_for(lambda: send(addr, TOPIC, b"probe").code == ResponseCode.SUCCESS or None,
             f"{what}: {addr} takes sends", timeout=15, every=0.1)


def test_a_mixed_group_fails_over_from_an_apache_master_to_a_ferrymq_slave(brokers, controller):
    """An Apache master with a FerryMQ slave: the slave holds the master's bytes and joins the sync state set;
    the Apache master SIGKILLed, FerryMQ is elected and takes sends. The Apache broker starts again while
    the module goes on (the last test sees it rejoin)."""
    apache = brokers.apache["mixed-apache"]
    _id, _addr, apache_epoch = wait_master(controller, MIXED, apache.addr)
    ferry = brokers.launch_ferrymq("mixed-ferrymq", MIXED).wait_registered(BOOT_TIMEOUT)
    for i in range(MESSAGES):
        assert send(apache.addr, TOPIC, f"to the Apache master #{i}".encode()).code == ResponseCode.SUCCESS
    wait_caught_up(ferry.addr, ferry.store / "commitlog", apache.addr, apache.store / "commitlog",
                   "FerryMQ slave of Apache")
    wait_for(lambda: len(controller_sync_state_set(controller.controller_addr, MIXED)) == 2 or None,
             "Apache master and FerryMQ slave in the sync state set", timeout=30, every=0.1)

    apache.child.kill()
    _id, _addr, epoch = wait_master(controller, MIXED, ferry.addr)
    assert epoch > apache_epoch
    brokers.apache["mixed-apache"] = ApacheBroker.launch(apache.home, controller.addr, cluster=CLUSTER, name=MIXED,
                                                         extra=controller_mode(controller.controller_addr, MIXED))
    takes_sends(ferry.addr, "FerryMQ elected")
    for i in range(MESSAGES):
        assert send(ferry.addr, TOPIC, f"to the FerryMQ master #{i}".encode()).code == ResponseCode.SUCCESS


def test_a_partitioned_master_is_replaced_and_truncates_its_tail_when_back(brokers, controller):
    """Cut the master off from the name server and the controller: the controller elects the slave. What the
    old master takes meanwhile reaches no slave; when the partition heals it turns slave of the new master,
    drops that tail and holds the new master's log byte for byte. An Apache pair, then a FerryMQ pair."""
    groups = {"apache": [brokers.apache[f"cut-apache-{i}"] for i in range(2)],
              "ferrymq": [brokers.ferrymq[f"cut-ferry-{i}"] for i in range(2)]}
    keys = {b.addr: key for key, b in (*brokers.apache.items(), *brokers.ferrymq.items())}
    roles = {}
    for impl, members in groups.items():
        _id, addr, _epoch = wait_master(controller, PARTITIONED[impl])
        master = next(b for b in members if b.addr == addr)
        slave = next(b for b in members if b is not master)
        roles[impl] = master, slave
        for i in range(MESSAGES):
            assert send(master.addr, TOPIC, f"before the partition #{i}".encode()).code == ResponseCode.SUCCESS
    for impl, (master, slave) in roles.items():
        wait_caught_up(slave.addr, slave.store / "commitlog", master.addr, master.store / "commitlog", impl)
        wait_for(lambda impl=impl: len(controller_sync_state_set(controller.controller_addr, PARTITIONED[impl])) == 2 or None,
                 f"{impl}: both in the sync state set", timeout=30, every=0.1)

    for master, _slave in roles.values():
        brokers.partitions[keys[master.addr]].sever()
    answers, tails = {}, {}
    for impl, (master, slave) in roles.items():
        wait_master(controller, PARTITIONED[impl], slave.addr)
        takes_sends(slave.addr, f"{impl}: the slave elected")
        start = commitlog_range(master.addr)[1]
        answers[impl] = [send(master.addr, TOPIC, f"partitioned #{i}".encode()).code for i in range(3)]
        end = commitlog_range(master.addr)[1]
        tails[impl] = start, commitlog_bytes(master.store / "commitlog", start, end)
        for i in range(MESSAGES):
            assert send(slave.addr, TOPIC, f"after the election #{i}".encode()).code == ResponseCode.SUCCESS

    for master, _slave in roles.values():
        brokers.partitions[keys[master.addr]].heal()
    for impl, (old, new) in roles.items():
        wait_for(lambda old=old: send(old.addr, TOPIC, b"to the old master").code == ResponseCode.SYSTEM_BUSY
                 or None, f"{impl}: the old master {old.addr} turns slave", timeout=30, every=0.2)
        end = wait_caught_up(old.addr, old.store / "commitlog", new.addr, new.store / "commitlog", impl)
        start, tail = tails[impl]
        assert tail, f"{impl}: the partitioned master took no message: {answers[impl]}"
        assert commitlog_bytes(old.store / "commitlog", start, start + len(tail)) != tail, impl
        assert b"partitioned #" not in commitlog_bytes(old.store / "commitlog", 0, end), impl
    assert answers["apache"] == [ResponseCode.SUCCESS] * 3
    assert answers["ferrymq"] == answers["apache"]


class Producer(threading.Thread):
    """The Python SDK's producer sending numbered messages to ``topic`` until stopped; the bodies the broker
    acknowledged (SEND_OK) in order."""

    def __init__(self, namesrv_addr: str, topic: str):
        super().__init__(name=f"{topic} producer", daemon=True)
        config = ClientConfig(namesrv_addr, poll_name_server_interval=0.5)
        self.topic = topic
        self.producer = BlockingProducer(f"{topic}_producer", config=config, send_msg_timeout=4.0)
        self.acked: list[bytes] = []
        self.failed = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        i = 0
        while not self.stopping.is_set():
            body = f"{self.topic} #{i:06d};".encode()  # what rolling_restart looks for in the commit log
            i += 1
            try:
                result = self.producer.send(Message(self.topic, body))
            except Exception:  # noqa: BLE001 - no master for a moment: the message is not acknowledged
                self.failed += 1
                time.sleep(0.05)
                continue
            if result.status is SendStatus.SEND_OK:
                self.acked.append(body)

    def sends_go_on(self, what: str) -> None:
        """Wait until a few more sends than so far are acknowledged."""
        seen = len(self.acked)
        wait_for(lambda: len(self.acked) > seen + 5 or None, f"{self.topic}: sends acknowledged {what}", timeout=30)

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        self.producer.shutdown()


def restart_ferrymq(brokers: Brokers, key: str, between: Callable[[], object]) -> ControllerBroker:
    """Stop a FerryMQ broker as an operator does (SIGTERM, a clean shutdown), call ``between()``, and start it
    again on its store and port."""
    broker = brokers.ferrymq[key]
    broker.proc.terminate()
    broker.proc.wait(30)
    between()
    return broker.start(BOOT_TIMEOUT)


def restart_apache(brokers: Brokers, key: str, between: Callable[[], object]) -> ApacheBroker:
    """The same for an Apache broker (on a new port: Apache's start picks a free one)."""
    old = brokers.apache[key]
    old.child.stop(grace=30)
    between()
    broker = brokers.launch_apache(key, old.name, allAckInSyncStateSet="true", **ROLLING_POLL)
    broker.wait_ready()
    return broker


def rolling_restart(brokers: Brokers, controller, impl: str) -> tuple[list[bytes], set[bytes]]:
    """Restart the group's slave, then its master (once the controller elected the slave), while the SDK
    producer sends. The bodies acknowledged, and the producer's bodies the group's master holds at the end."""
    name, topic = ROLLING[impl]
    members, restart = (brokers.apache, restart_apache) if impl == "apache" else (brokers.ferrymq, restart_ferrymq)
    keys = [f"{name}-{i}" for i in range(2)]
    _id, addr, _epoch = wait_master(controller, name)
    master_key = next(k for k in keys if members[k].addr == addr)
    slave_key = next(k for k in keys if k != master_key)

    def in_sync(what: str, timeout: float = 30) -> None:
        wait_for(lambda: len(controller_sync_state_set(controller.controller_addr, name)) == 2 or None, f"{impl}: {what}",
                 timeout=timeout, every=0.1)

    in_sync("both in the sync state set")
    admin.create_topic(addr, topic, 4)
    wait_for(lambda: admin.route(controller.addr, topic), f"{topic} routed", timeout=30, every=0.2)
    producer = Producer(controller.addr, topic)
    producer.producer.start()
    producer.start()
    try:
        producer.sends_go_on("before the restarts")
        restart(brokers, slave_key, lambda: None)
        in_sync("the restarted slave back in the sync state set")
        producer.sends_go_on("after the slave's restart")
        restart(brokers, master_key, lambda: wait_master(controller, name, members[slave_key].addr))
        # it must first truncate to and catch up with the new master's end while sends go on
        in_sync("the old master back as slave in the sync state set")
        producer.sends_go_on("after the master's restart")
    finally:
        producer.stop()
    final = members[slave_key]
    stored = commitlog_bytes(final.store / "commitlog", 0, commitlog_range(final.addr)[1])
    return producer.acked, set(re.findall(re.escape(topic.encode()) + rb" #\d{6};", stored))


def test_a_rolling_restart_loses_no_acknowledged_message(brokers, controller):
    """A group with allAckInSyncStateSet restarted broker by broker, slave first, while the SDK producer sends:
    sends go on after each restart and the final master holds every acknowledged message. An Apache group
    and a FerryMQ group, restarted at the same time."""
    with ThreadPoolExecutor(1) as pool:
        reference = pool.submit(rolling_restart, brokers, controller, "apache")
        ferrymq = rolling_restart(brokers, controller, "ferrymq")
    for impl, (acked, stored) in (("apache", reference.result()), ("ferrymq", ferrymq)):
        assert acked, f"{impl}: no send acknowledged"
        lost = [body for body in acked if body not in stored]
        assert not lost, f"{impl}: {len(lost)} of {len(acked)} acknowledged messages lost: {lost[:5]}"


def test_a_mixed_group_takes_the_restarted_apache_broker_back_as_slave_of_ferrymq(brokers, controller):
    """The Apache broker killed in the first test, started again, follows the FerryMQ master: it truncates
    nothing the group acknowledged, catches up byte for byte, refuses sends as a slave and rejoins the sync
    state set."""
    apache, ferry = brokers.apache["mixed-apache"], brokers.ferrymq.get("mixed-ferrymq")
    if ferry is None:
        pytest.fail("the FerryMQ master this test needs comes from "
                    "test_a_mixed_group_fails_over_from_an_apache_master_to_a_ferrymq_slave, which did not run or failed")
    apache.wait_ready()
    wait_caught_up(apache.addr, apache.store / "commitlog", ferry.addr, ferry.store / "commitlog",
                   "Apache slave of FerryMQ")
    assert send(apache.addr, TOPIC, b"to the Apache slave").code == ResponseCode.SYSTEM_BUSY
    wait_for(lambda: len(controller_sync_state_set(controller.controller_addr, MIXED)) == 2 or None,
             "FerryMQ master and Apache slave in the sync state set", timeout=30, every=0.1)
