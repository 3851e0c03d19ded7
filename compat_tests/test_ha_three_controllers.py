"""docs/ha.md's "Three brokers under a three-node controller", run as written (issue 24).

Three nodes of Apache RocketMQ 5.5.0's standalone controller (``ControllerStartup``, one DLedger group)
serve the module. Under them run two groups side by side, each as the doc deploys it: three Apache
brokers registered with an Apache name server (the reference), and three FerryMQ brokers registered with
``ferrymq namesrv``. The brokers carry no ``brokerId`` or ``brokerRole``; each is started once the one
before it holds its id, so the registration order is known. The tests check what the doc claims: ids 1,
2 and 3 in that order, the first elected master and registered as id 0, the others as slaves under their
ids; ``mqadmin getSyncStateSet``, given a controller that does not lead, lists the group; a SIGKILLed
master is replaced by a broker of the sync state set, which takes sends, before its heartbeats could time
out (the controllers see its connections close), and comes back as a slave that catches up; with the
controller leader killed, the two controllers left elect another and the brokers follow it; and no
message the official Java producer saw acknowledged is lost (the brokers run ``allAckInSyncStateSet``
with ``SYNC_FLUSH``, as the doc's example).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import pytest
from ferrymq.testing import admin
from ferrymq.wire import headers as h
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request

from tests.ha.helpers import commitlog_bytes, commitlog_range, send, wait_for

from .apache import ApacheBroker, ApacheController, ApacheNamesrv
from .conftest import FerryNamesrv
from .test_ha_controller import (
    SEGMENT,
    ControllerBroker,
    SyncStateSetView,
    acked_bodies,
    controller_sync_state_set,
    sigkill,
    topic_bodies,
)

CLUSTER = "DefaultCluster"
#: each implementation's group; one controller deployment holds both, so the names differ
GROUPS = {"apache": "broker-a-apache", "ferrymq": "broker-a"}
BROKERS = 3
TOPIC = "ThreeNodeTopic"
#: ms: a broker unheard of this long is dead to the controller (its process killed, it is dead at once)
HEARTBEAT_TIMEOUT_MS = 3000
#: quick heartbeats, scans and polls instead of Apache's seconds
CONTROLLER_TIMING = {"scanNotActiveBrokerInterval": 1000, "mappedFileSize": 4 * 1024 * 1024}
BROKER_TIMING = {"brokerHeartbeatInterval": 500, "syncBrokerMetadataPeriod": 1000, "syncControllerMetadataPeriod": 1000,
                 "controllerHeartBeatTimeoutMills": HEARTBEAT_TIMEOUT_MS, "checkSyncStateSetPeriod": 1000}
#: acknowledged sends each producer makes before a kill and through the new master
ACKED_BEFORE, ACKED_AFTER = 10, 10
SEND_INTERVAL_MS = 20


def leader(nodes: list[ApacheController]) -> ApacheController | None:
    """The node the running controllers agree leads, if any."""
    named = set()
    for node in nodes:
        if not node.child.alive():
            continue
        try:
            reply = admin.call(node.addr, request(RequestCode.CONTROLLER_GET_METADATA_INFO), timeout=2)
        except OSError:
            return None
        named.add(h.GetMetaDataResponseHeader.from_ext(reply.ext_fields).controller_leader_address)
    (addr,) = named if len(named) == 1 else (None,)
    return next((node for node in nodes if node.addr == addr and node.child.alive()), None)


def broker_conf(controllers, name: str) -> dict[str, object]:
    """docs/ha.md's broker keys (the test adds its ports, store and timings)."""
    return {"brokerClusterName": CLUSTER, "brokerName": name, "enableControllerMode": "true",
            "controllerAddr": ";".join(node.addr for node in controllers), "mappedFileSizeCommitLog": SEGMENT,
            "allAckInSyncStateSet": "true", "flushDiskType": "SYNC_FLUSH", **BROKER_TIMING}


class Deployment:
    """Both groups, their name servers, and what starts a broker of either again."""

    def __init__(self, controllers: list[ApacheController], home: Path):
        self.controllers = controllers
        self.home = home
        self.namesrv: dict[str, ApacheNamesrv | FerryNamesrv] = {}
        self.brokers: dict[str, list[ApacheBroker | ControllerBroker]] = {impl: [] for impl in GROUPS}

    def launch(self, impl: str, i: int) -> ApacheBroker | ControllerBroker:
        conf = broker_conf(self.controllers, GROUPS[impl])
        if impl == "apache":
            broker = ApacheBroker.launch(self.home / f"apache-{i}", self.namesrv[impl].addr, cluster=CLUSTER,
                                         name=GROUPS[impl], extra={**conf, "brokerId": None})
        else:
            broker = ControllerBroker(self.home / f"ferrymq-{i}", self.namesrv[impl].addr, conf).launch()
        if i < len(self.brokers[impl]):
            self.brokers[impl][i] = broker
        else:
            self.brokers[impl].append(broker)
        return broker

    def stop(self) -> None:
        for brokers in self.brokers.values():
            for broker in brokers:
                broker.stop() if isinstance(broker, ApacheBroker) else broker.kill()
        for ns in self.namesrv.values():
            ns.stop()
        for node in self.controllers:
            node.kill()


def has_identity(broker: ApacheBroker | ControllerBroker) -> bool:
    """Whether the broker holds the id the controller applied (both write ``<store>/brokerIdentity`` then)."""
    if isinstance(broker, ApacheBroker):
        if not broker.child.alive():
            raise RuntimeError(f"Apache broker exited:\n{broker.child.log_tail()}")
    elif broker.proc.poll() is not None:
        raise RuntimeError(f"broker exited with {broker.proc.returncode}:\n{broker.log[-3000:]}")
    return (broker.store / "brokerIdentity").is_file()


@pytest.fixture(scope="module")
def deployment(java5, tmp_path_factory):
    """The three controller nodes, and each group's three brokers started one after the other (the next
    once the one before holds its id), the two groups side by side."""
    home = tmp_path_factory.mktemp("three-node")
    dep = Deployment(ApacheController.launch_nodes(home / "controllers", "ferrymq-three", extra=CONTROLLER_TIMING),
                     home)
    try:
        dep.namesrv["apache"] = ApacheNamesrv.launch(home / "apache-namesrv")
        dep.namesrv["ferrymq"] = FerryNamesrv(home / "ferrymq-namesrv")
        for node in dep.controllers:
            node.wait_ready()
        dep.namesrv["apache"].wait_ready()
        wait_for(lambda: leader(dep.controllers), "a controller leader", timeout=60, every=0.2)
        for i in range(BROKERS):
            started = [dep.launch(impl, i) for impl in GROUPS]
            for broker in started:
                wait_for(lambda broker=broker: has_identity(broker), f"{broker.addr} holds its id", timeout=90,
                         every=0.1)
        yield dep
    finally:
        dep.stop()


def route(dep: Deployment, impl: str) -> dict[int, str]:
    """The group's brokers as its name server lists them, by id."""
    data = admin.cluster_info(dep.namesrv[impl].addr).broker_addr_table.get(GROUPS[impl])
    return dict(data.broker_addrs) if data is not None else {}


def full_route(dep: Deployment, impl: str) -> dict[int, str] | None:
    found = route(dep, impl)
    return found if 0 in found and len(found) == BROKERS else None


def sync_state_set(dep: Deployment, impl: str, mqadmin5) -> SyncStateSetView:
    """``mqadmin getSyncStateSet`` given a controller that does not lead (the tool asks it for the leader)."""
    head = wait_for(lambda: leader(dep.controllers), "a controller leader", timeout=30, every=0.2)
    node = next(n for n in dep.controllers if n is not head and n.child.alive())
    return SyncStateSetView.parse(mqadmin5(dep.namesrv[impl].addr, "getSyncStateSet", "-a", node.addr,
                                           "-b", GROUPS[impl]))


def test_ids_follow_the_registration_order_and_the_first_is_master(deployment, mqadmin5):
    """Ids 1, 2, 3 in start order; the first is master at epoch 1, routed as id 0, the others by their ids."""
    for impl in GROUPS:
        addrs = [b.addr for b in deployment.brokers[impl]]
        listed = wait_for(lambda impl=impl: full_route(deployment, impl), f"{impl}: three brokers, one master",
                          timeout=60)
        # the master registers with the name server as id 0, the slaves under the ids the controller gave them
        assert listed == {0: addrs[0], 2: addrs[1], 3: addrs[2]}, impl
        view = sync_state_set(deployment, impl, mqadmin5)
        assert (view.master_id, view.master_addr, view.master_epoch) == (1, addrs[0], 1), impl
        assert {**view.in_sync, **view.not_in_sync} == {1: addrs[0], 2: addrs[1], 3: addrs[2]}, impl


def test_get_sync_state_set_lists_the_whole_group_in_sync(deployment, mqadmin5):
    """Once the slaves caught up with the master, each one is in the sync state set mqadmin shows. A master
    drops a slave that falls behind for a moment (a loaded machine) and takes it back once it catches up, on
    Apache as on FerryMQ, so the view is read again until it shows the whole group (30 s at most)."""
    for impl in GROUPS:
        first = deployment.brokers[impl][0].addr
        assert send(first, TOPIC, b"before the slaves catch up").code == ResponseCode.SUCCESS, impl
        wait_for(lambda impl=impl: len(controller_sync_state_set(leader_addr(deployment), GROUPS[impl])) == BROKERS
                 or None, f"{impl}: three brokers in sync", timeout=30)
        whole = {i + 1: b.addr for i, b in enumerate(deployment.brokers[impl])}
        deadline = time.monotonic() + 30
        view = sync_state_set(deployment, impl, mqadmin5)
        while view.in_sync != whole and time.monotonic() < deadline:
            time.sleep(1)
            view = sync_state_set(deployment, impl, mqadmin5)
        assert view.in_sync == whole, impl
        assert view.not_in_sync == {}, impl


def leader_addr(dep: Deployment) -> str:
    return wait_for(lambda: leader(dep.controllers), "a controller leader", timeout=30, every=0.2).addr


def fail_over(dep: Deployment, meanwhile: Callable[[], None] = lambda: None) -> dict[str, float]:
    """SIGKILL each group's master; the seconds until the name server routes to another broker of the sync
    state set, which then takes a send. Then ``meanwhile()`` runs, and the killed masters are started
    again: each must come back as a slave under its old id and reach the new master's commit-log end with
    the same bytes."""
    routes = {impl: wait_for(lambda impl=impl: full_route(dep, impl), f"{impl}: a master and two slaves", timeout=60)
              for impl in GROUPS}
    masters = {impl: next(b for b in dep.brokers[impl] if b.addr == routes[impl][0]) for impl in GROUPS}
    in_sync = {impl: wait_for(lambda impl=impl: (ids := controller_sync_state_set(leader_addr(dep), GROUPS[impl]))
                              and len(ids) == BROKERS and ids, f"{impl}: three brokers in sync", timeout=30)
               for impl in GROUPS}
    killed_at = {}
    for impl, master in masters.items():
        sigkill(master)
        killed_at[impl] = time.monotonic()
    took, promoted = {}, {}
    for impl, master in masters.items():
        new = wait_for(lambda impl=impl, old=master.addr: route(dep, impl).get(0) not in (None, old)
                       and route(dep, impl)[0], f"{impl}: another master", timeout=30, every=0.05)
        took[impl] = time.monotonic() - killed_at[impl]
        promoted[impl] = new
        new_id = next(i for i, addr in routes[impl].items() if addr == new)
        assert new_id in in_sync[impl], (impl, new_id, in_sync[impl])
        wait_for(lambda new=new: send(new, TOPIC, b"to the new master").code == ResponseCode.SUCCESS or None,
                 f"{impl}: the new master {new} takes sends", timeout=15)
    meanwhile()
    restarted = {impl: dep.launch(impl, dep.brokers[impl].index(master)) for impl, master in masters.items()}
    for impl, back in restarted.items():
        old_id = dep.brokers[impl].index(back) + 1
        wait_for(lambda impl=impl, back=back, old_id=old_id: route(dep, impl).get(old_id) == back.addr or None,
                 f"{impl}: {back.addr} back as slave {old_id}", timeout=90)
        joined = commitlog_range(promoted[impl])[1]
        end = wait_for(lambda back=back, joined=joined: commitlog_range(back.addr)[1] >= joined
                       and commitlog_range(back.addr)[1], f"{impl}: the rejoined slave reaches {joined}", timeout=30)
        new_master = next(b for b in dep.brokers[impl] if b.addr == promoted[impl])
        assert commitlog_bytes(back.store / "commitlog", 0, end) == \
            commitlog_bytes(new_master.store / "commitlog", 0, end), impl
    return took


ACKED_TOPICS = {"apache": "ThreeNodeAckedApache", "ferrymq": "ThreeNodeAckedFerry"}


def test_failovers_lose_no_acknowledged_message_and_survive_the_controller_leader(deployment, java5,
                                                                                  record_property):
    """The official Java producer sends to each group throughout. Round one: the master is SIGKILLed, then
    the controller leader; the two nodes left elect another leader, and the killed masters, started again,
    rejoin through it. Round two: the master is SIGKILLed again and the new leader replaces it. Each time
    the name server routes to a new master of the sync state set before the master's heartbeats could have
    timed out, and the producer's sends go on through it. At the end every acknowledged body is in the last
    master's commit log, none twice."""
    for impl, topic in ACKED_TOPICS.items():
        for broker in deployment.brokers[impl]:  # the slaves have it too, so a new master routes it at once
            admin.create_topic(broker.addr, topic, 4)
    producers = {impl: java5.spawn("send", "-n", deployment.namesrv[impl].addr, "-t", topic, "-count", "1000000",
                                   "-interval", str(SEND_INTERVAL_MS), "-body", f"java {impl}",
                                   "-group", f"three_node_{impl}")
                 for impl, topic in ACKED_TOPICS.items()}

    def sent_at_least(more: int, what: str) -> None:
        for impl, running in producers.items():
            mark = len(running.result().of("sent")) + more
            wait_for(lambda r=running, mark=mark: len(r.result().of("sent")) >= mark or r.proc.poll() is not None,
                     f"{impl}: {more} sends {what}", timeout=90)
            assert running.proc.poll() is None, running.result().explain()

    bound = HEARTBEAT_TIMEOUT_MS / 1000
    try:
        sent_at_least(ACKED_BEFORE, "before the first kill")
        old_leader = leader(deployment.controllers)
        # the killed masters start again while the two controllers left elect a leader; they rejoin through it
        took = fail_over(deployment, old_leader.kill)
        record_property("failover_s_round_one", took)
        assert all(t <= bound for t in took.values()), (took, bound)
        assert leader(deployment.controllers) not in (None, old_leader)
        sent_at_least(ACKED_AFTER, "through the first new master")

        took = fail_over(deployment)
        record_property("failover_s_round_two", took)
        assert all(t <= bound for t in took.values()), (took, bound)
        sent_at_least(ACKED_AFTER, "through the master the new controller leader elected")
    finally:
        for running in producers.values():
            running.kill()

    for impl, topic in ACKED_TOPICS.items():
        acked = acked_bodies(producers[impl].result(), f"java {impl}", "SEND_OK")
        master_addr = wait_for(lambda impl=impl: full_route(deployment, impl), f"{impl}: a master")[0]
        master = next(b for b in deployment.brokers[impl] if b.addr == master_addr)
        stored = topic_bodies(master.store, commitlog_range(master_addr)[1], topic)
        assert acked and not acked - set(stored), (impl, sorted(acked - set(stored)))
        assert {body: n for body, n in stored.items() if n > 1} == {}, impl
