"""FerryMQ's container image and ``FerryMQContainer``, driven by ``sdk_py`` and the official Java client.

One private Docker engine and one image per session (``docker_engine.py``): the engine is loopback-only,
so every container runs on the host's network. Skips, naming the reason, only when Docker cannot run
on this machine at all.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
import uuid

import pytest
from testcontainers.core.config import testcontainers_config

from ferrymq.sdk import BlockingProducer, BlockingPullConsumer, Message, PullStatus
from ferrymq.sdk.blocking import BlockingAdmin
from ferrymq.testing.containers import FerryMQContainer
from ferrymq.testing.server import SMALL_STORE

from . import docker_engine, toolchain
from .docker_engine import DockerUnavailable, Engine
from .harness import ScenarioResult
from .processes import free_port



@pytest.fixture(scope="session")
def engine():
    try:
        docker_engine.ensure_installed()
        started = Engine.start()
    except DockerUnavailable as exc:
        pytest.skip(f"Docker cannot run on this machine: {exc}")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("DOCKER_HOST", started.host)
        patch.setattr(testcontainers_config, "ryuk_disabled", True)  # the reaper is an image to pull
        patch.setattr(testcontainers_config, "tc_host_override", "127.0.0.1")  # the engine is this host's
        yield started
    started.stop()


@pytest.fixture(scope="session")
def image(engine) -> str:
    docker_engine.build_base(engine)
    docker_engine.build_image(engine)
    return docker_engine.IMAGE


def ferrymq(image: str, **kwargs) -> FerryMQContainer:
    return FerryMQContainer(image, **kwargs).with_kwargs(network_mode="host")


@pytest.fixture(scope="module")
def mq(image):
    with ferrymq(image) as container:
        yield container


def _pull_all(namesrv: str, topic: str, expected: int, timeout: float = 30) -> list[bytes]:
    """Every message of ``topic`` from offset 0 of each queue, once ``expected`` of them are there."""
    deadline = time.monotonic() + timeout
    with BlockingPullConsumer(f"puller-{uuid.uuid4().hex[:8]}", namesrv) as consumer:
        while True:
            bodies = []
            for queue in consumer.fetch_subscribe_queues(topic):
                result = consumer.pull(queue, "*", 0, max_nums=32)
                if result.status is PullStatus.FOUND:
                    bodies += [msg.body for msg in result.messages]
            if len(bodies) >= expected or time.monotonic() > deadline:
                return sorted(bodies)
            time.sleep(0.2)


def test_the_image_runs_as_a_non_root_user_keeps_its_data_in_the_volume_and_reports_healthy(engine, image):
    config = json.loads(engine.docker("image", "inspect", image).stdout)[0]["Config"]
    assert config["User"] == "10001:10001"
    assert "/var/lib/ferrymq" in config["Volumes"]
    with ferrymq(image) as container:
        # one process, the server; a health check's exec may be running beside it for a moment
        deadline = time.monotonic() + 20
        while len(processes := container.get_wrapped_container().top()["Processes"]) != 1 \
                and time.monotonic() < deadline:
            time.sleep(0.2)
        assert len(processes) == 1, processes
        pid1 = container.exec(["cat", "/proc/1/cmdline"]).output.split(b"\0")
        assert pid1[1:3] == [b"/opt/ferrymq/bin/ferrymq", b"standalone"]  # the entry point exec'd it
        assert container.exec(["id", "-u"]).output.decode().strip() == "10001"
        store = container.exec(["ls", "/var/lib/ferrymq/store"]).output.decode().split()
        assert "commitlog" in store
        deadline = time.monotonic() + 40  # the first check runs 5 s after the start
        health = None
        while time.monotonic() < deadline and health != "healthy":
            time.sleep(0.5)
            container.reload()
            health = container.get_wrapped_container().attrs["State"]["Health"]["Status"]
        assert health == "healthy"


def test_sdk_py_is_told_the_advertised_address_and_sends_and_pulls_through_it(mq):
    topic = f"ContainerSdk{uuid.uuid4().hex[:8]}"
    with BlockingProducer("container_producer", mq.namesrv_addr) as producer:
        for i in range(3):
            producer.send(Message(topic, f"sdk-{i}".encode()))
    with BlockingAdmin(mq.namesrv_addr) as admin:
        route = admin.get_route_info(topic)
    assert [data.broker_addrs[0] for data in route.broker_datas] == [mq.broker_addr]
    assert _pull_all(mq.namesrv_addr, topic, 3) == [b"sdk-0", b"sdk-1", b"sdk-2"]


def test_the_http_gateway_of_the_container_publishes_to_its_broker(mq):
    import httpx

    topic = f"ContainerHttp{uuid.uuid4().hex[:8]}"
    deadline = time.monotonic() + 30  # its client connects once the broker runs
    while (answer := httpx.post(f"{mq.http_url}/v1/topics/{topic}/messages", content=b"over-http")).status_code == 503:
        assert time.monotonic() < deadline, answer.text
        time.sleep(0.2)
    assert answer.status_code == 200, answer.text
    assert _pull_all(mq.namesrv_addr, topic, 1) == [b"over-http"]


def test_the_official_java_client_sends_and_consumes_through_the_container(mq, java5):
    topic = f"ContainerJava{uuid.uuid4().hex[:8]}"
    java5("send", "-n", mq.namesrv_addr, "-t", topic, "-count", "3", "-body", "java").check()
    received = java5("consume", "-n", mq.namesrv_addr, "-t", topic, "-g", f"g{topic}", "-count", "3",
                     "-timeout", "30000").check().of("received")
    assert sorted(e["body"] for e in received) == ["java #0", "java #1", "java #2"]
    assert _pull_all(mq.namesrv_addr, topic, 3) == [b"java #0", b"java #1", b"java #2"]


def test_a_mounted_broker_conf_is_read_and_the_environment_overrides_it(image, tmp_path):
    conf = tmp_path / "broker.conf"
    conf.write_text("brokerClusterName=FileCluster\nbrokerName=from-file\n"
                    f"mappedFileSizeCommitLog={SMALL_STORE['mappedFileSizeCommitLog']}\n")
    conf.chmod(0o644)
    container = ferrymq(image, conf=conf).with_env("FERRYMQ_brokerName", "from-env")
    with container, BlockingAdmin(container.namesrv_addr) as admin:
        info = admin.get_cluster_info()
    assert info.cluster_addr_table == {"FileCluster": ["from-env"]}
    assert info.broker_addr_table["from-env"].broker_addrs == {0: container.broker_addr}


def test_a_container_that_exits_at_start_fails_with_its_log(image):
    container = ferrymq(image, conf={"flushDiskType": "SOMETIMES"}, ready_timeout=30)
    with pytest.raises(RuntimeError, match="(?s)exited before it was ready.*flushDiskType=SOMETIMES"), container:
        pass


def test_messages_outlive_the_container_in_its_volume(engine, image):
    volume = f"ferrymq-test-{uuid.uuid4().hex[:8]}"
    topic = "ContainerVolume"
    try:
        first = ferrymq(image).with_volume_mapping(volume, "/var/lib/ferrymq", "rw")
        with first, BlockingProducer("volume_producer", first.namesrv_addr) as producer:
            producer.send(Message(topic, b"kept"))
            stopped = first.get_wrapped_container()
            stopped.stop(timeout=30)  # SIGTERM: the broker flushes and shuts down
            stopped.reload()
            assert stopped.attrs["State"]["ExitCode"] == 0
        second = ferrymq(image).with_volume_mapping(volume, "/var/lib/ferrymq", "rw")
        with second:
            assert _pull_all(second.namesrv_addr, topic, 1) == [b"kept"]
    finally:
        engine.docker("volume", "rm", "-f", volume, check=False)


def test_testcontainers_java_runs_the_image_with_the_documented_settings(image, compat_home):
    """ContainerCheck (java/testcontainers) starts the image as a GenericContainer configured as
    docs/testing.md shows, then sends and pulls a message with the official client."""
    missing = toolchain.missing_tools("java", "javac", "mvn")
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: testcontainers-java cannot be built or run")
    program = toolchain.testcontainers_java()
    topic = f"ContainerTcJava{uuid.uuid4().hex[:8]}"
    argv = program.command("ferrymq.compat.ContainerCheck",
                           [image, str(free_port()), str(free_port(also_free=(-2,))), topic],
                           home=compat_home / "testcontainers-java")
    # DOCKER_HOST is the engine's (the `engine` fixture); the reaper would be an image to pull
    env = dict(os.environ, TESTCONTAINERS_RYUK_DISABLED="true", TESTCONTAINERS_HOST_OVERRIDE="127.0.0.1")
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
                          check=False)
    roundtrip = ScenarioResult(argv, proc.returncode, proc.stdout, proc.stderr).check().one("roundtrip")
    assert roundtrip["status"] == "SEND_OK"
    assert roundtrip["body"] == "from testcontainers-java"
