"""The lag job against ``ferrymq admin consumerProgress``: the same offsets, lag and in-flight count per
queue and in total, with the age of the first unconsumed message, the intake rate, and the consume rate
between two snapshots."""

from __future__ import annotations

import io
import json
import time
import uuid

import pytest

from ferrymq.pipeline.cluster import Cluster
from ferrymq.pipeline.jobs import build_parser, run
from ferrymq.pipeline.queues import QueueRef
from ferrymq.sdk.admin_cli import main as admin_main
from ferrymq.testing.admin import create_group
from ferrymq.wire.bodies import SubscriptionGroupConfig

from .conftest import send
from .test_stream import messages


def consumer_progress(server, group: str, topic: str) -> tuple[list[list], int, int]:
    """consumerProgress -g -t: its rows (topic, broker, queue id, broker offset, consumer offset, diff,
    inflight) and its Diff and Inflight totals."""
    out, err = io.StringIO(), io.StringIO()
    assert admin_main(["consumerProgress", "-n", server.namesrv_addr, "-g", group, "-t", topic], out, err) == 0, \
        err.getvalue()
    lines = out.getvalue().splitlines()
    rows = [[f[0], f[1], *map(int, f[2:7])] for f in (line.split() for line in lines if line.startswith(topic))]
    total = {line.split(":")[0]: int(line.split(":")[1])
             for line in lines if line.startswith("Consume ") and "TPS" not in line}
    return rows, total["Consume Diff Total"], total["Consume Inflight Total"]


def test_lag_per_queue_and_in_total_is_what_consumer_progress_shows(spark, server, topic, tmp_path):
    began = time.time()
    send(server, messages(topic, 9))
    group = f"lag_{uuid.uuid4().hex[:8]}"
    create_group(server.broker_addr, SubscriptionGroupConfig(group))
    queues = [QueueRef(topic, "broker-a", 0), QueueRef(topic, "broker-a", 1)]
    with Cluster(server.namesrv_addr) as cluster:
        ends = {q: cluster.max_offset(q) for q in queues}
        cluster.commit_offsets(group, {queues[0]: 1, queues[1]: ends[queues[1]]})
    argv = ["lag", "-n", server.namesrv_addr, "-g", group, "-t", topic, "--history", str(tmp_path / "history"),
            "--output", str(tmp_path / "lag.json")]
    report = run(spark, build_parser().parse_args(argv), io.StringIO())

    rows, diff_total, inflight_total = consumer_progress(server, group, topic)
    got = json.loads((tmp_path / "lag.json").read_text())
    assert [[q["topic"], q["broker"], q["queueId"], q["brokerOffset"], q["consumerOffset"], q["lag"], q["inflight"]]
            for q in got["queues"]] == rows
    assert (got["totals"]["lag"], got["totals"]["inflight"]) == (diff_total, inflight_total) == (ends[queues[0]] - 1, 0)
    first, second = got["queues"]
    assert 0 < first["lagSeconds"] <= time.time() - began + 1  # the message at offset 1 waits since it was sent
    assert (second["lagSeconds"], second["oldestPendingTimestamp"]) == (0.0, None)
    assert [q["storedInWindow"] for q in got["queues"]] == [ends[q] for q in queues]  # all sent in the window
    assert got["totals"]["inTps"] == pytest.approx(sum(ends.values()) / 300.0)
    assert [q["consumeTps"] for q in got["queues"]] == [None, None]  # a first snapshot has nothing to compare
    assert report.totals == got["totals"]

    with Cluster(server.namesrv_addr) as cluster:
        cluster.commit_offsets(group, {queues[0]: ends[queues[0]]})
    report = run(spark, build_parser().parse_args(argv), io.StringIO())
    rates = [q["consumeTps"] for q in report.queues]
    assert rates[0] > 0 and rates[1] == 0.0 and report.totals["lag"] == 0
