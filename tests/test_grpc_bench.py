"""The gRPC benchmark's load against a live FerryMQ (half a second of it), and its summary over rounds."""

import asyncio
import uuid

import pytest

pytest.importorskip("grpc")
pytest.importorskip("rocketmq.grpc_protocol")

from benchmarks.grpc_bench import Plan, Round, receive_load, send_load, summarize, table, verdict  # noqa: E402
from ferrymq.sdk.blocking_clients import BlockingMQAdmin  # noqa: E402
from ferrymq.testing.server import FerryMQServer  # noqa: E402
from ferrymq.wire.bodies import SubscriptionGroupConfig  # noqa: E402


def test_the_load_sends_then_receives_and_acks_what_it_sent(tmp_path):
    plan = Plan.quick(seconds=0.5, warmup_s=0.1, concurrency=4, receivers=2, queues=2)
    with FerryMQServer(tmp_path, grpc=True) as server:
        topic = f"GrpcBenchSmoke{uuid.uuid4().hex[:8]}"
        with BlockingMQAdmin(server.namesrv_addr) as admin:
            admin.create_topic(topic, plan.queues, broker_addr=server.broker_addr)
            admin.api.create_subscription_group(server.broker_addr, SubscriptionGroupConfig(group_name="grpc_bench_smoke"))
        sent = asyncio.run(send_load(server.grpc_endpoint, topic, plan))
        assert sent["ok"] > 0 and sent["failed"] == 0
        assert 0 < sent["p50_ms"] <= sent["p99_ms"]
        taken = asyncio.run(receive_load(server.grpc_endpoint, topic, "grpc_bench_smoke", sent["ok"], plan,
                                         timeout_s=15))
        assert taken["acked"] >= sent["ok"] and taken["tps"] > 0


def _round(i: int, ferry_send: float, apache_send: float, ferry_receive: float, apache_receive: float) -> Round:
    return Round(i, ["ferrymq", "apache"],
                 send={"ferrymq": {"tps": ferry_send, "p99_ms": 5.0}, "apache": {"tps": apache_send, "p99_ms": 9.0}},
                 receive={"ferrymq": {"tps": ferry_receive}, "apache": {"tps": apache_receive}})


def test_the_ratios_are_taken_within_each_round_then_the_median():
    rounds = [_round(0, 1000, 2000, 3000, 1000), _round(1, 3000, 2000, 1000, 1000),
              Round(2, ["apache", "ferrymq"], send={"apache": {"tps": 10.0, "p99_ms": 1.0}},
                    errors={"ferrymq": "RuntimeError: down"})]
    s = summarize(rounds)
    assert s["send_ratio"] == {"median": 1.0, "min": 0.5, "max": 1.5, "rounds": 2}
    assert s["receive_ratio"]["median"] == 2.0
    assert s["apache"]["send_tps"]["rounds"] == 3 and s["ferrymq"]["send_tps"]["rounds"] == 2
    assert verdict(s) == {"send": True, "receive": True}
    assert "| send msg/s | 2000 (1000-3000) |" in table(s)
