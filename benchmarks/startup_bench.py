"""Start-to-first-send: how long a test suite waits for a real broker before its first message is stored.

Run: ``.venv/bin/python -m benchmarks.startup_bench [--rounds N] [--apache-rounds N] [--out FILE]``.

Each round starts a server on fresh ports and an empty store, then one producer (FerryMQ's SDK, the same
for every server) sends one message to a topic the broker creates on first use; the clock runs from the
start call to the send's SEND_OK. Measured side by side in one run:

* ``ferrymq fixture``: :class:`ferrymq.testing.FerryMQServer`, what the pytest plugin's ``ferrymq`` fixture
  starts (``ferrymq standalone`` in a child process, ready once the name server lists the broker);
* ``ferrymq container``: :class:`ferrymq.testing.containers.FerryMQContainer` on the image the compatibility
  suite builds (a private loopback-only Docker engine, host networking; see compat_tests/docker_engine.py),
  ready once the name server lists the broker at its advertised address. Skipped, saying why, where
  Docker cannot run;
* ``apache``: Apache RocketMQ's name server and broker JVMs, started as the compatibility harness starts
  them (its jars from Maven Central, ready at "boot success" plus the broker's registration).

The SDK's reactor thread is started before the first round, so no round pays for it. Medians are reported
with the spread; "ready" is when the start call returned, "first send" adds the producer's start (route
lookup) and the send.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from ferrymq.sdk import BlockingProducer, Message
from ferrymq.sdk.reactor_thread import ensure_running

TOPIC = "StartupBench"


@dataclass
class Round:
    ready_s: float
    first_send_s: float


def first_send(namesrv_addr: str) -> None:
    with BlockingProducer("startup_bench", namesrv_addr) as producer:
        result = producer.send(Message(TOPIC, b"first"))
        if result.status.name != "SEND_OK":
            raise RuntimeError(f"first send answered {result.status.name}")


def ferrymq_round(home: Path) -> tuple[Round, Callable[[], None]]:
    from ferrymq.testing import FerryMQServer

    start = time.perf_counter()
    server = FerryMQServer(home, {"autoCreateTopicEnable": "true"}).start()
    ready = time.perf_counter()
    first_send(server.namesrv_addr)
    return Round(ready - start, time.perf_counter() - start), server.stop


class ContainerSide:
    """One Docker engine and one image for every container round (their set-up is not timed)."""

    def __init__(self) -> None:
        from testcontainers.core.config import testcontainers_config

        from compat_tests import docker_engine

        docker_engine.ensure_installed()
        self.engine = docker_engine.Engine.start()
        os.environ["DOCKER_HOST"] = self.engine.host
        testcontainers_config.ryuk_disabled = True  # the reaper is an image to pull
        testcontainers_config.tc_host_override = "127.0.0.1"
        docker_engine.build_base(self.engine)
        docker_engine.build_image(self.engine)
        self.image = docker_engine.IMAGE

    def round(self, home: Path) -> tuple[Round, Callable[[], None]]:
        from ferrymq.testing.containers import FerryMQContainer

        container = FerryMQContainer(self.image).with_kwargs(network_mode="host")
        start = time.perf_counter()
        container.start()
        ready = time.perf_counter()
        first_send(container.namesrv_addr)
        return Round(ready - start, time.perf_counter() - start), container.stop

    def close(self) -> None:
        self.engine.stop()


def apache_round(home: Path) -> tuple[Round, Callable[[], None]]:
    from compat_tests.apache import ApacheBroker, ApacheNamesrv

    start = time.perf_counter()
    namesrv = ApacheNamesrv.start(home / "namesrv")
    try:
        broker = ApacheBroker.start(home / "broker", namesrv.addr)
    except BaseException:
        namesrv.stop()
        raise
    ready = time.perf_counter()

    def stop() -> None:
        broker.stop()
        namesrv.stop()

    try:
        first_send(namesrv.addr)
    except BaseException:
        stop()
        raise
    return Round(ready - start, time.perf_counter() - start), stop


def measure(start: Callable[[Path], tuple[Round, Callable[[], None]]], rounds: int) -> list[Round]:
    done = []
    for _ in range(rounds):
        home = Path(tempfile.mkdtemp(prefix="startup-bench-"))
        try:
            result, stop = start(home)
            stop()
            done.append(result)
        finally:
            shutil.rmtree(home, ignore_errors=True)
    return done


def summary(results: dict[str, list[Round]]) -> list[dict[str, object]]:
    rows = []
    apache = results.get("apache")
    apache_send = statistics.median(r.first_send_s for r in apache) if apache else None
    for name, done in results.items():
        sends = [r.first_send_s for r in done]
        median = statistics.median(sends)
        rows.append({
            "server": name, "rounds": len(done),
            "ready_median_s": round(statistics.median(r.ready_s for r in done), 3),
            "first_send_median_s": round(median, 3),
            "first_send_min_s": round(min(sends), 3), "first_send_max_s": round(max(sends), 3),
            "apache_over_this": round(apache_send / median, 1) if apache_send else None,
        })
    return rows


def table(rows: list[dict[str, object]]) -> str:
    out = ["| server | rounds | ready (median) | first send (median) | first send (min-max) | Apache / this |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['apache_over_this']}x" if r["apache_over_this"] else "–"
        out.append(f"| {r['server']} | {r['rounds']} | {r['ready_median_s']:.2f} s | {r['first_send_median_s']:.2f} s | "
                   f"{r['first_send_min_s']:.2f}-{r['first_send_max_s']:.2f} s | {ratio} |")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> list[dict[str, object]]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10, help="rounds for each FerryMQ side (default 10)")
    parser.add_argument("--apache-rounds", type=int, default=3, help="rounds for Apache (default 3)")
    parser.add_argument("--no-container", action="store_true", help="leave the container side out")
    parser.add_argument("--out", type=Path, help="write the rows as JSON here")
    args = parser.parse_args(argv if argv is not None else [])
    ensure_running()
    results = {"ferrymq fixture": measure(ferrymq_round, args.rounds)}
    if not args.no_container:
        from compat_tests.docker_engine import DockerUnavailable

        try:
            side = ContainerSide()
        except DockerUnavailable as exc:
            print(f"container side skipped: Docker cannot run here ({exc})")
        else:
            try:
                results["ferrymq container"] = measure(side.round, args.rounds)
            finally:
                side.close()
    results["apache"] = measure(apache_round, args.apache_rounds)
    rows = summary(results)
    print(table(rows))
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "rounds": {k: [asdict(r) for r in v] for k, v in results.items()}},
                                       indent=2) + "\n")
    return rows


if __name__ == "__main__":
    import sys

    main(sys.argv[1:])
