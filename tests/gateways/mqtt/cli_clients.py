"""Command-line MQTT clients as devices: ``mosquitto_pub``/``mosquitto_sub`` (Debian's mosquitto-clients) and
the MQTT.js CLI (npm ``mqtt``, ``mqtt pub``/``mqtt sub``).

mosquitto-clients is installed with apt-get when missing, like mosquitto; MQTT.js into ``.cache/mqtt-js``
beside this file on first use, like the mqtt-packet oracle. A publisher is one process per message; a
subscriber runs in the background and its printed lines are parsed as they come. Neither CLI says when its
subscription is in place, so :meth:`Subscriber.wait_subscribed` publishes probes on a matching topic until
one is printed (probes are then left out of what it received).
"""

from __future__ import annotations

import fcntl
import json
import queue
import shutil
import subprocess
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Self

import pytest
from ferrymq.testing.ports import LOOPBACK

from .mosquitto import ensure_installed, terminate

CACHE = Path(__file__).resolve().parent / ".cache" / "mqtt-js"
MQTT_JS = "mqtt@5"
TIMEOUT = 10.0
#: the payloads of readiness probes start with this
PROBE = "probe-"
#: the ``-V`` of mosquitto-clients and the ``--protocolVersion`` of MQTT.js per MQTT protocol level
MOSQUITTO_VERSIONS = {4: "mqttv311", 5: "mqttv5"}


@dataclass
class Received:
    """One message a subscriber printed; ``qos``, ``retain`` and ``user_properties`` only where it prints them
    (mosquitto_sub; MQTT.js prints topic and payload)."""

    topic: str
    payload: str
    qos: int | None = None
    retain: bool | None = None
    user_properties: dict[str, str] = field(default_factory=dict)
    content_type: str | None = None


def mqtt_js() -> list[str]:
    """The argv prefix running the MQTT.js CLI, installed on first use; the test is skipped without node/npm."""
    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"{' and '.join(missing)} not on PATH: the MQTT.js CLI cannot run")
    cli = CACHE / "node_modules" / "mqtt" / "build" / "bin" / "mqtt.js"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not cli.exists():
            subprocess.run(["npm", "install", "--no-audit", "--no-fund", "--prefix", str(CACHE), MQTT_JS],
                           check=True, capture_output=True, timeout=300)
    return [shutil.which("node"), str(cli)]


def mosquitto_pub(port: int, topic: str, payload: str, qos: int = 0, version: int = 5, *,
                  user_properties: dict[str, str] | None = None, content_type: str | None = None) -> None:
    """Publish one message with ``mosquitto_pub`` and wait for it to leave (after PUBACK/PUBCOMP)."""
    argv = [ensure_installed("mosquitto_pub", "mosquitto-clients"), "-h", LOOPBACK, "-p", str(port),
            "-V", MOSQUITTO_VERSIONS[version], "-t", topic, "-m", payload, "-q", str(qos)]
    for name, value in (user_properties or {}).items():
        argv += ["-D", "publish", "user-property", name, value]
    if content_type is not None:
        argv += ["-D", "publish", "content-type", content_type]
    _run(argv)


def mosquitto_pub_lines(port: int, topic: str, lines: list[str], qos: int = 0, version: int = 5) -> None:
    """Publish each line as one message from one connection (``mosquitto_pub -l``), as a device streaming
    readings does."""
    argv = [ensure_installed("mosquitto_pub", "mosquitto-clients"), "-h", LOOPBACK, "-p", str(port),
            "-V", MOSQUITTO_VERSIONS[version], "-t", topic, "-l", "-q", str(qos)]
    _run(argv, "".join(f"{line}\n" for line in lines))


def mqtt_js_pub(port: int, topic: str, payload: str, qos: int = 0, version: int = 5, *,
                user_properties: dict[str, str] | None = None) -> None:
    """Publish one message with ``mqtt pub``; MQTT 5 user properties as its ``--properties.userProperties.NAME``
    options (the CLI passes its options to ``publish``)."""
    argv = [*mqtt_js(), "pub", "-h", LOOPBACK, "-p", str(port), "--protocolVersion", str(version), "-t", topic,
            "-m", payload, "-q", str(qos)]
    for name, value in (user_properties or {}).items():
        argv += [f"--properties.userProperties.{name}", value]
    _run(argv)


def _run(argv: list[str], stdin: str | None = None) -> None:
    proc = subprocess.run(argv, input=stdin or "", capture_output=True, text=True, timeout=TIMEOUT, check=False)
    # MQTT.js prints a failed publish and still exits 0
    assert proc.returncode == 0 and not proc.stderr.strip(), f"{argv}: exit {proc.returncode}\n{proc.stderr}"


class Subscriber:
    """A CLI subscriber of one filter in the background: ``mosquitto_sub`` printing each message as JSON
    (``-F %j``), or ``mqtt sub -v`` printing ``topic payload``."""

    def __init__(self, argv: list[str], parse):
        self.argv = argv
        self._parse = parse
        self._lines: queue.Queue[str] = queue.Queue()
        self._err: list[str] = []
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        for stream, sink in ((self.proc.stdout, self._lines.put), (self.proc.stderr, self._err.append)):
            threading.Thread(target=self._pump, args=(stream, sink), daemon=True).start()

    @staticmethod
    def _pump(stream, sink) -> None:
        for line in stream:
            sink(line)

    @classmethod
    def mosquitto(cls, port: int, topic_filter: str, qos: int = 0, version: int = 5) -> Subscriber:
        argv = [ensure_installed("mosquitto_sub", "mosquitto-clients"), "-h", LOOPBACK, "-p", str(port),
                "-V", MOSQUITTO_VERSIONS[version], "-t", topic_filter, "-q", str(qos), "-F", "%j"]
        return cls(argv, _parse_mosquitto)

    @classmethod
    def mqtt_js(cls, port: int, topic_filter: str, qos: int = 0, version: int = 5) -> Subscriber:
        argv = [*mqtt_js(), "sub", "-h", LOOPBACK, "-p", str(port), "--protocolVersion", str(version),
                "-t", topic_filter, "-q", str(qos), "-v"]
        return cls(argv, _parse_mqtt_js)

    def wait_subscribed(self, probe_topic: str, publish) -> None:
        """Publish probes on ``probe_topic`` (``publish(topic, payload)``) until this subscriber prints one."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"{self.argv} exited: {''.join(self._err)}"
            publish(probe_topic, f"{PROBE}{uuid.uuid4().hex[:8]}")
            try:
                line = self._lines.get(timeout=0.3)
            except queue.Empty:
                continue
            got = self._parse(line)
            assert got.payload.startswith(PROBE), f"{self.argv}: {got} before any probe"
            return
        raise AssertionError(f"{self.argv}: no probe on {probe_topic} arrived: {''.join(self._err)}")

    def _next(self, timeout: float) -> Received | None:
        """The next message that is not a probe, or None after ``timeout``."""
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            try:
                got = self._parse(self._lines.get(timeout=left))
            except queue.Empty:
                return None
            if not got.payload.startswith(PROBE):
                return got
        return None

    def receive(self, n: int, timeout: float = TIMEOUT) -> list[Received]:
        got = []
        for _ in range(n):
            msg = self._next(timeout)
            assert msg is not None, f"{self.argv}: {len(got)} of {n} messages: {got} {''.join(self._err)}"
            got.append(msg)
        return got

    def nothing_more(self, wait: float = 0.5) -> None:
        extra = self._next(wait)
        assert extra is None, f"{self.argv}: unexpected {extra}"

    def close(self) -> None:
        terminate(self.proc)

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _parse_mosquitto(line: str) -> Received:
    msg = json.loads(line)
    props = msg.get("properties", {})
    return Received(msg["topic"], msg["payload"], msg["qos"], bool(msg["retain"]), props.get("user-properties", {}),
                    props.get("content-type"))


def _parse_mqtt_js(line: str) -> Received:
    topic, _, payload = line.rstrip("\n").partition(" ")
    return Received(topic, payload)
