"""/metrics on the broker's HTTP listener, scraped from a running standalone as Prometheus would, while
clients of the SDK send and consume."""

from __future__ import annotations

import threading
import time

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from ferrymq.remoting.latency import SAMPLE_EVERY_READS
from ferrymq.sdk import BlockingProducer, BlockingPushConsumer, Message
from ferrymq.testing.ports import free_port
from ferrymq.testing.server import HTTP_UP, FerryMQServer
from tests.broker.test_cli_broker import start, stop

from .http_client import check_answer

TOPIC = "MetricsTopic"
GROUP = "metrics_cg"
QUEUES = 2


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with FerryMQServer(tmp_path_factory.mktemp("metrics"), http=True) as srv:
        srv.create_topic(TOPIC, queues=QUEUES)
        yield srv


class Scrape:
    """One scrape, parsed: ``value(name, **labels)`` is the sample with those labels (and any others)."""

    def __init__(self, server):
        response = httpx.get(f"{server.http_url}/metrics", timeout=10)
        check_answer(response)
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
        self.families = {f.name: f for f in text_string_to_metric_families(response.text)}

    def samples(self, name: str, **labels: str) -> list:
        """The samples called ``name`` (a counter's ``_total``, a histogram's ``_count``...) with ``labels``."""
        family_name = name if name in self.families else name.rpartition("_")[0]
        return [s for s in self.families[family_name].samples if s.name in (name, f"{name}_total")
                and all(s.labels.get(k) == v for k, v in labels.items())]

    def value(self, name: str, **labels: str) -> float:
        found = self.samples(name, **labels)
        assert len(found) == 1, (name, labels, found)
        return found[0].value

    def value_or_none(self, name: str, **labels: str) -> float | None:
        found = self.samples(name, **labels)
        return found[0].value if found else None


def _send(server, count: int) -> None:
    with BlockingProducer("metrics_pg", server.namesrv_addr) as producer:
        for i in range(count):
            producer.send(Message(TOPIC, f"m{i}".encode()))


def _wait_for(predicate, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result or time.monotonic() > deadline:
            return result
        time.sleep(0.25)


def test_the_exposition_parses_and_names_the_broker(server):
    scrape = Scrape(server)
    labels = {"cluster": server.cluster, "broker": server.broker_name}
    assert scrape.value("rocketmq_broker_tps", **labels) >= 0
    assert 0 < scrape.value("rocketmq_brokeruntime_commitlog_disk_ratio", cluster=server.cluster) < 1
    assert scrape.value("rocketmq_brokeruntime_commitlogdir_capacity_total", cluster=server.cluster) > 0
    # the reactor's stall counters and the flush histogram are there before anything stalls or flushes
    assert scrape.value("ferrymq_reactor_stalls", **labels) == 0
    assert scrape.families["ferrymq_reactor_machine_stalls"].type == "counter"
    assert scrape.families["ferrymq_commitlog_flush_seconds"].type == "histogram"
    # every limit's refusals are counted from 0, before any refusal
    assert {s.labels["reason"]: s.value for s in scrape.samples("ferrymq_refusals", **labels)} == {
        "too_many_connections": 0, "frame_too_large": 0, "bad_frame": 0, "idle": 0, "too_many_in_flight": 0}
    # the process's own figures follow the broker's
    assert scrape.families["process_resident_memory_bytes"].samples[0].value > 0


def test_puts_gets_and_lag_move_as_clients_send_and_consume(server):
    before = Scrape(server)
    put_before = before.value_or_none("rocketmq_producer_offset", topic=TOPIC) or 0
    total_before = before.value("rocketmq_brokeruntime_msg_put_total_today_now", cluster=server.cluster)
    flushes_before = before.value_or_none("ferrymq_commitlog_flush_seconds_count") or 0

    _send(server, 10)
    sent = Scrape(server)
    assert sent.value("rocketmq_producer_offset", topic=TOPIC) == put_before + 10
    assert sent.value("rocketmq_brokeruntime_msg_put_total_today_now", cluster=server.cluster) == total_before + 10
    assert sent.value("rocketmq_producer_tps", topic=TOPIC) > 0  # put since the previous scrape
    assert sent.value("rocketmq_brokeruntime_commitlog_maxoffset", cluster=server.cluster) > \
        before.value("rocketmq_brokeruntime_commitlog_maxoffset", cluster=server.cluster)
    # the ASYNC_FLUSH thread flushes the new messages within its 500 ms interval, and is timed doing it
    assert _wait_for(lambda: Scrape(server).value("ferrymq_commitlog_flush_seconds_count") > flushes_before)

    got = threading.Event()
    received: list[bytes] = []
    wanted = [10]

    def on_messages(msgs, context):
        received.extend(m.body for m in msgs)
        if len(received) >= wanted[0]:
            got.set()

    consumer = BlockingPushConsumer(GROUP, server.namesrv_addr, consume_from_where="CONSUME_FROM_FIRST_OFFSET")
    consumer.subscribe(TOPIC, "*")
    consumer.register_listener(on_messages)
    with consumer:
        assert got.wait(30), received
        connected = Scrape(server)
        assert connected.value("ferrymq_connections", cluster=server.cluster) >= 1
        [count] = connected.samples("rocketmq_group_count", group=GROUP)
        assert count.value == 1 and count.labels["caddr"].startswith("127.0.0.1:")
        # the group's first pulls: it has a rate from the next scrape on
        assert connected.value("rocketmq_consumer_tps", topic=TOPIC, group=GROUP) == 0
        got.clear()
        wanted[0] = 12
        _send(server, 2)
        assert got.wait(30), received
        assert Scrape(server).value("rocketmq_consumer_tps", topic=TOPIC, group=GROUP) > 0

        def consumed():
            scrape = Scrape(server)
            lags = scrape.samples("ferrymq_group_queue_diff", topic=TOPIC, group=GROUP)
            return scrape if len(lags) == QUEUES and all(s.value == 0 for s in lags) else None

        # the consumer commits its offsets every few seconds: the lag falls to 0 once it has
        done = _wait_for(consumed)
        assert done is not None, Scrape(server).samples("ferrymq_group_queue_diff", group=GROUP)
        assert done.value("rocketmq_consumer_offset", topic=TOPIC, group=GROUP) == \
            done.value("rocketmq_producer_offset", topic=TOPIC)
        assert done.value("rocketmq_group_diff", topic=TOPIC, group=GROUP, msgModel="1",
                          countOfOnlineConsumers="1") == 0

    # the group is offline now; messages sent meanwhile are its lag, per queue and in all
    _send(server, 4)
    offline = Scrape(server)
    lags = offline.samples("ferrymq_group_queue_diff", topic=TOPIC, group=GROUP)
    assert sorted(s.labels["queueid"] for s in lags) == [str(q) for q in range(QUEUES)]
    assert sum(s.value for s in lags) == 4
    assert offline.value("rocketmq_group_diff", topic=TOPIC, group=GROUP, countOfOnlineConsumers="0") == 4


def test_request_latency_is_sampled_per_request_and_response_code(server):
    with BlockingProducer("metrics_latency_pg", server.namesrv_addr) as producer:
        for i in range(2 * SAMPLE_EVERY_READS):  # each sync send is a read of its own
            producer.send(Message("MetricsLatencyTopic", f"m{i}".encode()))
    scrape = Scrape(server)
    assert scrape.families["rocketmq_rpc_latency"].type == "histogram"
    timed = [s for s in scrape.samples("rocketmq_rpc_latency_count", response_code="SUCCESS",
                                       is_long_polling="false")
             if s.labels["request_code"] in ("SEND_MESSAGE", "SEND_MESSAGE_V2")]
    assert sum(s.value for s in timed) >= 1
    assert all(s.labels["protocol_type"] == "remoting" and s.labels["broker"] == server.broker_name for s in timed)


def test_a_gateway_alone_serves_its_process_figures_only(tmp_path, server):
    """``ferrymq gateway http -n``: no broker in the process, so no broker figures."""
    port = free_port()
    conf = tmp_path / "gateway.conf"
    conf.write_text(f"bindAddress=127.0.0.1\nhttpListenPort={port}\n")
    proc, _bound, _ = start(["gateway", "http", "-n", server.namesrv_addr, "--log-level", "INFO", "-c", str(conf)],
                            HTTP_UP)
    try:
        response = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    finally:
        stop(proc)
    assert response.status_code == 200
    names = {f.name for f in text_string_to_metric_families(response.text)}
    assert "process_cpu_seconds" in names
    assert not any(name.startswith(("rocketmq_", "ferrymq_")) for name in names)
