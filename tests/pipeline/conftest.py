"""A FerryMQ standalone server for the pipeline tests (SQL92 filters on), shared by the package, and a
fresh topic per test; the Spark session is the suite's ``spark`` fixture (conftest.py at the root)."""

from __future__ import annotations

import importlib.util
import uuid

import pytest

from ferrymq.sdk import BlockingMQAdmin, BlockingProducer, Message
from ferrymq.testing import FerryMQServer

if importlib.util.find_spec("pyspark") is None or importlib.util.find_spec("pyarrow") is None:
    # the spark extra is missing (make installs it): only the option checks can run
    collect_ignore_glob = ["test_read*.py", "test_write*.py", "test_stream*.py", "test_docs*.py", "test_job*.py"]


@pytest.fixture(scope="package")
def server(tmp_path_factory):
    with FerryMQServer(tmp_path_factory.mktemp("pipeline"), {"enablePropertyFilter": "true"}) as srv:
        yield srv


def make_topic(server) -> str:
    """A fresh topic with two queues on the server's broker."""
    name = f"Spark_{uuid.uuid4().hex[:10]}"
    with BlockingMQAdmin(server.namesrv_addr) as admin:
        admin.create_topic(name, 2, broker_addr=server.broker_addr)
        admin.wait_for_route(name, 10.0)
    return name


@pytest.fixture
def topic(server) -> str:
    return make_topic(server)


def send(server, messages: list[Message]) -> list:
    """Send one by one (so each message's queue and offset are in its result)."""
    with BlockingProducer(f"pipeline_pg_{uuid.uuid4().hex[:8]}", server.namesrv_addr) as producer:
        return [producer.send(m) for m in messages]
