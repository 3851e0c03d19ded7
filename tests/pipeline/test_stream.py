"""``spark.readStream`` / ``df.writeStream`` with the ``rocketmq`` format: runs of ``availableNow`` queries
to Parquet, restarted from their checkpoint, against a running FerryMQ."""

from __future__ import annotations

import time
import uuid

import pytest

from ferrymq.pipeline.options import OptionError, read_options, stream_options
from ferrymq.pipeline.queues import QueueRef
from ferrymq.pipeline.stream import spread
from ferrymq.sdk import BlockingMQAdmin, BlockingProducer, Message, MessageQueue

from .conftest import make_topic, send
from .test_write import pull_all


def messages(topic: str, n: int, start: int = 0) -> list[Message]:
    return [Message(topic, f"m{i}".encode(), tags="t", keys=f"k{i}") for i in range(start, start + n)]


def test_max_offsets_are_shared_evenly_and_a_short_queue_leaves_its_share_to_the_others():
    a, b, c = (QueueRef("T", "broker-a", i) for i in range(3))
    start = {a: 0, b: 10, c: 5}
    assert spread(start, {a: 100, b: 12, c: 100}, 10) == {a: 4, b: 12, c: 9}
    assert spread(start, {a: 1, b: 10, c: 5}, 10) == {a: 1, b: 10, c: 5}
    assert sum(spread(start, {a: 100, b: 100, c: 100}, 1).values()) == sum(start.values()) + 1


def test_stream_options_are_checked_when_the_query_is_planned():
    with pytest.raises(OptionError, match="commitOffsets: needs consumerGroup"):
        read_options({"nameServer": "ns:1", "topic": "T", "commitOffsets": "true"})
    with pytest.raises(OptionError, match="maxOffsetsPerTrigger: '0' is not a positive"):
        read_options({"nameServer": "ns:1", "topic": "T", "maxOffsetsPerTrigger": "0"})
    with pytest.raises(OptionError, match="endingOffsets: a stream has no end"):
        stream_options({"nameServer": "ns:1", "topic": "T", "endingOffsets": "latest"})


def run_to_parquet(spark, server, tmp_path, **options) -> list[dict]:
    """One availableNow run of the stream into ``tmp_path``/out (checkpoint beside it); its progress
    reports, one per micro-batch."""
    stream = spark.readStream.format("rocketmq").options(nameServer=server.namesrv_addr, **options).load()
    query = (stream.writeStream.format("parquet").option("path", str(tmp_path / "out"))
             .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start())
    assert query.awaitTermination(120), (query.status, query.lastProgress)
    assert query.exception() is None
    return [p for p in query.recentProgress if p["numInputRows"] > 0]


def parquet_ids(spark, tmp_path) -> list[str]:
    return [r.msgId for r in spark.read.parquet(str(tmp_path / "out")).select("msgId").collect()]


def test_a_stream_restarted_from_its_checkpoint_loses_and_repeats_nothing(spark, server, topic, tmp_path):
    first = send(server, messages(topic, 10))
    batches = run_to_parquet(spark, server, tmp_path, topic=topic, maxOffsetsPerTrigger="4")
    assert [b["numInputRows"] for b in batches] == [4, 4, 2]  # maxOffsetsPerTrigger bounds every batch
    second = send(server, messages(topic, 7, start=10))
    batches = run_to_parquet(spark, server, tmp_path, topic=topic, maxOffsetsPerTrigger="4")
    assert [b["numInputRows"] for b in batches] == [4, 3]
    ids = parquet_ids(spark, tmp_path)
    assert sorted(ids) == sorted(s.msg_id for s in first + second)  # each exactly once


def test_queues_added_to_a_topic_and_new_topics_matching_the_pattern_join_from_their_earliest(
        spark, server, tmp_path):
    prefix = f"SparkGrow_{uuid.uuid4().hex[:8]}_"
    grown = f"{prefix}a"
    with BlockingMQAdmin(server.namesrv_addr) as admin:
        admin.create_topic(grown, 1, broker_addr=server.broker_addr)
        admin.wait_for_route(grown, 10.0)
    sent = send(server, messages(grown, 3))
    run_to_parquet(spark, server, tmp_path, topicPattern=prefix + ".*")
    late = make_topic(server).replace("Spark_", prefix)
    with BlockingMQAdmin(server.namesrv_addr) as admin:
        admin.create_topic(grown, 3, broker_addr=server.broker_addr)
        admin.create_topic(late, 2, broker_addr=server.broker_addr)
        admin.wait_for_route(late, 10.0)
        broker = admin.fetch_route(grown).broker_datas[0].broker_name
    with BlockingProducer(f"pipeline_pg_{uuid.uuid4().hex[:8]}", server.namesrv_addr) as producer:
        sent += [producer.send_to_queue(m, MessageQueue(grown, broker, 2)) for m in messages(grown, 2, start=3)]
    sent += send(server, messages(late, 4))
    run_to_parquet(spark, server, tmp_path, topicPattern=prefix + ".*")
    assert sorted(parquet_ids(spark, tmp_path)) == sorted(s.msg_id for s in sent)


def test_commit_offsets_writes_the_group_offsets_consumer_progress_shows(spark, server, topic, tmp_path):
    group = f"spark_job_{uuid.uuid4().hex[:8]}"
    send(server, messages(topic, 6))
    options = {"topic": topic, "consumerGroup": group, "commitOffsets": "true", "maxOffsetsPerTrigger": "4"}
    batches = run_to_parquet(spark, server, tmp_path, **options)
    # Spark commits a batch when it plans the next one: the run's last batch is committed by the next run
    assert len(batches) == 2
    with BlockingMQAdmin(server.namesrv_addr) as admin:
        stats = admin.consume_stats(group, topic)
        assert sum(w.consumer_offset for w in stats.offset_table.values()) == 4
        send(server, messages(topic, 1, start=6))
        run_to_parquet(spark, server, tmp_path, **options)
        stats = admin.consume_stats(group, topic)
    assert sum(w.consumer_offset for w in stats.offset_table.values()) == 6  # the first run's end


def stream_to_topic(spark, server, source: str, target: str, checkpoint) -> None:
    stream = spark.readStream.format("rocketmq").options(nameServer=server.namesrv_addr, topic=source).load()
    query = (stream.select("body", "tags", "keys").writeStream.format("rocketmq")
             .option("nameServer", server.namesrv_addr).option("topic", target)
             .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert query.awaitTermination(120), (query.status, query.lastProgress)
    assert query.exception() is None


def test_write_stream_sends_each_row_once_and_a_batch_run_again_under_the_same_msg_ids(
        spark, server, topic, tmp_path):
    target = make_topic(server)
    send(server, messages(topic, 8))
    stream_to_topic(spark, server, topic, target, tmp_path / "checkpoint")
    got = pull_all(server, target)
    assert sorted(m.body for m in got) == sorted(f"m{i}".encode() for i in range(8))
    assert {m.tags for m in got} == {"t"} and len({m.msg_id for m in got}) == 8
    first_ids = {m.body: m.msg_id for m in got}
    # as if the query had stopped after sending its batch and before logging it done: a restart runs it again
    for name in ("0", ".0.crc"):  # the batch's entry in the commit log and its checksum
        (tmp_path / "checkpoint" / "commits" / name).unlink()
    stream_to_topic(spark, server, topic, target, tmp_path / "checkpoint")
    again = pull_all(server, target)
    assert len(again) == 16 and all(first_ids[m.body] == m.msg_id for m in again)


def test_a_running_stream_on_a_processing_time_trigger_takes_messages_sent_while_it_runs(spark, server, topic):
    """Micro-batches one after another (not availableNow): what arrives while the query runs reaches the
    sink in later batches, each message once."""
    seen: list[str] = []
    stream = spark.readStream.format("rocketmq").options(nameServer=server.namesrv_addr, topic=topic).load()
    query = (stream.writeStream.foreachBatch(lambda df, _: seen.extend(r.msgId for r in df.select("msgId").collect()))
             .trigger(processingTime="200 milliseconds").start())
    try:
        sent = send(server, messages(topic, 3))
        deadline = time.monotonic() + 60
        while len(seen) < 3 and time.monotonic() < deadline and query.isActive:
            time.sleep(0.1)
        before_more = list(seen)  # what the running query took before the later messages existed
        sent += send(server, messages(topic, 4, start=3))
        while len(seen) < 7 and time.monotonic() < deadline and query.isActive:
            time.sleep(0.1)
        assert query.exception() is None
    finally:
        query.stop()
    assert sorted(before_more) == sorted(s.msg_id for s in sent[:3])
    assert sorted(seen) == sorted(s.msg_id for s in sent)  # the later four in later batches, each once
