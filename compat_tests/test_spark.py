"""Issue 25: the ``rocketmq`` PySpark data source against Apache RocketMQ 5.5.0 and FerryMQ, checked with
the official Java client 5.5.0: a batch read holds exactly what the Java consumer receives, rows written
from Spark reach the Java consumer with their tags, keys and properties, a SQL92 read returns exactly
the rows the broker's filter matches, and a restarted stream reads each message once and writes back its
group's offsets. One Spark session (the suite's ``spark`` fixture) serves both
servers, and one Java consumer per server checks both directions (a push consumer's first rebalance on
Apache takes seconds).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass

import pytest

from .test_advanced_features import SQL_CASES, sql_spec
from .test_official_clients import WAIT, fresh, write_spec

pytest.importorskip("pyspark", reason="the spark extra is not installed (make installs it)")

from pyspark.sql import DataFrame, functions as F  # noqa: E402


def create_topic(server, topic: str, queues: int = 2) -> None:
    from ferrymq.sdk import BlockingMQAdmin

    with BlockingMQAdmin(server.namesrv_addr) as admin:
        admin.create_topic(topic, queues, broker_addr=server.broker_addr)
        admin.wait_for_route(topic, 30.0)


def read(spark, server, topic: str, **options: str) -> DataFrame:
    return spark.read.format("rocketmq").options(nameServer=server.namesrv_addr, topic=topic, **options).load()


@dataclass
class Exchange:
    """A topic holding messages from both sides, and what the Java consumer received of it."""

    topic: str
    java_spec: list[dict]
    spark_rows: list[tuple]
    received: list[dict]


@pytest.fixture(scope="module")
def exchange(server, java5, spark, tmp_path_factory) -> Exchange:
    """Ten messages from the Java producer (tags, keys, user properties; one body compressed) and ten rows
    written by Spark from two tasks (tags, keys as an array, a property map) on a two-queue topic, then one
    Java push consumer of a new group reading all of them."""
    topic, group = fresh("Spark")
    create_topic(server, topic)
    spec = [{"body": f"java-{i}", "tag": f"Tag{i % 3}", "keys": f"key-{i} order-{i // 3}", "props": {"i": str(i)}}
            for i in range(9)]
    # over the Java producer's 4 KiB threshold: stored compressed, read back inflated
    spec.append({"body": "java-big-" + "x" * 6000, "tag": "Big", "keys": "big", "props": {"i": "9"}})
    java5("send", "-n", server.namesrv_addr, "-t", topic, "-spec",
          write_spec(tmp_path_factory.mktemp("spark"), spec)).check()
    rows = [(f"spark-{i}", f"W{i % 2}", [f"wk-{i}", "spark"], {"i": str(i), "origin": "spark"}) for i in range(10)]
    df = spark.createDataFrame(rows, "body STRING, tags STRING, keys ARRAY<STRING>, properties MAP<STRING, STRING>")
    df.repartition(2).write.format("rocketmq").options(nameServer=server.namesrv_addr, topic=topic) \
        .mode("append").save()
    received = java5("consume", "-n", server.namesrv_addr, "-t", topic, "-g", group, "-count",
                     str(len(spec) + len(rows)), "-timeout", str(WAIT * 1000), "-linger", "1000").check()
    return Exchange(topic, spec, rows, received.of("received"))


def test_a_batch_read_holds_exactly_what_the_java_consumer_receives(server, spark, exchange):
    """The Spark read and the Java consumer see the same messages: msgId, broker, queue and queue offset,
    body, tags, keys and the user property of each."""
    java = {(e["msgId"], e["brokerName"], e["queueId"], e["queueOffset"], e["body"], e["tags"], e["keys"],
             e["properties"]["i"]) for e in exchange.received}
    rows = read(spark, server, exchange.topic).collect()
    ours = {(r.msgId, r.broker, r.queueId, r.queueOffset, r.body.decode(), r.tags, r.keys, r.properties["i"])
            for r in rows}
    assert len(rows) == len(exchange.java_spec) + len(exchange.spark_rows) and ours == java


def test_rows_written_from_spark_reach_the_java_consumer_intact(exchange):
    """Each row Spark wrote is received once by the Java consumer, with its tags, keys and properties,
    under the msgId (UNIQ_KEY) the write gave it."""
    got = {e["body"]: e for e in exchange.received if e["body"].startswith("spark-")}
    assert sorted(got) == sorted(r[0] for r in exchange.spark_rows)
    for body, tags, keys, props in exchange.spark_rows:
        event = got[body]
        assert (event["tags"], event["keys"]) == (tags, " ".join(keys))
        assert {k: event["properties"][k] for k in props} == props
        assert event["msgId"] == event["properties"]["UNIQ_KEY"] and len(event["msgId"]) == 32
    assert len({e["msgId"] for e in got.values()}) == len(exchange.spark_rows)


#: SQL92 cases of the official clients' filter scenario (test_advanced_features): comparison, range, IN,
#: NULL, a comparison that is unknown for every message, TAGS and CONTAINS
SPARK_SQL_CASES = {expr: SQL_CASES[expr] for expr in (
    "a > 5", "a BETWEEN 5 AND 15", "s IN ('apple', 'cherry', 'date')", "a IS NULL", "b > 2",
    "TAGS = 'TagA' AND a > 1", "s CONTAINS 'an'")}


def test_a_sql92_read_returns_exactly_the_rows_the_broker_filter_matches(server, java5, spark, tmp_path):
    """Seven SQL92 expressions of the official clients' filter scenario, each as one ``sql92`` read (all in
    one Spark job): every read returns exactly the messages its expression selects."""
    topic, _ = fresh("SparkSql")
    create_topic(server, topic)
    java5("send", "-n", server.namesrv_addr, "-t", topic, "-spec", write_spec(tmp_path, sql_spec())).check()
    cases = SPARK_SQL_CASES
    reads = [read(spark, server, topic, sql92=expr).select(F.lit(expr).alias("expr"), "body") for expr in cases]
    got: dict[str, set[int]] = {expr: set() for expr in cases}
    for row in functools.reduce(DataFrame.unionByName, reads).collect():
        got[row.expr].add(int(row.body.decode().removeprefix("sql-")))
    assert got == cases, json.dumps({e: sorted(got[e]) for e in cases if got[e] != cases[e]})


def test_a_stream_restarted_from_its_checkpoint_reads_each_message_once_and_commits_the_group(
        server, spark, tmp_path):
    """Two availableNow runs of a stream to Parquet, 10 then 5 more messages, at most 4 offsets a batch:
    the Parquet output holds each message of the topic once, and the group's offsets (``commitOffsets``)
    are the end of the second run's first batch, the last one Spark committed (it commits a batch when it
    plans the next)."""
    from ferrymq.sdk import BlockingMQAdmin

    topic, group = fresh("SparkStream")
    create_topic(server, topic)

    def write(first: int, n: int) -> None:
        spark.createDataFrame([(f"s-{i}",) for i in range(first, first + n)], "body STRING") \
            .write.format("rocketmq").options(nameServer=server.namesrv_addr, topic=topic).mode("append").save()

    def run() -> list[int]:
        stream = spark.readStream.format("rocketmq").options(
            nameServer=server.namesrv_addr, topic=topic, maxOffsetsPerTrigger="4", consumerGroup=group,
            commitOffsets="true").load()
        query = stream.writeStream.format("parquet").option("path", str(tmp_path / "out")) \
            .option("checkpointLocation", str(tmp_path / "checkpoint")).trigger(availableNow=True).start()
        assert query.awaitTermination(WAIT) and query.exception() is None
        return [p["numInputRows"] for p in query.recentProgress if p["numInputRows"]]

    write(0, 10)
    assert run() == [4, 4, 2]
    write(10, 5)
    assert run() == [4, 1]
    archived = spark.read.parquet(str(tmp_path / "out")).collect()
    assert sorted(r.msgId for r in archived) == sorted(r.msgId for r in read(spark, server, topic).collect())
    assert sorted(r.body for r in archived) == sorted(f"s-{i}".encode() for i in range(15))
    with BlockingMQAdmin(server.namesrv_addr) as admin:
        stats = admin.consume_stats(group, topic)
    assert sum(w.consumer_offset for w in stats.offset_table.values()) == 14
