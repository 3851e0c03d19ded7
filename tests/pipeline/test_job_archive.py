"""The archive job: a topic landed as Parquet partitioned by date; a run stopped mid-topic and run again
leaves each message in it once."""

from __future__ import annotations

import datetime
import time

from ferrymq.pipeline.jobs import build_parser, run
from ferrymq.pipeline.jobs.archive import ArchiveSpec, start_archive

from .conftest import send
from .test_stream import messages


def archived_ids(spark, path) -> list[str]:
    return [r.msgId for r in spark.read.parquet(str(path)).select("msgId").collect()]


def utc_day(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).date().isoformat()


def test_an_archive_stopped_mid_topic_and_run_again_holds_each_message_once(spark, server, topic, tmp_path):
    began = time.time()
    sent = send(server, messages(topic, 12))
    path = tmp_path / "archive"
    query = start_archive(spark, ArchiveSpec(server.namesrv_addr, topic, str(path), max_offsets_per_trigger=4))
    deadline = time.monotonic() + 60
    while not any(p["numInputRows"] for p in query.recentProgress) and time.monotonic() < deadline:
        time.sleep(0.05)
    query.stop()  # after its first batch of 4, with 8 messages to go
    first = archived_ids(spark, path)
    assert 0 < len(first) < 12 and len(set(first)) == len(first)

    argv = ["archive", "-n", server.namesrv_addr, "-t", topic, "--path", str(path), "--maxOffsetsPerTrigger", "4"]
    run(spark, build_parser().parse_args(argv))
    assert sorted(archived_ids(spark, path)) == sorted(s.msg_id for s in sent)

    days = {p.name for p in path.iterdir() if not p.name.startswith(("_", "."))}
    assert days and days <= {f"date={utc_day(began)}", f"date={utc_day(time.time())}"}
