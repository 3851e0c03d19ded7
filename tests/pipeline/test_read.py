"""``spark.read.format("rocketmq")`` against a running FerryMQ: queues as partitions, offset ranges, the
broker-side filters, and bad options failing at ``load()``."""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pytest
from pyspark.errors import AnalysisException

from ferrymq.pipeline import reader as reader_module
from ferrymq.pipeline.options import read_options
from ferrymq.pipeline.rows import ARROW_SCHEMA
from ferrymq.pipeline.source import RocketMQReader
from ferrymq.sdk import Message

from .conftest import send


def reader(spark, server, topic_name, **options):
    base = {"nameServer": server.namesrv_addr, "topic": topic_name}
    return spark.read.format("rocketmq").options(**{**base, **options})


def numbered(topic: str, n: int, start: int = 0) -> list[Message]:
    out = []
    for i in range(start, start + n):
        msg = Message(topic, f"m{i}".encode(), tags="even" if i % 2 == 0 else "odd", keys=[f"k{i}", "all"])
        msg.put_user_property("n", str(i))
        out.append(msg)
    return out


def test_a_read_returns_every_message_once_with_its_queue_offset_and_fields(spark, server, topic):
    sent = send(server, numbered(topic, 12))
    df = reader(spark, server, topic).load()
    assert df.rdd.getNumPartitions() == 2  # one per queue
    rows = df.collect()
    by_id = {r.msgId: r for r in rows}
    assert len(rows) == 12 and set(by_id) == {s.msg_id for s in sent}
    for i, s in enumerate(sent):
        row = by_id[s.msg_id]
        assert (row.topic, row.broker, row.queueId, row.queueOffset) == (
            topic, s.message_queue.broker_name, s.message_queue.queue_id, s.queue_offset)
        tag = "even" if i % 2 == 0 else "odd"
        assert (row.body, row.tags, row.keys, row.properties["n"]) == (f"m{i}".encode(), tag, f"k{i} all", str(i))
        assert row.storeTimestamp >= row.bornTimestamp and row.reconsumeTimes == 0


def test_the_reader_yields_arrow_record_batches_of_whole_pulls_gathered_to_batch_rows(server, topic, monkeypatch):
    send(server, numbered(topic, 10))
    monkeypatch.setattr(reader_module, "BATCH_ROWS", 3)
    plan = RocketMQReader(read_options({"nameServer": server.namesrv_addr, "topic": topic, "pullBatchSize": "2"}))
    total = 0
    for partition in plan.partitions():
        batches = list(plan.read(partition))
        assert all(isinstance(b, pa.RecordBatch) and b.schema == ARROW_SCHEMA for b in batches)
        # pulls of 2 gathered until they reach 3 rows: batches of 4, then what is left
        n = partition.range.end - partition.range.start
        assert [b.num_rows for b in batches] == [4] * (n // 4) + ([n % 4] if n % 4 else [])
        total += n
    assert total == 10


def test_offsets_json_bounds_each_queue(spark, server, topic):
    sent = send(server, numbered(topic, 10))
    broker = sent[0].message_queue.broker_name
    starting = json.dumps({topic: {broker: {"0": 1, "1": -2}}})
    ending = json.dumps({topic: {broker: {"0": 3}}})  # queue 1 ends at its latest offset
    rows = reader(spark, server, topic, startingOffsets=starting, endingOffsets=ending).load().collect()
    expected = {(s.message_queue.queue_id, s.queue_offset) for s in sent
                if s.message_queue.queue_id == 1 or 1 <= s.queue_offset < 3}
    assert {(r.queueId, r.queueOffset) for r in rows} == expected


def test_latest_start_reads_nothing_and_a_timestamp_start_reads_what_came_after(spark, server, topic):
    send(server, numbered(topic, 4))
    assert reader(spark, server, topic, startingOffsets="latest").load().count() == 0
    time.sleep(0.05)
    since = int(time.time() * 1000)
    time.sleep(0.05)
    send(server, numbered(topic, 4, start=4))
    rows = reader(spark, server, topic, startingTimestamp=str(since)).load().collect()
    assert sorted(r.body for r in rows) == [b"m4", b"m5", b"m6", b"m7"]


def test_tag_and_sql92_filters_run_on_the_broker(spark, server, topic):
    send(server, numbered(topic, 10))
    tagged = reader(spark, server, topic, subExpression="odd").load().collect()
    assert sorted(r.body for r in tagged) == [b"m1", b"m3", b"m5", b"m7", b"m9"]
    selected = reader(spark, server, topic, sql92="n >= 4 AND n < 7", pullBatchSize="2").load().collect()
    assert sorted(r.body for r in selected) == [b"m4", b"m5", b"m6"]


def test_a_topic_pattern_reads_every_matching_topic(spark, server, topic):
    send(server, numbered(topic, 3))
    rows = spark.read.format("rocketmq").option("nameServer", server.namesrv_addr) \
        .option("topicPattern", topic[:-3] + ".*").load().collect()
    assert {r.topic for r in rows} == {topic} and len(rows) == 3


@pytest.mark.parametrize("options, message", [
    ({"topic": "NoSuchTopic_x"}, "rocketmq option topic: topic 'NoSuchTopic_x' does not exist"),
    ({"startingOffsets": '{"T": [1, 2]}'}, "rocketmq option startingOffsets: malformed offsets JSON"),
    ({"nameServer": "127.0.0.1:1"}, "rocketmq option nameServer: cannot reach the name server at 127.0.0.1:1"),
])
def test_bad_options_fail_at_load_naming_the_option(spark, server, topic, options, message):
    with pytest.raises(AnalysisException, match="PYTHON_DATA_SOURCE_ERROR") as caught:
        reader(spark, server, topic, **options).load()
    assert message in str(caught.value)


def test_offsets_json_naming_a_queue_the_topic_lacks_fails_at_planning(spark, server, topic):
    with pytest.raises(Exception, match="rocketmq option startingOffsets: queue .*/9 is not a readable queue"):
        reader(spark, server, topic, startingOffsets=json.dumps({topic: {"broker-a": {"9": 0}}})).load().collect()
