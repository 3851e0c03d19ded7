"""The ``rocketmq`` Spark data source beside the raw ``sdk_py`` clients it is built on, in one run.

Run: ``.venv/bin/python -m benchmarks.spark_bench [--quick | --full] [--rounds N] [--messages N] [--out FILE]``.

One ``ferrymq standalone`` (ASYNC_FLUSH, temp store, loopback) and one local Spark session (``local[2]``,
:func:`ferrymq.pipeline.session.local_session`) are driven in rounds. A topic of ``messages`` 1 KiB
messages over 8 queues is filled once; each round then runs, in an order that flips every round so drift
of the shared machine favours neither side:

* **raw pull**: one ``sdk_py`` pull consumer reading the topic queue after queue, 32 messages a pull;
* **source read**: ``spark.read.format("rocketmq")`` of the whole topic into Spark's ``noop`` sink (every
  row and column materialized, nothing written), from ``load()`` to the end of the job;
* **raw batch send**: one ``sdk_py`` producer sending ``messages`` 1 KiB messages to a fresh topic in
  ``SEND_BATCH_MESSAGE`` requests of 128, one after the other;
* **source write**: ``df.write.format("rocketmq")`` of as many 1 KiB rows (``spark.range``, 2 partitions)
  to a fresh topic, from ``save()`` to its end;
* **streaming latency**: a ``spark.readStream`` query with back-to-back micro-batches and a
  ``foreachBatch`` sink; messages sent one at a time, a few tens of ms apart, each timed from its
  ``bornTimestamp`` to when its batch reaches the sink on the driver.

Figures are medians over the rounds, with their range; the ratios are taken within each round first.
Targets (issue 25): source read >= 0.5x raw pull, source write >= 0.5x raw batch send.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.rounds import run_rounds, spread
from ferrymq.sdk import BlockingMQAdmin, BlockingProducer, BlockingPullConsumer, Message, PullStatus
from ferrymq.testing import FerryMQServer

TARGET_READ = 0.5
TARGET_WRITE = 0.5
PULL_BATCH = 32
SEND_BATCH = 128


@dataclass(frozen=True)
class Plan:
    rounds: int = 3
    messages: int = 100_000
    message_size: int = 1024
    queues: int = 8
    latency_messages: int = 40
    latency_gap_s: float = 0.05

    @classmethod
    def quick(cls, **overrides) -> Plan:
        return replace(cls(), **overrides)

    @classmethod
    def full(cls, **overrides) -> Plan:
        return replace(cls(messages=1_000_000), **overrides)


@dataclass
class Round:
    order: list[str]
    figures: dict[str, float] = field(default_factory=dict)
    loadavg_1min: float = 0.0


FIGURES = (
    ("raw_pull", "raw sdk_py pull", "msg/s"),
    ("source_read", "source read (batch)", "msg/s"),
    ("raw_send", "raw sdk_py batch send", "msg/s"),
    ("source_write", "source write (batch)", "msg/s"),
    ("stream_p50_ms", "streaming end-to-end latency p50", "ms"),
    ("stream_p99_ms", "streaming end-to-end latency p99", "ms"),
)


def summarize(rounds: list[Round]) -> dict[str, dict[str, float] | None]:
    out = {key: spread([r.figures[key] for r in rounds if key in r.figures]) for key, _, _ in FIGURES}
    out["read_ratio"] = spread([r.figures["source_read"] / r.figures["raw_pull"] for r in rounds
                                if r.figures.get("raw_pull") and "source_read" in r.figures])
    out["write_ratio"] = spread([r.figures["source_write"] / r.figures["raw_send"] for r in rounds
                                 if r.figures.get("raw_send") and "source_write" in r.figures])
    return out


def verdict(summary: dict) -> dict[str, bool | None]:
    read, write = summary.get("read_ratio"), summary.get("write_ratio")
    return {"read": None if read is None else read["median"] >= TARGET_READ,
            "write": None if write is None else write["median"] >= TARGET_WRITE}


def table(summary: dict) -> str:
    """A Markdown table: each figure's median and range over the rounds, then the targets."""
    rows = ["| figure | median | min–max | rounds |", "|---|---:|---:|---:|"]
    for key, label, unit in FIGURES:
        s = summary.get(key)
        if s is not None:
            fmt = (lambda v: f"{v:,.0f}") if unit == "msg/s" else (lambda v: f"{v:,.1f}")
            rows.append(f"| {label} ({unit}) | {fmt(s['median'])} | {fmt(s['min'])}–{fmt(s['max'])} | {s['rounds']} |")
    met = verdict(summary)
    for key, label, target, ok in (("read_ratio", "source read / raw pull", TARGET_READ, met["read"]),
                                   ("write_ratio", "source write / raw batch send", TARGET_WRITE, met["write"])):
        s = summary.get(key)
        if s is not None:
            rows.append(f"| {label}, target ≥ {target}: {'met' if ok else 'missed'} | {s['median']:.2f} | "
                        f"{s['min']:.2f}–{s['max']:.2f} | {s['rounds']} |")
    return "\n".join(rows)


class Bench:
    def __init__(self, plan: Plan, home: Path, progress=print):
        self.plan = plan
        self.home = home
        self.progress = progress
        self.server = FerryMQServer(home / "server", {"flushDiskType": "ASYNC_FLUSH",
                                                      "mappedFileSizeCommitLog": str(256 << 20)})
        self.spark: Any = None
        self.body = bytes(range(256)) * (plan.message_size // 256) + b"x" * (plan.message_size % 256)
        self.source_topic = ""

    def start(self) -> None:
        from ferrymq.pipeline.session import local_session

        self.server.start()
        self.spark = local_session(app_name="spark-bench")
        self.source_topic = self.topic("SparkBenchSource")
        seconds = self.send_batches(self.source_topic)
        self.progress(f"filled {self.source_topic}: {self.plan.messages:,} messages in {seconds:.1f} s")
        self.source_read()  # untimed: the first job of a session pays for starting the Python workers

    def stop(self) -> None:
        if self.spark is not None:
            self.spark.stop()
        self.server.stop()

    @property
    def ns(self) -> str:
        return self.server.namesrv_addr

    def topic(self, prefix: str) -> str:
        name = f"{prefix}_{uuid.uuid4().hex[:8]}"
        with BlockingMQAdmin(self.ns) as admin:
            admin.create_topic(name, self.plan.queues, broker_addr=self.server.broker_addr)
            admin.wait_for_route(name, 30.0)
        return name

    # -- the raw clients ---------------------------------------------------------------------------

    def send_batches(self, topic: str) -> float:
        """Seconds to send ``messages`` in batches of SEND_BATCH from one producer."""
        with BlockingProducer(f"spark_bench_{uuid.uuid4().hex[:6]}", self.ns) as producer:
            producer.send_batch([Message(topic, self.body) for _ in range(SEND_BATCH)])  # route and connection
            start = time.perf_counter()
            left = self.plan.messages
            while left > 0:
                n = min(SEND_BATCH, left)
                producer.send_batch([Message(topic, self.body) for _ in range(n)])
                left -= n
            return time.perf_counter() - start

    def raw_pull(self) -> float:
        consumer = BlockingPullConsumer(f"spark_bench_pull_{uuid.uuid4().hex[:6]}", self.ns)
        consumer.start()
        try:
            queues = consumer.fetch_subscribe_queues(self.source_topic)
            start, got = time.perf_counter(), 0
            for mq in queues:
                offset = 0
                while True:
                    result = consumer.pull(mq, "*", offset, PULL_BATCH)
                    if result.status is not PullStatus.FOUND:
                        break
                    got += len(result.messages)
                    offset = result.next_begin_offset
            seconds = time.perf_counter() - start
        finally:
            consumer.shutdown()
        if got != self.plan.messages + SEND_BATCH:
            raise RuntimeError(f"raw pull read {got} messages, expected {self.plan.messages + SEND_BATCH}")
        return got / seconds

    # -- the source ---------------------------------------------------------------------------------

    def source_read(self) -> float:
        start = time.perf_counter()
        df = self.spark.read.format("rocketmq").options(nameServer=self.ns, topic=self.source_topic).load()
        df.write.format("noop").mode("overwrite").save()
        return (self.plan.messages + SEND_BATCH) / (time.perf_counter() - start)

    def source_write(self) -> float:
        from pyspark.sql import functions as F

        target = self.topic("SparkBenchWrite")
        rows = self.spark.range(0, self.plan.messages, numPartitions=2).select(
            F.lit(self.body).alias("body"))
        start = time.perf_counter()
        rows.write.format("rocketmq").options(nameServer=self.ns, topic=target).mode("append").save()
        return self.plan.messages / (time.perf_counter() - start)

    def raw_send(self) -> float:
        return self.plan.messages / self.send_batches(self.topic("SparkBenchRaw"))

    def stream_latency(self) -> dict[str, float]:
        """p50 and p99 (ms) from a message's bornTimestamp to its micro-batch reaching the sink."""
        from pyspark.sql import functions as F

        topic = self.topic("SparkBenchStream")
        latencies: list[float] = []
        arrived = threading.Event()

        def sink(batch: Any, _batch_id: int) -> None:
            now = time.time() * 1000
            latencies.extend(now - r[0] for r in batch.select(F.unix_millis("bornTimestamp")).collect())
            arrived.set()

        stream = self.spark.readStream.format("rocketmq").options(nameServer=self.ns, topic=topic,
                                                                  startingOffsets="latest").load()
        query = (stream.writeStream.foreachBatch(sink).trigger(processingTime="0 seconds")
                 .option("checkpointLocation", str(self.home / f"checkpoint-{topic}")).start())
        try:
            with BlockingProducer(f"spark_bench_{uuid.uuid4().hex[:6]}", self.ns) as producer:
                deadline = time.monotonic() + 120
                while not arrived.is_set():  # warm-up: until the query delivers a first message
                    producer.send(Message(topic, self.body))
                    arrived.wait(1.0)
                    if time.monotonic() > deadline:
                        raise RuntimeError("the stream delivered nothing in 120 s")
                time.sleep(1.0)
                latencies.clear()
                for _ in range(self.plan.latency_messages):
                    producer.send(Message(topic, self.body))
                    time.sleep(self.plan.latency_gap_s)
                deadline = time.monotonic() + 60
                while len(latencies) < self.plan.latency_messages and time.monotonic() < deadline:
                    time.sleep(0.05)
        finally:
            query.stop()
        ordered = sorted(latencies)
        return {"stream_p50_ms": statistics.median(ordered),
                "stream_p99_ms": ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]}

    def round(self, r: int) -> Round:
        phases = ["raw_pull", "source_read", "raw_send", "source_write", "stream"]
        order = phases if r % 2 == 0 else phases[::-1]
        done = Round(order)
        for phase in order:
            if phase == "stream":
                done.figures.update(self.stream_latency())
            else:
                done.figures[phase] = getattr(self, phase)()
        done.loadavg_1min = os.getloadavg()[0]
        return done


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(prog="spark_bench", description=__doc__.split("\n\n")[0])
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="100,000 messages, 3 rounds (the default)")
    size.add_argument("--full", action="store_true", help="1,000,000 messages, 3 rounds")
    p.add_argument("--rounds", type=int, help="rounds (medians are taken over them)")
    p.add_argument("--messages", type=int, help="messages read and written per phase")
    p.add_argument("--out", type=Path, help="write the results as JSON here")
    p.add_argument("--keep", action="store_true", help="keep the work dir (server log and store)")
    args = p.parse_args(argv if argv is not None else [])
    overrides = {k: v for k, v in {"rounds": args.rounds, "messages": args.messages}.items() if v is not None}
    plan = Plan.full(**overrides) if args.full else Plan.quick(**overrides)
    return run_rounds("spark_bench", Bench, plan, _describe, args, argv, summarize, table, verdict)


def _describe(done: Round) -> str:
    f = done.figures
    return (f"raw pull {f['raw_pull']:,.0f}, source read {f['source_read']:,.0f}, raw batch send "
            f"{f['raw_send']:,.0f}, source write {f['source_write']:,.0f} msg/s; stream p50 {f['stream_p50_ms']:.0f} ms "
            f"p99 {f['stream_p99_ms']:.0f} ms; load {done.loadavg_1min:.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])
