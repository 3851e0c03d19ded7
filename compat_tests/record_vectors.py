"""Capture the golden vectors: real frames from the official clients and from Apache RocketMQ.

Run by hand (the result is committed; tests only decode it):

    .venv/bin/python -m compat_tests.record_vectors            # writes compat_tests/vectors/

It starts Apache's name server and broker (5.5.0 jars), puts a recording proxy (capture.py) in front of
each, and runs the official clients through them. The broker binds 127.0.0.1 but registers 127.0.0.2
as its address, where the broker proxy listens, so clients reach it only through the proxy. The broker
itself registers through the name-server proxy, which captures a real REGISTER_BROKER too.

From the recording it keeps, per client run, the first frame of each interesting kind (route request
and response, heartbeat, send request and response, pull request, and a pull response that carries
messages) and writes ``vectors/<name>.bin`` plus ``vectors/manifest.json`` describing each.
"""

from __future__ import annotations

import argparse
import datetime
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import orjson

from ferrymq.wire.codes import RequestCode

from . import toolchain
from .apache import ApacheBroker, ApacheNamesrv
from .capture import FrameSink, RecordingProxy
from .harness import GoHarness, JavaScenarios

VECTORS = Path(__file__).resolve().parent / "vectors"
ADVERTISED_BROKER_IP = "127.0.0.2"


@dataclass(frozen=True)
class Run:
    name: str  # file name prefix of the vectors from this run
    client: str  # "java" or "go"
    version: str
    serialize: str  # what the client was told to use
    topic: str
    group: str


RUNS = (
    Run("java-5.5.0", "java", toolchain.ROCKETMQ_5, "JSON", "VectorTopicJava", "vector_java_group"),
    Run("java-5.5.0-rocketmq", "java", toolchain.ROCKETMQ_5, "ROCKETMQ", "VectorTopicJavaBin", "vector_javabin_group"),
    Run("java-4.9.8", "java", toolchain.ROCKETMQ_4, "JSON", "VectorTopicJava49", "vector_java49_group"),
    Run("go-2.1.2", "go", "v2.1.2", "JSON", "VectorTopicGo", "vector_go_group"),
)

#: (request code, file stem) captured as requests, with their responses.
KINDS = (
    (RequestCode.GET_ROUTEINFO_BY_TOPIC, "GET_ROUTEINFO_BY_TOPIC"),
    (RequestCode.HEART_BEAT, "HEART_BEAT"),
    (RequestCode.SEND_MESSAGE_V2, "SEND_MESSAGE_V2"),
    (RequestCode.SEND_MESSAGE, "SEND_MESSAGE"),
    (RequestCode.PULL_MESSAGE, "PULL_MESSAGE"),
    (RequestCode.GET_CONSUMER_LIST_BY_GROUP, "GET_CONSUMER_LIST_BY_GROUP"),
    (RequestCode.QUERY_CONSUMER_OFFSET, "QUERY_CONSUMER_OFFSET"),
    (RequestCode.UPDATE_CONSUMER_OFFSET, "UPDATE_CONSUMER_OFFSET"),
    (RequestCode.GET_MAX_OFFSET, "GET_MAX_OFFSET"),
    (RequestCode.UNREGISTER_CLIENT, "UNREGISTER_CLIENT"),
)


def _commands(run: Run, namesrv: str) -> list[tuple[str, list[str]]]:
    send = ["send", "-n", namesrv, "-t", run.topic, "-count", "2", "-tag", "TagA", "-keys", "KeyA",
            "-body", f"golden vector from {run.name}"]
    consume = ["consume", "-n", namesrv, "-t", run.topic, "-count", "2", "-from", "first"]
    consume += ["-g", run.group] if run.client == "go" else ["-g", run.group, "-timeout", "60000"]
    return [("send", send), ("consume", consume)]


def _load_index(raw: Path) -> list[dict]:
    return [orjson.loads(line) for line in (raw / "index.jsonl").read_bytes().splitlines()]


def _select(entries: list[dict], run: Run) -> list[tuple]:
    """(vector name, index entry, description[, code of the request answered]) for one run's frames."""
    mine = [e for e in entries if e.get("run") == run.name and "code" in e]
    chosen = []
    for code, stem in KINDS:
        requests = [e for e in mine if e["direction"] == "c2s" and e["code"] == code and not e["flag"] & 1]
        if not requests:
            continue
        if code == RequestCode.PULL_MESSAGE:
            # A pull whose answer carries messages: SUCCESS (0) with a body.
            for req in requests:
                resp = _response_to(mine, req)
                if resp is not None and resp["code"] == 0 and resp["body_size"] > 0:
                    chosen.append((f"{run.name}-{stem}-request", req, f"{stem} request from the {run.client} client"))
                    chosen.append((f"{run.name}-{stem}-response-with-messages", resp,
                                   "PULL_MESSAGE response from Apache RocketMQ 5.5.0 broker carrying messages",
                                   int(code)))
                    break
            continue
        if code == RequestCode.HEART_BEAT:
            # The richest one: a consumer's heartbeat carries its subscriptions.
            requests = sorted(requests, key=lambda e: -e["body_size"])
        elif code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
            # A route that exists (the first lookups of a new topic answer TOPIC_NOT_EXIST).
            found = [r for r in requests if (_response_to(mine, r) or {}).get("code") == 0]
            found = [r for r in found if (r.get("ext") or {}).get("topic") == run.topic] or found
            missing = [r for r in requests if (_response_to(mine, r) or {}).get("code") == 17]
            if missing:
                chosen.append((f"{run.name}-{stem}-response-TOPIC_NOT_EXIST", _response_to(mine, missing[0]),
                               "TOPIC_NOT_EXIST answer of Apache RocketMQ 5.5.0 name server to a route request",
                               int(code)))
            requests = found or requests
        req = requests[0]
        chosen.append((f"{run.name}-{stem}-request", req, f"{stem} request from the {run.client} client"))
        resp = _response_to(mine, req)
        if resp is not None:
            chosen.append((f"{run.name}-{stem}-response", resp, f"response from Apache RocketMQ 5.5.0 to {stem}",
                           int(code)))
    return chosen


def _response_to(entries: list[dict], req: dict) -> dict | None:
    for e in entries:
        if (e["label"], e["conn"]) == (req["label"], req["conn"]) and e["direction"] == "s2c" \
                and e["flag"] & 1 and e["opaque"] == req["opaque"]:
            return e
    return None


def record(out: Path, keep_raw: Path | None) -> None:
    work = Path(tempfile.mkdtemp(prefix="ferrymq-vectors-"))
    raw = work / "raw"
    sinks: list[FrameSink] = []

    def sink(label: str) -> FrameSink:
        sinks.append(FrameSink(raw, label, run="apache-boot"))
        return sinks[-1]

    ns = ApacheNamesrv.start(work / "namesrv")
    ns_proxy = RecordingProxy(("127.0.0.1", 0), ("127.0.0.1", ns.port), sink("namesrv")).start()
    broker = ApacheBroker.start(work / "broker", ns_proxy.addr, advertised_ip=ADVERTISED_BROKER_IP,
                                bind_ip="127.0.0.1")
    br_proxy = RecordingProxy((ADVERTISED_BROKER_IP, broker.port), ("127.0.0.1", broker.port), sink("broker")).start()
    log: list[dict] = []
    try:
        go = GoHarness(toolchain.go_harness())
        for run in RUNS:
            for s in sinks:
                s.run = run.name
            for what, args in _commands(run, ns_proxy.addr):
                if run.client == "go":
                    result = go(*args, timeout=120)
                else:
                    props = {"rocketmq.serialize.type": run.serialize} if run.serialize != "JSON" else {}
                    java = JavaScenarios(toolchain.java_clients(run.version), work / f"home-{run.name}")
                    result = java(*args, timeout=120, system_properties=props)
                result.check()
                log.append({"run": run.name, "step": what, "argv": [a for a in result.argv if not a.startswith("-D")
                                                                      and len(a) < 200]})
        for s in sinks:
            s.run = "after"
    finally:
        ns_proxy.stop()
        br_proxy.stop()
        broker.stop()
        ns.stop()

    entries = _load_index(raw)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.bin"):
        old.unlink()
    manifest = []
    today = datetime.date.today().isoformat()
    chosen = []
    for run in RUNS:
        chosen += [(run, *c) for c in _select(entries, run)]
    register = [e for e in entries if e.get("code") == RequestCode.REGISTER_BROKER and e["direction"] == "c2s"]
    if register:
        boot = Run("apache-broker-5.5.0", "java", toolchain.ROCKETMQ_5, "JSON", "", "")
        chosen.append((boot, "apache-broker-5.5.0-REGISTER_BROKER-request", register[0],
                       "REGISTER_BROKER from Apache RocketMQ 5.5.0 broker to its name server"))
    for run, name, entry, description, *answered in chosen:
        shutil.copyfile(raw / entry["file"], out / f"{name}.bin")
        manifest.append({
            "file": f"{name}.bin",
            "description": description,
            "client": run.client,
            "client_version": run.version,
            "run": run.name,
            "topic": run.topic,
            "group": run.group,
            "answers_request_code": answered[0] if answered else None,
            "requested_serialization": run.serialize,
            "direction": "client-to-server" if entry["direction"] == "c2s" else "server-to-client",
            "code": entry["code"],
            "serialize": entry["serialize"],
            "language": entry["language"],
            "version": entry["version"],
            "size": entry["size"],
            "body_size": entry["body_size"],
            "captured": today,
        })
    (out / "manifest.json").write_bytes(orjson.dumps(
        {
            "server": f"Apache RocketMQ {toolchain.ROCKETMQ_5} name server and broker (Maven Central jars)",
            "recorded_by": "python -m compat_tests.record_vectors",
            "captured": today,
            "runs": log,
            "vectors": manifest,
        },
        option=orjson.OPT_INDENT_2,
    ) + b"\n")
    if keep_raw is not None:
        shutil.rmtree(keep_raw, ignore_errors=True)
        shutil.copytree(raw, keep_raw)
    shutil.rmtree(work, ignore_errors=True)
    print(f"wrote {len(manifest)} vectors to {out}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Record golden vectors from the official clients.")
    parser.add_argument("--out", type=Path, default=VECTORS)
    parser.add_argument("--keep-raw", type=Path, help="also keep every recorded frame here")
    args = parser.parse_args(argv)
    record(args.out, args.keep_raw)


if __name__ == "__main__":
    main()
