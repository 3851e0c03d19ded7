"""A local SparkSession set up the way the data source needs it on one machine (docs/pipeline.md)."""

from __future__ import annotations

import os
import sys
from typing import Any


def local_session(master: str = "local[2]", app_name: str = "ferrymq-pipeline", **conf: str) -> Any:
    """A SparkSession whose Python workers run this interpreter (which has FerryMQ installed), bound to the
    loopback address, without the web UI, with the ``rocketmq`` format registered. ``conf`` adds settings."""
    from pyspark.sql import SparkSession

    from . import register

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder = SparkSession.builder.master(master).appName(app_name).config("spark.ui.enabled", "false")
    for key, value in {"spark.sql.shuffle.partitions": "2", **conf}.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    return spark
