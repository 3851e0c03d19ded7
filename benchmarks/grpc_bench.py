"""gRPC send and receive+ack through FerryMQ's grpcListenPort beside Apache's proxy (cluster and local mode), one run.

Run: ``.venv/bin/python -m benchmarks.grpc_bench [--quick | --full] [--rounds N]
[--sides ferrymq,apache-cluster,apache-local] [--tls-mode MODE] [--event-loop BROKER|OWN_THREAD] [--out FILE]``.

The sides, each ASYNC_FLUSH on temp stores and loopback, in its default ``tls.server.mode``
(permissive: TLS and plain on one port, told apart by their first byte, docs/grpc.md; ``--tls-mode``
sets another for FerryMQ):

* ``ferrymq``: ``ferrymq standalone`` with grpcListenPort, the gRPC service in the broker's process;
* ``apache-cluster``: Apache 5.5.0's name server, a broker, and its proxy in cluster mode (ProxyStartup's
  default) in a JVM of its own, forwarding each call to the broker over remoting: the deployment the
  target speaks of (the proxy's hop);
* ``apache-local``: Apache's name server and its proxy in local mode, the broker in the proxy's JVM (no
  hop at all).

They are started once and driven in rounds, the order of the sides reversed every round so drift of the
shared machine favours none.
Each round, on each side, on a new topic of ``queues`` queues:

* **send**: ``concurrency`` callers on one asyncio loop (grpcio, the v2 stubs Apache generates), each
  sending the next 1 KiB message (SendMessage) when the last is answered; untimed for ``warmup_s``, then
  the rate and latency percentiles over ``seconds``;
* **receive+ack**: the messages of the round's send, taken by ``receivers`` consumers of a new group
  (each with its settings synced over Telemetry, as the SDKs do), ReceiveMessage of up to 32 then one
  AckMessage for them; the rate runs from the first receive to the last ack.

The load tool runs in this process: its CPU (cores: CPU seconds over wall seconds) is reported beside
each figure, so a reader can tell whether it or the server was the limit. The server's CPU per message
(its processes and their children, from /proc, over the same window: for ``apache-cluster`` the proxy's
JVM and the broker's) is reported too: a figure other work on a shared machine disturbs far less than the
rates. Figures are medians over the rounds, with their range; the FerryMQ/Apache ratios, against each
Apache side, are taken within each round first.
Target (issue 27): >= 1.0x Apache's proxy for both, judged against ``apache-cluster`` (the issue's premise
is the proxy's hop); the ratios against ``apache-local`` are reported beside it.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import resource
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from benchmarks.rounds import run_rounds, spread
from benchmarks.sidebyside.procstat import tree_cpu_s

TARGET_RATIO = 1.0
#: the Apache sides, each named for its proxy's mode (compat_tests.apache.PROXY_MODES)
REFERENCES = ("apache-cluster", "apache-local")
SIDES = ("ferrymq", *REFERENCES)
#: the reference the target is judged against
VERDICT_REFERENCE = "apache-cluster"


@dataclass(frozen=True)
class Plan:
    rounds: int = 2
    seconds: float = 5.0
    warmup_s: float = 1.0
    concurrency: int = 16
    message_size: int = 1024
    receivers: int = 4
    batch: int = 32
    queues: int = 8
    sides: tuple[str, ...] = SIDES
    #: FerryMQ's tls.server.mode (the load is plain gRPC: permissive or disabled)
    tls_mode: str = "permissive"
    #: FerryMQ's grpcEventLoop (BROKER, OWN_THREAD), or "" for its default
    event_loop: str = ""

    @classmethod
    def quick(cls, **overrides) -> "Plan":
        return replace(cls(), **overrides)

    @classmethod
    def full(cls, **overrides) -> "Plan":
        return replace(cls(rounds=5, seconds=20.0, warmup_s=5.0), **overrides)


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def percentile(sorted_ms: list[float], q: float) -> float:
    if not sorted_ms:
        return 0.0
    return sorted_ms[min(len(sorted_ms) - 1, int(q / 100 * len(sorted_ms)))]


# -- the load (grpcio asyncio, the v2 stubs) -----------------------------------------------------------


def _protocol():
    from rocketmq.grpc_protocol import definition_pb2 as pb
    from rocketmq.grpc_protocol import service_pb2 as service
    from rocketmq.grpc_protocol import service_pb2_grpc as service_grpc

    return pb, service, service_grpc


def _per_message_us(cpu_s: float, messages: int) -> float:
    return round(1e6 * cpu_s / messages, 1) if messages else 0.0


async def send_load(endpoint: str, topic: str, plan: Plan, server_cpu_s: Callable[[], float]) -> dict[str, float]:
    """``plan.concurrency`` closed-loop senders: warm-up, then ``plan.seconds`` measured (the server's CPU
    per message, ``server_cpu_s()`` before and after, too)."""
    import grpc

    pb, service, service_grpc = _protocol()
    metadata = (("x-mq-client-id", f"grpc-bench-producer-{uuid.uuid4().hex[:8]}"), ("x-mq-language", "PYTHON"))
    body = b"m" * plan.message_size
    latencies: list[float] = []
    counts = {"ok": 0, "failed": 0}
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_grpc.MessagingServiceStub(channel)
        started = time.monotonic()
        measure_from = started + plan.warmup_s
        stop_at = measure_from + plan.seconds

        async def sender() -> None:
            while (now := time.monotonic()) < stop_at:
                message = pb.Message(topic=pb.Resource(name=topic), body=body, system_properties=pb.SystemProperties(
                    message_id=uuid.uuid4().hex.upper(), message_type=pb.NORMAL))
                answer = await stub.SendMessage(service.SendMessageRequest(messages=[message]), metadata=metadata,
                                                timeout=10)
                if now >= measure_from:
                    latencies.append((time.monotonic() - now) * 1000)
                    counts["ok" if answer.status.code == pb.OK else "failed"] += 1

        await asyncio.sleep(0)
        cpu = None
        tasks = [asyncio.ensure_future(sender()) for _ in range(plan.concurrency)]
        await asyncio.sleep(max(0.0, measure_from - time.monotonic()))
        cpu, server = _cpu_s(), server_cpu_s()
        await asyncio.gather(*tasks)
        cpu, server = _cpu_s() - cpu, server_cpu_s() - server
    latencies.sort()
    return {"tps": round(counts["ok"] / plan.seconds, 1), "ok": counts["ok"], "failed": counts["failed"],
            "p50_ms": round(percentile(latencies, 50), 3), "p99_ms": round(percentile(latencies, 99), 3),
            "tool_cores": round(cpu / plan.seconds, 2),
            "server_cpu_us_per_msg": _per_message_us(server, counts["ok"] + counts["failed"])}


async def receive_load(endpoint: str, topic: str, group: str, expected: int, plan: Plan,
                       server_cpu_s: Callable[[], float], timeout_s: float = 120.0) -> dict[str, float]:
    """``plan.receivers`` consumers receive and ack until ``expected`` messages are acked (or the time is up)."""
    import grpc
    from google.protobuf.duration_pb2 import Duration

    pb, service, service_grpc = _protocol()
    done = {"acked": 0, "first": 0.0, "last": 0.0}
    async with grpc.aio.insecure_channel(endpoint) as channel:
        stub = service_grpc.MessagingServiceStub(channel)

        async def consumer() -> None:
            metadata = (("x-mq-client-id", f"grpc-bench-consumer-{uuid.uuid4().hex[:8]}"), ("x-mq-language", "PYTHON"),
                        ("x-mq-client-version", "5.0.7"))
            subscription = pb.Subscription(group=pb.Resource(name=group), subscriptions=[pb.SubscriptionEntry(
                topic=pb.Resource(name=topic), expression=pb.FilterExpression(type=pb.TAG, expression="*"))])
            closed = asyncio.Event()

            async def commands():
                yield service.TelemetryCommand(settings=pb.Settings(
                    client_type=pb.SIMPLE_CONSUMER, request_timeout=Duration(seconds=3), subscription=subscription))
                await closed.wait()

            telemetry = stub.Telemetry(commands(), metadata=metadata)
            await telemetry.read()  # the server's settings: the receives may begin
            deadline = time.monotonic() + timeout_s
            request = service.ReceiveMessageRequest(
                group=pb.Resource(name=group), message_queue=pb.MessageQueue(topic=pb.Resource(name=topic), id=-1),
                filter_expression=pb.FilterExpression(type=pb.TAG, expression="*"), batch_size=plan.batch,
                invisible_duration=Duration(seconds=30), long_polling_timeout=Duration(seconds=5))
            try:
                while done["acked"] < expected and time.monotonic() < deadline:
                    if not done["first"]:
                        done["first"] = time.monotonic()
                    entries = []
                    async for response in stub.ReceiveMessage(request, metadata=metadata, timeout=15):
                        if response.WhichOneof("content") == "message":
                            sp = response.message.system_properties
                            entries.append(service.AckMessageEntry(message_id=sp.message_id,
                                                                   receipt_handle=sp.receipt_handle))
                    if entries:
                        await stub.AckMessage(service.AckMessageRequest(
                            group=pb.Resource(name=group), topic=pb.Resource(name=topic), entries=entries),
                            metadata=metadata, timeout=10)
                        done["acked"] += len(entries)
                        done["last"] = time.monotonic()
            finally:
                closed.set()
                telemetry.cancel()

        cpu, server = _cpu_s(), server_cpu_s()
        await asyncio.gather(*(consumer() for _ in range(plan.receivers)))
        cpu, server = _cpu_s() - cpu, server_cpu_s() - server
    seconds = max(done["last"] - done["first"], 1e-6)
    return {"tps": round(done["acked"] / seconds, 1), "acked": done["acked"], "expected": expected,
            "seconds": round(seconds, 3), "tool_cores": round(cpu / seconds, 2),
            "server_cpu_us_per_msg": _per_message_us(server, done["acked"])}


# -- rounds and their summary --------------------------------------------------------------------------


@dataclass
class Round:
    index: int
    order: list[str]
    send: dict[str, dict[str, float]] = field(default_factory=dict)
    receive: dict[str, dict[str, float]] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


def summarize(rounds: list[Round]) -> dict[str, Any]:
    """Per side the medians (and range) of send rate, send p99 and receive+ack rate; per Apache side the
    FerryMQ/Apache ratios (``send_ratio[reference]``), taken within each round that has both sides."""
    out: dict[str, Any] = {}
    for side in SIDES:
        out[side] = {
            "send_tps": spread([r.send[side]["tps"] for r in rounds if side in r.send]),
            "send_p99_ms": spread([r.send[side]["p99_ms"] for r in rounds if side in r.send]),
            "send_cpu_us": spread([r.send[side]["server_cpu_us_per_msg"] for r in rounds if side in r.send]),
            "receive_tps": spread([r.receive[side]["tps"] for r in rounds if side in r.receive]),
            "receive_cpu_us": spread([r.receive[side]["server_cpu_us_per_msg"] for r in rounds if side in r.receive]),
        }
    for phase in ("send", "receive"):
        out[f"{phase}_ratio"] = {reference: _ratio(rounds, phase, reference) for reference in REFERENCES}
    return out


def _ratio(rounds: list[Round], phase: str, reference: str) -> dict[str, float] | None:
    """FerryMQ's rate over ``reference``'s in each round that has both, then their spread."""
    figures = [getattr(r, phase) for r in rounds]
    return spread([f["ferrymq"]["tps"] / f[reference]["tps"] for f in figures
                   if "ferrymq" in f and reference in f and f[reference]["tps"]])


def verdict(summary: dict[str, Any]) -> dict[str, bool | None]:
    """The target against :data:`VERDICT_REFERENCE` (None where a phase has no ratio)."""
    def met(figure: dict | None) -> bool | None:
        return None if figure is None else figure["median"] >= TARGET_RATIO

    return {phase: met(summary[f"{phase}_ratio"][VERDICT_REFERENCE]) for phase in ("send", "receive")}


def _cell(figure: dict | None, digits: int = 0) -> str:
    if figure is None:
        return "-"
    return f"{figure['median']:.{digits}f} ({figure['min']:.{digits}f}-{figure['max']:.{digits}f})"


#: the table's column for each side
SIDE_TITLES = {"ferrymq": "FerryMQ", "apache-cluster": "Apache proxy (cluster)", "apache-local": "Apache proxy (local)"}


def table(summary: dict[str, Any]) -> str:
    titles = [SIDE_TITLES[side] for side in SIDES] + [f"FerryMQ / {SIDE_TITLES[ref]}" for ref in REFERENCES]
    rows = ["| | " + " | ".join(titles) + " |", "|---" * (len(titles) + 1) + "|"]
    for label, key, digits, ratio in (("send msg/s", "send_tps", 0, "send_ratio"),
                                      ("send p99 ms", "send_p99_ms", 2, None),
                                      ("send server CPU µs/msg", "send_cpu_us", 0, None),
                                      ("receive+ack msg/s", "receive_tps", 0, "receive_ratio"),
                                      ("receive+ack server CPU µs/msg", "receive_cpu_us", 0, None)):
        cells = [_cell(summary[side][key], digits) for side in SIDES]
        cells += [_cell(summary[ratio][ref], 2) if ratio else "" for ref in REFERENCES]
        rows.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


# -- the servers ---------------------------------------------------------------------------------------


class Bench:
    """The sides' servers, started once; :meth:`round` drives each side in turn."""

    def __init__(self, plan: Plan, home: Path):
        self.plan = plan
        self.home = home
        self.endpoints: dict[str, tuple[str, str]] = {}  # side -> (namesrv, gRPC endpoint)
        self.pids: dict[str, tuple[int, ...]] = {}  # side -> the server's processes
        self._stops: list = []

    def start(self) -> None:
        for side in REFERENCES:
            if side in self.plan.sides:
                self._start_apache(side)
        if "ferrymq" in self.plan.sides:
            from ferrymq.testing import FerryMQServer

            conf = {"flushDiskType": "ASYNC_FLUSH", "tls.server.mode": self.plan.tls_mode}
            if self.plan.event_loop:
                conf["grpcEventLoop"] = self.plan.event_loop
            server = FerryMQServer(self.home / "ferrymq", conf, grpc=True)
            server.start()
            self._stops.append(server.stop)
            self.endpoints["ferrymq"] = (server.namesrv_addr, server.grpc_endpoint)
            self.pids["ferrymq"] = (server.pid,)

    def _start_apache(self, side: str) -> None:
        """A name server of the side's own and its proxy in the side's mode (one side boots at a time:
        several JVMs booting at once on two cores outrun the boot timeouts)."""
        from compat_tests.apache import ApacheNamesrv, ApacheProxy

        mode = side.removeprefix("apache-")
        ns = ApacheNamesrv.launch(self.home / f"{side}-namesrv")
        self._stops.append(ns.stop)
        proxy = ApacheProxy.launch(self.home / side, ns.addr, mode=mode)
        self._stops.append(proxy.stop)
        ns.wait_ready()
        proxy.wait_ready()
        self.endpoints[side] = (ns.addr, proxy.grpc_endpoint)
        self.pids[side] = proxy.pids

    def stop(self) -> None:
        for stop in reversed(self._stops):
            try:
                stop()
            except Exception as exc:  # noqa: BLE001 - stop the others all the same
                print(f"stopping: {exc!r}", file=sys.stderr)

    def _topic_and_group(self, namesrv: str) -> tuple[str, str]:
        """A new topic and consumer group (the proxy takes no consumer of a group its broker lacks)."""
        from ferrymq.sdk.blocking_clients import BlockingMQAdmin
        from ferrymq.wire.bodies import SubscriptionGroupConfig

        topic, group = f"GrpcBench_{uuid.uuid4().hex[:8]}", f"grpc_bench_{uuid.uuid4().hex[:8]}"
        with BlockingMQAdmin(namesrv) as admin:
            admin.create_topic(topic, self.plan.queues)
            for addr in admin.master_addrs():
                admin.api.create_subscription_group(addr, SubscriptionGroupConfig(group_name=group))
            admin.wait_for_route(topic)
        return topic, group

    def round(self, index: int) -> Round:
        order = [s for s in SIDES if s in self.plan.sides]
        if index % 2:
            order.reverse()
        done = Round(index, order)
        for side in order:
            namesrv, endpoint = self.endpoints[side]
            server_cpu_s = functools.partial(_trees_cpu_s, self.pids[side])
            try:
                topic, group = self._topic_and_group(namesrv)
                done.send[side] = asyncio.run(send_load(endpoint, topic, self.plan, server_cpu_s))
                expected = done.send[side]["ok"]
                # the warm-up's messages are there too: the rate is of as many as were measured
                done.receive[side] = asyncio.run(receive_load(endpoint, topic, group, expected, self.plan,
                                                              server_cpu_s))
            except Exception as exc:  # noqa: BLE001 - the round goes on with the other side
                done.errors[side] = f"{type(exc).__name__}: {exc}"
        return done


def _trees_cpu_s(pids: tuple[int, ...]) -> float:
    return sum(tree_cpu_s(pid) for pid in pids)


def describe(done: Round) -> str:
    parts = []
    for side in done.order:
        if side in done.errors:
            parts.append(f"{side}: {done.errors[side]}")
            continue
        s, r = done.send.get(side, {}), done.receive.get(side, {})
        parts.append(f"{side}: send {s.get('tps')} msg/s p99 {s.get('p99_ms')} ms, server "
                     f"{s.get('server_cpu_us_per_msg')} µs/msg (tool {s.get('tool_cores')} cores), receive+ack "
                     f"{r.get('tps')} msg/s, server {r.get('server_cpu_us_per_msg')} µs/msg "
                     f"(tool {r.get('tool_cores')} cores)")
    return "; ".join(parts)


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.grpc_bench", description=__doc__.split("\n\n")[0])
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="short rounds (the default)")
    size.add_argument("--full", action="store_true", help="the documented run: 5 rounds of 20 s")
    parser.add_argument("--rounds", type=int)
    parser.add_argument("--seconds", type=float)
    parser.add_argument("--sides", default=",".join(SIDES), help=f"of {','.join(SIDES)} (default all)")
    parser.add_argument("--tls-mode", choices=("permissive", "disabled"), default="permissive",
                        help="FerryMQ's tls.server.mode (default permissive, as Apache's)")
    parser.add_argument("--event-loop", choices=("BROKER", "OWN_THREAD"), default="",
                        help="FerryMQ's grpcEventLoop (default: the server's default)")
    parser.add_argument("--out", type=Path, help="write the results as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the work dir")
    args = parser.parse_args(argv)
    sides = tuple(s for s in args.sides.split(",") if s)
    if unknown := set(sides) - set(SIDES):
        parser.error(f"--sides: unknown {', '.join(sorted(unknown))} (the sides: {', '.join(SIDES)})")
    overrides: dict[str, Any] = {"sides": sides, "tls_mode": args.tls_mode,
                                 "event_loop": args.event_loop}
    if args.rounds:
        overrides["rounds"] = args.rounds
    if args.seconds:
        overrides["seconds"] = args.seconds
    plan = Plan.full(**overrides) if args.full else Plan.quick(**overrides)
    return run_rounds("grpc_bench", Bench, plan, describe, args, argv, summarize, table, verdict)


if __name__ == "__main__":
    main(sys.argv[1:])
