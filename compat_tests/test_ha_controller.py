"""Brokers under Apache RocketMQ 5.5.0's controller (controller mode, issue 24, docs/ha.md).

One Apache name server with its embedded controller (``enableControllerInNamesrv``, a one-node DLedger
group) serves the module. Each scenario runs on a group of Apache brokers first, then on a group of
FerryMQ brokers under the same controller: the brokers get their ids from the controller, one is
elected master, and mqadmin (getSyncStateSet asks the controller, getBrokerEpoch the brokers) prints
the same for both groups.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pytest
from ferrymq.testing import admin

from tests.ha.helpers import BrokerProcess, wait_for

from .apache import ApacheBroker, ApacheNamesrv
from .processes import LOOPBACK, free_port

#: quick heartbeats and metadata polls instead of Apache's seconds
CONTROLLER_TIMING = {"brokerHeartbeatInterval": 500, "syncBrokerMetadataPeriod": 1000,
                     "controllerHeartBeatTimeoutMills": 3000, "checkSyncStateSetPeriod": 1000}
SEGMENT = 64 * 1024 * 1024
CLUSTER = "CtlCluster"
GROUPS = {"apache": "ctl-apache", "ferrymq": "ctl-ferry"}


@pytest.fixture(scope="module")
def controller(java5, tmp_path_factory):
    """Apache's name server with its controller; ``.controller_addr`` is the controller's (DLedger) port."""
    home = tmp_path_factory.mktemp("controller")
    peer_port = free_port()
    ns = ApacheNamesrv.launch(home, extra={
        "enableControllerInNamesrv": "true", "controllerDLegerGroup": "ferrymq-ctl",
        "controllerDLegerPeers": f"n0-{LOOPBACK}:{peer_port}", "controllerDLegerSelfId": "n0",
        "controllerStorePath": home / "controller-store", "mappedFileSize": 4 * 1024 * 1024,
        "scanNotActiveBrokerInterval": 1000, "notifyBrokerRoleChanged": "true"})
    ns.wait_ready()
    ns.controller_addr = f"{LOOPBACK}:{peer_port}"
    yield ns
    ns.stop()


def controller_mode(controller, name: str) -> dict[str, object]:
    return {"brokerClusterName": CLUSTER, "brokerName": name, "enableControllerMode": "true",
            "controllerAddr": controller.controller_addr, "mappedFileSizeCommitLog": SEGMENT, **CONTROLLER_TIMING}


class ControllerBroker(BrokerProcess):
    """A FerryMQ broker whose id the controller assigns: ready once the name server lists its address."""

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
                                          controller_mode(controller, GROUPS["ferrymq"])).start())
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
