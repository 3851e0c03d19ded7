"""The official Java client against the ``ferrymq`` pytest fixture, as a Java service's test suite written
in pytest would use it: the plugin comes from the installed package's entry point, the client is pointed at
the fixture's name server and nothing else."""

from __future__ import annotations

import uuid

from .clients import Client


def test_the_official_java_client_sends_and_consumes_through_the_fixture(ferrymq, java_scenarios):
    """A topic and a group made with the fixture's helpers; the Java producer's 5 messages reach its
    push consumer."""
    tag = uuid.uuid4().hex[:8]
    topic = ferrymq.create_topic(f"FixtureJava_{tag}", queues=2)
    group = ferrymq.create_group(f"fixture_java_{tag}", retry_max_times=2)
    client = Client(f"java-{java_scenarios.version}", java_scenarios)
    sent = client("send", n=ferrymq.namesrv_addr, t=topic, count=5, body="hello").check()
    assert {e["status"] for e in sent.of("sent")} == {"SEND_OK"}, sent.explain()
    got = client("consume", n=ferrymq.namesrv_addr, t=topic, g=group, count=5, timeout=45).check()
    assert sorted(e["body"] for e in got.of("received")) == [f"hello #{i}" for i in range(5)], got.explain()
    assert {e["brokerName"] for e in sent.of("sent")} == {ferrymq.broker_name}, sent.explain()
