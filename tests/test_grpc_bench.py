"""The gRPC benchmark's load against a live FerryMQ (half a second of it), and its summary over rounds."""

import asyncio
import functools
import uuid

import pytest

pytest.importorskip("grpc")
pytest.importorskip("rocketmq.grpc_protocol")

from benchmarks.grpc_bench import Plan, Round, main, receive_load, send_load, summarize, table, verdict  # noqa: E402
from benchmarks.sidebyside.procstat import tree_cpu_s  # noqa: E402
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
        server_cpu_s = functools.partial(tree_cpu_s, server.pid)
        sent = asyncio.run(send_load(server.grpc_endpoint, topic, plan, server_cpu_s))
        assert sent["ok"] > 0 and sent["failed"] == 0
        assert 0 < sent["p50_ms"] <= sent["p99_ms"]
        assert sent["server_cpu_us_per_msg"] > 0
        taken = asyncio.run(receive_load(server.grpc_endpoint, topic, "grpc_bench_smoke", sent["ok"], plan,
                                         server_cpu_s, timeout_s=15))
        assert taken["acked"] >= sent["ok"] and taken["tps"] > 0
        assert taken["server_cpu_us_per_msg"] > 0


def _round(i: int, ferry: tuple[float, float], cluster: tuple[float, float], local: tuple[float, float]) -> Round:
    """A round of all three sides, each given as (send msg/s, receive+ack msg/s)."""
    cpu = {"server_cpu_us_per_msg": 100.0}
    rates = {"ferrymq": ferry, "apache-cluster": cluster, "apache-local": local}
    return Round(i, list(rates),
                 send={side: {"tps": send, "p99_ms": 5.0, **cpu} for side, (send, _) in rates.items()},
                 receive={side: {"tps": receive, **cpu} for side, (_, receive) in rates.items()})


def test_the_ratios_are_taken_within_each_round_then_the_median_against_each_apache_side():
    rounds = [_round(0, (1000, 3000), (2000, 1000), (4000, 6000)), _round(1, (3000, 1000), (2000, 1000), (3000, 2000)),
              Round(2, ["apache-local", "apache-cluster", "ferrymq"],
                    send={"apache-cluster": {"tps": 10.0, "p99_ms": 1.0, "server_cpu_us_per_msg": 50.0}},
                    errors={"ferrymq": "RuntimeError: down", "apache-local": "RuntimeError: down"})]
    s = summarize(rounds)
    assert s["send_ratio"]["apache-cluster"] == {"median": 1.0, "min": 0.5, "max": 1.5, "rounds": 2}
    assert s["send_ratio"]["apache-local"] == {"median": 0.625, "min": 0.25, "max": 1.0, "rounds": 2}
    assert s["receive_ratio"]["apache-cluster"]["median"] == 2.0
    assert s["receive_ratio"]["apache-local"]["median"] == 0.5
    assert s["apache-cluster"]["send_tps"]["rounds"] == 3 and s["ferrymq"]["send_tps"]["rounds"] == 2
    assert s["apache-cluster"]["send_cpu_us"] == {"median": 100.0, "min": 50.0, "max": 100.0, "rounds": 3}
    rows = table(s).splitlines()
    assert rows[0] == ("| | FerryMQ | Apache proxy (cluster) | Apache proxy (local) | FerryMQ / Apache proxy (cluster) "
                       "| FerryMQ / Apache proxy (local) |")
    assert "| send msg/s | 2000 (1000-3000) | 2000 (10-2000) | 3500 (3000-4000) | 1.00 (0.50-1.50) | 0.62 (0.25-1.00) |" in rows
    assert "| send server CPU µs/msg | 100 (100-100) | 100 (50-100) | 100 (100-100) |  |  |" in rows


def test_the_verdict_is_against_the_proxy_in_cluster_mode():
    """FerryMQ at or above the cluster-mode proxy meets the target though below the local-mode one."""
    s = summarize([_round(0, (1000, 900), (1000, 1000), (2000, 2000))])
    assert verdict(s) == {"send": True, "receive": False}
    assert verdict(summarize([_round(0, (1000, 1000), (1000, 1000), (500, 500))])) == {"send": True, "receive": True}
    assert verdict(summarize([])) == {"send": None, "receive": None}


def test_an_unknown_side_is_refused_with_the_known_ones():
    with pytest.raises(SystemExit):
        main(["--sides", "ferrymq,apache"])
