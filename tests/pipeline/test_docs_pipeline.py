"""docs/pipeline.md's examples run as written, in order, in the suite's Spark session (a session per
example would cost 10-20 s each), with the documented address pointed at the test server."""

from __future__ import annotations

import re
from pathlib import Path

from ferrymq.sdk import BlockingMQAdmin, Message

from .conftest import send

DOC = Path(__file__).resolve().parents[2] / "docs" / "pipeline.md"
DOC_ADDR = "127.0.0.1:9876"


def test_the_examples_run_in_order(spark, server):
    examples = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), flags=re.MULTILINE | re.DOTALL)
    assert len(examples) >= 5 and all("spark" in code for code in examples)
    topic = "DemoTopic"
    with BlockingMQAdmin(server.namesrv_addr) as admin:
        admin.create_topic(topic, 2, broker_addr=server.broker_addr)
        admin.wait_for_route(topic, 10.0)
    send(server, [Message(topic, f"demo {i}".encode(), tags="TagA") for i in range(3)])
    namespace: dict = {}
    for code in examples:
        exec(compile(code.replace(DOC_ADDR, server.namesrv_addr), str(DOC), "exec"), namespace)
    assert namespace["spark"] is spark  # the examples' sessions are the running one
    archived = spark.read.parquet(f"{namespace['archive']}/data").collect()
    assert len(archived) == 3 and {r.body for r in archived} == {b"demo 0", b"demo 1", b"demo 2"}
    bodies = {r.body for r in spark.read.format("rocketmq").options(nameServer=server.namesrv_addr, topic=topic)
              .load().collect()}
    assert {b"order 1", b"order 2", b"demo 0"} <= bodies
