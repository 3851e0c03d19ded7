"""``df.write.format("rocketmq")``: rows sent as messages (read back with the pull consumer), batched per
task, under UNIQ_KEYs that a retried task sends again unchanged."""

from __future__ import annotations

import time

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException

from ferrymq.pipeline.options import WriteOptions
from ferrymq.pipeline.writer import SendSettings, send_partition
from ferrymq.sdk import BlockingPullConsumer, PullStatus

from .conftest import make_topic


def pull_all(server, topic: str) -> list:
    """Every message of the topic, by queue then offset."""
    consumer = BlockingPullConsumer("pipeline_check", server.namesrv_addr)
    consumer.start()
    try:
        out = []
        for mq in consumer.fetch_subscribe_queues(topic):
            offset = 0
            while True:
                result = consumer.pull(mq, "*", offset, 32)
                if result.status is not PullStatus.FOUND:
                    break
                out += result.messages
                offset = result.next_begin_offset
        return out
    finally:
        consumer.shutdown()


def test_rows_become_messages_with_tags_keys_and_properties(spark, server, topic):
    rows = [(f"body-{i}".encode(), f"T{i % 2}", f"k{i} shared", {"n": str(i), "kind": "spark"}) for i in range(20)]
    df = spark.createDataFrame(rows, "body BINARY, tags STRING, keys STRING, properties MAP<STRING, STRING>")
    df.repartition(2).write.format("rocketmq").option("nameServer", server.namesrv_addr) \
        .option("topic", topic).mode("append").save()
    got = {m.body: m for m in pull_all(server, topic)}
    assert sorted(got) == sorted(r[0] for r in rows)
    for body, tags, keys, props in rows:
        msg = got[body]
        assert (msg.tags, " ".join(msg.keys)) == (tags, keys)
        assert {k: msg.properties[k] for k in props} == props
    assert len({m.msg_id for m in got.values()}) == 20


def test_a_topic_column_routes_each_row_and_string_bodies_are_utf8(spark, server, topic):
    other = make_topic(server)
    rows = [("é-1", topic), ("plain", other), ("second", topic), ("no topic: the option's", None)]
    df = spark.createDataFrame(rows, "body STRING, topic STRING").coalesce(1)
    df.write.format("rocketmq").option("nameServer", server.namesrv_addr).option("topic", other) \
        .mode("append").save()
    assert sorted(m.body for m in pull_all(server, topic)) == [b"second", "é-1".encode()]
    assert sorted(m.body for m in pull_all(server, other)) == [b"no topic: the option's", b"plain"]


def test_a_retried_task_sends_the_same_msg_ids(server, topic):
    """What Spark does when a task fails and runs again: same write, same partition, same rows."""
    batch = pa.RecordBatch.from_pydict({"body": [b"a", b"b", b"c"]})
    settings = SendSettings(WriteOptions(server.namesrv_addr, topic, batch_size=2), "0123456789ABCDEF")
    assert send_partition(settings, 3, iter([batch])) == 3
    assert send_partition(settings, 3, iter([batch])) == 3
    sent = pull_all(server, topic)
    ids = sorted((m.msg_id, m.body) for m in sent)
    assert len(ids) == 6 and ids[::2] == ids[1::2]  # each id twice, with the same body
    assert {m.msg_id for m in sent} == {f"0123456789ABCDEF000003{i:010X}" for i in range(3)}
    other = SendSettings(settings.options, "FEDCBA9876543210")
    send_partition(other, 3, iter([batch]))
    assert len({m.msg_id for m in pull_all(server, topic)}) == 6  # another write: new ids


def test_a_delay_column_sends_the_row_delayed(server, topic):
    batch = pa.RecordBatch.from_pydict({"body": [b"now", b"later"], "delay": [0, 1]})  # level 1: one second
    send_partition(SendSettings(WriteOptions(server.namesrv_addr, topic), "00000000000000AA"), 0, iter([batch]))
    deadline = time.monotonic() + 15
    while (got := {m.body: m for m in pull_all(server, topic)}).keys() != {b"now", b"later"}:
        assert time.monotonic() < deadline, f"saw only {sorted(got)}"
        time.sleep(0.2)
    later = got[b"later"]
    assert later.properties["DELAY"] == "1" and later.store_timestamp - later.born_timestamp >= 900
    assert got[b"now"].store_timestamp - got[b"now"].born_timestamp < 900


@pytest.mark.parametrize("schema, problem", [
    ("value BINARY", "rocketmq write: the DataFrame needs a body column"),
    ("body BINARY, colour STRING", "rocketmq write: column(s) colour cannot be written"),
])
def test_a_frame_the_write_cannot_send_fails_at_save(spark, server, topic, schema, problem):
    df = spark.createDataFrame([], schema)
    with pytest.raises(AnalysisException, match="PYTHON_DATA_SOURCE_ERROR") as caught:
        df.write.format("rocketmq").option("nameServer", server.namesrv_addr).option("topic", topic) \
            .mode("append").save()
    assert problem in str(caught.value)


@pytest.mark.parametrize("options, problem", [
    ({}, "rocketmq option topic: required"),
    ({"topic": "T", "nameServer": "127.0.0.1:1"}, "rocketmq option nameServer: cannot reach the name server"),
])
def test_a_write_without_a_topic_or_a_name_server_fails_at_save(spark, server, options, problem):
    df = spark.createDataFrame([(b"x",)], "body BINARY")
    with pytest.raises(AnalysisException, match="PYTHON_DATA_SOURCE_ERROR") as caught:
        df.write.format("rocketmq").options(**{"nameServer": server.namesrv_addr, **options}).mode("append").save()
    assert problem in str(caught.value)
