"""The client harnesses against Apache RocketMQ itself: proves the scenario programs and the Apache
fixtures before issue 4 points the same scenarios at FerryMQ's broker.
"""

from __future__ import annotations

import uuid

import pytest


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:8]}"


def test_java_route(apache_broker, apache_namesrv, java_scenarios):
    route = java_scenarios("route", "-n", apache_namesrv.addr, "-t", "TBW102").check().one("route")["route"]
    (broker,) = route["brokerDatas"]
    assert broker["brokerName"] == apache_broker.name
    assert broker["brokerAddrs"] == {"0": apache_broker.addr}


def test_java_send_then_consume(apache_broker, apache_namesrv, java_scenarios):
    topic, group = _unique("JavaTopic"), _unique("java_group")
    sent = java_scenarios("send", "-n", apache_namesrv.addr, "-t", topic, "-count", "3", "-tag", "TagA",
                          "-body", "java").check()
    assert [e["status"] for e in sent.of("sent")] == ["SEND_OK"] * 3
    got = java_scenarios("consume", "-n", apache_namesrv.addr, "-t", topic, "-g", group, "-count", "3",
                         "-timeout", "60000").check()
    assert sorted(e["body"] for e in got.of("received")) == [f"java #{i}" for i in range(3)]
    assert {e["msgId"] for e in got.of("received")} == {e["msgId"] for e in sent.of("sent")}


def test_go_send_then_consume(apache_broker, apache_namesrv, go_harness):
    topic, group = _unique("GoTopic"), _unique("go_group")
    sent = go_harness("send", "-n", apache_namesrv.addr, "-t", topic, "-count", "3", "-tag", "TagA",
                      "-body", "go").check()
    assert len(sent.of("sent")) == 3
    got = go_harness("consume", "-n", apache_namesrv.addr, "-t", topic, "-g", group, "-count", "3",
                     "-timeout", "60s").check()
    assert sorted(e["body"] for e in got.of("received")) == [f"go #{i}" for i in range(3)]
    assert all(e["tags"] == "TagA" for e in got.of("received"))


@pytest.mark.parametrize("java_clients", ["5.5.0"], indirect=True, ids=["java-5.5.0"])
def test_java_sends_go_consumes(apache_broker, apache_namesrv, java_scenarios, go_harness):
    topic = _unique("CrossTopic")
    java_scenarios("send", "-n", apache_namesrv.addr, "-t", topic, "-count", "2", "-keys", "K1",
                   "-body", "cross").check()
    got = go_harness("consume", "-n", apache_namesrv.addr, "-t", topic, "-g", _unique("cross_group"),
                     "-count", "2", "-timeout", "60s").check()
    assert sorted(e["body"] for e in got.of("received")) == ["cross #0", "cross #1"]
    assert all(e["keys"] == "K1" for e in got.of("received"))


SEND_MODES = ("sync", "async", "oneway", "batch")


def test_java_send_modes_then_consume_orderly(apache_broker, apache_namesrv, java_scenarios):
    topic = _unique("JavaModes")
    for mode in SEND_MODES:
        done = java_scenarios("send", "-n", apache_namesrv.addr, "-t", topic, "-count", "2", "-mode", mode,
                              "-body", mode).check().one("done")
        assert (done["sent"], done["mode"]) == (2, mode)
    got = java_scenarios("consume", "-n", apache_namesrv.addr, "-t", topic, "-g", _unique("java_orderly"),
                         "-count", "8", "-orderly", "true", "-timeout", "60000").check()
    assert sorted(e["body"] for e in got.of("received")) == sorted(f"{m} #{i}" for m in SEND_MODES for i in range(2))


def test_go_send_modes_then_consume_broadcasting(apache_broker, apache_namesrv, go_harness):
    topic = _unique("GoModes")
    for mode in SEND_MODES:
        done = go_harness("send", "-n", apache_namesrv.addr, "-t", topic, "-count", "2", "-mode", mode,
                          "-body", mode).check().one("done")
        assert (done["sent"], done["mode"]) == (2, mode)
    got = go_harness("consume", "-n", apache_namesrv.addr, "-t", topic, "-g", _unique("go_bcast"),
                     "-count", "8", "-model", "broadcasting", "-timeout", "60s").check()
    assert sorted(e["body"] for e in got.of("received")) == sorted(f"{m} #{i}" for m in SEND_MODES for i in range(2))
