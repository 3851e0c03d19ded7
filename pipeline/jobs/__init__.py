"""The jobs users run on the data source: ``python -m ferrymq.pipeline.jobs archive|lag|storefile ...``.

The same command line runs under ``spark-submit``, given this package's ``__main__.py`` (docs/pipeline.md
shows how to find it): there the session is spark-submit's (its master and settings), otherwise a local
one (``--master``, default ``local[2]``) set up by :func:`~ferrymq.pipeline.session.local_session`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Sequence
from typing import Any


def _options(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise argparse.ArgumentTypeError(f"--option {pair!r}: expected key=value")
        out[key] = value
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m ferrymq.pipeline.jobs",
                                     description="Spark jobs on RocketMQ topics and FerryMQ store files.")
    parser.add_argument("--master", default=None,
                        help="Spark master when not run by spark-submit (default local[2])")
    jobs = parser.add_subparsers(dest="job", required=True, metavar="JOB")

    archive = jobs.add_parser("archive", help="land a topic in Parquet partitioned by date, exactly once",
                              description="One availableNow run: what the topic holds now, after what earlier "
                                          "runs on the same checkpoint archived, to Parquet under "
                                          "PATH/date=YYYY-MM-DD (the UTC day each message was stored).")
    archive.add_argument("-n", "--nameServer", required=True, help="host:port of a name server")
    archive.add_argument("-t", "--topic", required=True)
    archive.add_argument("--path", required=True, help="the archive's directory")
    archive.add_argument("--checkpoint", help="the query's checkpoint (default PATH/_checkpoint)")
    archive.add_argument("--maxOffsetsPerTrigger", type=int, help="the most messages one micro-batch reads")
    archive.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                         help="a further option of the rocketmq format (repeatable)")

    lag = jobs.add_parser("lag", help="a consumer group's lag and throughput per queue, and totals",
                          description="Per queue: broker and consumer offsets, lag and in-flight count as "
                                      "consumerProgress shows them, the age of the first unconsumed message, "
                                      "and the intake rate over a window; with --history, the consume rate "
                                      "since the previous snapshot.")
    lag.add_argument("-n", "--nameServer", required=True, help="host:port of a name server")
    lag.add_argument("-g", "--group", required=True, help="consumer group")
    lag.add_argument("-t", "--topic", help="only this topic's queues")
    lag.add_argument("--window", type=float, default=300.0, help="seconds the intake rate is measured over")
    lag.add_argument("--history", help="a directory each snapshot is appended to (Parquet)")
    lag.add_argument("--output", help="write the snapshot and totals here as JSON")

    store = jobs.add_parser("storefile", help="read commit-log files offline into the rows of a read",
                            description="Commit-log segments (a commit-log directory or a store root) as the "
                                        "rows a rocketmq read gives, shown or written out.")
    store.add_argument("--store", required=True, help="a commit-log directory or storePathRootDir")
    store.add_argument("--brokerName", help="the broker the store belongs to (the broker column)")
    store.add_argument("-t", "--topic", action="append", default=[], help="keep this topic (repeatable)")
    store.add_argument("--output", help="write the rows here (else show the first --show of them)")
    store.add_argument("--format", choices=("parquet", "json"), default="parquet", help="of --output")
    store.add_argument("--show", type=int, default=20, help="rows shown without --output")
    return parser


def session(master: str | None) -> Any:
    """spark-submit's session when it runs this, else a local one."""
    if "PYSPARK_GATEWAY_PORT" in os.environ:  # started by spark-submit: its master and settings apply
        from pyspark.sql import SparkSession

        from .. import register

        spark = SparkSession.builder.getOrCreate()
        register(spark)
        return spark
    from ..session import local_session

    return local_session(master or "local[2]", app_name="ferrymq-jobs")


def run(spark: Any, args: argparse.Namespace, out: Any = sys.stdout) -> Any:
    """Run the parsed job on ``spark``; returns its result (rows archived, a LagReport, a DataFrame)."""
    if args.job == "archive":
        from .archive import ArchiveSpec, archive

        spec = ArchiveSpec(args.nameServer, args.topic, args.path, args.checkpoint, args.maxOffsetsPerTrigger,
                           _options(args.option))
        count = archive(spark, spec)
        print(f"archived {count} message(s) of {args.topic} to {args.path}", file=out)
        return count
    if args.job == "lag":
        from .lag import LagSpec, consumer_lag, report_text

        report = consumer_lag(spark, LagSpec(args.nameServer, args.group, args.topic, args.window, args.history))
        print(report_text(report.queues, report.totals), file=out, end="")
        if args.output:
            with open(args.output, "w") as f:
                json.dump({"totals": report.totals, "queues": report.queues}, f, indent=2, default=str)
        return report
    from .storefile import StoreFileSpec, store_frame

    frame = store_frame(spark, StoreFileSpec(args.store, args.brokerName, tuple(args.topic)))
    if args.output:
        frame.write.mode("errorifexists").format(args.format).save(args.output)
        print(f"wrote the store's rows to {args.output} ({args.format})", file=out)
    else:
        frame.show(args.show, truncate=40)
    return frame


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        _options(getattr(args, "option", []))
    except argparse.ArgumentTypeError as exc:
        build_parser().error(str(exc))
    spark = session(args.master)
    try:
        run(spark, args)
    finally:
        if "PYSPARK_GATEWAY_PORT" not in os.environ:
            spark.stop()
    return 0
