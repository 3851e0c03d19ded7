"""A broker in controller mode that no controller has given a role is fenced: it refuses sends and registers
nothing with the name servers, not even when a topic is created on it (it would register under a brokerId
the controller never gave, 0 with the defaults: clients would route their sends to it as the master)."""

from __future__ import annotations

import time

from ferrymq.testing import FerryMQServer, admin
from ferrymq.testing.ports import free_port
from ferrymq.wire.codes import ResponseCode

from .helpers import BrokerProcess, send, wait_for

FENCED = "fenced-group"


def answer(broker_addr: str, body: bytes) -> int | None:
    """The code a send is answered with; None while the broker does not listen yet."""
    try:
        return send(broker_addr, "FencedTopic", body).code
    except OSError:
        return None


def listed(namesrv_addr: str) -> dict[int, str]:
    data = admin.cluster_info(namesrv_addr).broker_addr_table.get(FENCED)
    return dict(data.broker_addrs) if data is not None else {}


def test_a_broker_without_a_role_registers_nothing_even_when_a_topic_changes(tmp_path):
    with FerryMQServer(tmp_path / "namesrv") as ns:
        nobody = f"127.0.0.1:{free_port()}"  # no controller listens there: the broker never gets a role
        fenced = BrokerProcess(tmp_path / "fenced", ns.namesrv_addr, {
            "brokerName": FENCED, "enableControllerMode": "true", "controllerAddr": nobody}).launch()
        try:
            wait_for(lambda: answer(fenced.addr, b"before a role") == ResponseCode.SYSTEM_BUSY,
                     "the fenced broker refuses sends", timeout=30, every=0.2)
            admin.create_topic(fenced.addr, "FencedTopic", 4)
            deadline = time.monotonic() + 2.0  # a registration goes out on the next reactor turn
            while time.monotonic() < deadline:
                assert listed(ns.namesrv_addr) == {}
                time.sleep(0.1)
            assert answer(fenced.addr, b"still without a role") == ResponseCode.SYSTEM_BUSY
        finally:
            fenced.kill()
