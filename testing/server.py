"""A real FerryMQ server for tests: ``ferrymq standalone`` (a name server and one broker registered with it)
in a child process, on free loopback ports, over a store in a directory of the caller's.

A child process rather than the test's own: the test process gets no Twisted reactor imposed on it, the
server's log is a file of its own (shown when a test fails), and a restart or a crash (:meth:`kill`) is
the real thing. The server is ready when its name server lists the broker, the state a client needs to
find a route; that takes well under a second.
"""

from __future__ import annotations

import re
import signal
import ssl
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

from ferrymq.wire.bodies import SubscriptionGroupConfig

from . import admin
from .forkserver import ForkedProcess, start_cli
from .ports import LOOPBACK, free_port

#: the log lines that give the ports the two servers bound (the name server's is 0, chosen by the kernel)
NAMESRV_UP = re.compile(r"name server listening on [\d.]+:(\d+)")
BROKER_UP = re.compile(r"broker \S+ \(cluster \S+\) listening on [\d.]+:(\d+)")
#: the broker's listenPort was taken between choosing it and binding it: choose another
BROKER_PORT_TAKEN = re.compile(r"\blistenPort \d+ is in use")
#: the HTTP gateway's client is up: requests are served from now on
HTTP_UP = re.compile(r"HTTP gateway listening on [\d.]+:(\d+)")
#: the MQTT gateway's client is up: devices are served from now on
MQTT_UP = re.compile(r"MQTT gateway listening on [\d.]+:(\d+)")

#: A store of small files for tests (an 8 MiB commit-log segment still holds the largest message, 4 MiB),
#: with nothing written ahead of the writer: a few MB on disk instead of Apache's gigabytes.
SMALL_STORE: dict[str, str] = {
    "mappedFileSizeCommitLog": str(8 << 20),
    "mappedFileSizeConsumeQueue": str(20 * 30_000),
    "maxHashSlotNum": "10000",
    "maxIndexNum": "40000",
    "warmMapedFileEnable": "false",
}

#: Broker settings under the caller's: loopback only, a small temp store, FerryMQ's defaults (Apache's)
#: otherwise.
TEST_DEFAULTS: dict[str, str] = {
    "bindAddress": LOOPBACK,
    "brokerIP1": LOOPBACK,
    "brokerClusterName": "DefaultCluster",
    "brokerName": "broker-a",
    **SMALL_STORE,
}

#: how many broker ports to try when the chosen one is taken before the broker binds it
PORT_ATTEMPTS = 5


class ServerStartError(RuntimeError):
    """The server exited or did not become ready; the message ends with its log."""


def conf_value(value: object) -> str:
    """A Python value as a config file spells it (``True`` -> ``true``)."""
    return str(value).lower() if isinstance(value, bool) else str(value)


class FerryMQServer:
    """``ferrymq standalone`` in a child process: ``namesrv_addr`` for clients, ``broker_addr`` for admin calls.

    ``conf`` holds Apache config keys (``flushDiskType``, ``enablePropertyFilter``, ``messageDelayLevel``...)
    laid over :data:`TEST_DEFAULTS`. Ports are chosen at the first :meth:`start` and kept by :meth:`restart`,
    so clients reconnect to the same addresses. Usable as a context manager.

    The HTTP gateway is off unless ``http`` is true (or ``httpListenPort`` is given): then ``http_url`` is
    its base URL, on a free loopback port. The MQTT gateway likewise with ``mqtt`` (``mqttListenPort``):
    devices connect to ``mqtt_port`` on the loopback address; and the gRPC service with ``grpc``
    (``grpcListenPort``): the rocketmq-clients SDKs connect to ``grpc_endpoint``.
    """

    def __init__(self, home: Path | str, conf: Mapping[str, object] | None = None, *, start_timeout: float = 30.0,
                 http: bool = False, mqtt: bool = False, grpc: bool = False):
        self.home = Path(home)
        self.conf = {**TEST_DEFAULTS, **{key: conf_value(value) for key, value in (conf or {}).items()}}
        self.start_timeout = start_timeout
        self.log_path = self.home / "ferrymq.log"
        self.namesrv_port = int(self.conf.pop("namesrvListenPort", 0))
        self.broker_port = int(self.conf.pop("listenPort", 0))
        self.http_port = int(self.conf.pop("httpListenPort", 0))
        self.http = http or self.http_port != 0
        self.mqtt_port = int(self.conf.pop("mqttListenPort", 0))
        self.mqtt = mqtt or self.mqtt_port != 0
        self.grpc_port = int(self.conf.pop("grpcListenPort", 0))
        self.grpc = grpc or self.grpc_port != 0
        self._proc: subprocess.Popen | ForkedProcess | None = None
        self._admin_tls: admin.Tls | None = None

    # ------------------------------------------------------------------ what clients use

    @property
    def namesrv_addr(self) -> str:
        return f"{LOOPBACK}:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"{LOOPBACK}:{self.broker_port}"

    @property
    def http_url(self) -> str:
        """The HTTP gateway's base URL (docs/http.md); start the server with ``http=True``."""
        if not self.http:
            raise RuntimeError("this server runs no HTTP gateway: start it with http=True")
        return f"http://{LOOPBACK}:{self.http_port}"

    @property
    def grpc_endpoint(self) -> str:
        """``host:port`` of the gRPC MessagingService (docs/grpc.md); start the server with ``grpc=True``."""
        if not self.grpc:
            raise RuntimeError("this server serves no gRPC: start it with grpc=True")
        return f"{LOOPBACK}:{self.grpc_port}"

    @property
    def broker_name(self) -> str:
        return self.conf["brokerName"]

    @property
    def cluster(self) -> str:
        return self.conf["brokerClusterName"]

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    @property
    def admin_tls(self) -> admin.Tls:
        """How :meth:`create_topic`, :meth:`create_group` and the readiness check connect: plain, or, to a
        server taking TLS clients only (``tls.server.mode=enforcing``), over TLS presenting the certificate
        the server's own connections present (``tls.client.certPath``) when it has one, for a server that
        requires client certificates."""
        if self._admin_tls is None:
            self._admin_tls = False
            if self.conf.get("tls.server.mode") == "enforcing":
                tls = _tls_keys(self.conf)
                self._admin_tls = ssl._create_unverified_context()
                if tls.get("tls.client.certPath") and tls.get("tls.client.keyPath"):
                    self._admin_tls.load_cert_chain(tls["tls.client.certPath"], tls["tls.client.keyPath"],
                                                    tls.get("tls.client.keyPassword") or None)
        return self._admin_tls

    @property
    def pid(self) -> int:
        """The server's process (its CPU and memory are read from /proc by the benchmarks)."""
        if self._proc is None:
            raise RuntimeError("the server is not started")
        return self._proc.pid

    def create_topic(self, topic: str, queues: int = 4, *, order: bool = False, timeout: float = 10.0) -> str:
        """Create ``topic`` with ``queues`` read and write queues and wait until the name server routes it."""
        admin.create_topic(self.broker_addr, topic, queues, order=order, tls=self.admin_tls)
        deadline = time.monotonic() + timeout
        while True:
            found = admin.route(self.namesrv_addr, topic, tls=self.admin_tls)
            if found and any(q.broker_name == self.broker_name and q.read_queue_nums == queues
                             for q in found.queue_datas):
                return topic
            if time.monotonic() > deadline:
                raise TimeoutError(f"topic {topic}: no route with {queues} queues after {timeout} s")
            time.sleep(0.01)

    def create_group(self, group: str, **settings: object) -> str:
        """Create the subscription group ``group``; ``settings`` are SubscriptionGroupConfig's fields
        (``retry_max_times=3``, ``consume_message_orderly=True``, ``consume_broadcast_enable=False``...)."""
        admin.create_group(self.broker_addr, SubscriptionGroupConfig(group_name=group, **settings), self.admin_tls)
        return group

    # ------------------------------------------------------------------ its log

    def log_size(self) -> int:
        try:
            return self.log_path.stat().st_size
        except FileNotFoundError:
            return 0

    def log_since(self, offset: int = 0) -> str:
        """The log from byte ``offset`` on (every start and stop appends to the same file)."""
        try:
            with open(self.log_path, "rb") as f:
                f.seek(offset)
                return f.read().decode(errors="replace")
        except FileNotFoundError:
            return ""

    @property
    def log(self) -> str:
        return self.log_since(0)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FerryMQServer:
        """Start and return once the name server lists the broker; raise :class:`ServerStartError` else."""
        if self.running:
            raise RuntimeError(f"the server at {self.namesrv_addr} is already running")
        fixed = self.broker_port != 0
        for _ in range(1 if fixed else PORT_ATTEMPTS):
            port = self.broker_port or _free_pair()
            if self._start_on(port):
                self.broker_port = port
                return self
        what = f"listenPort {self.broker_port} is in use" if fixed else f"no free broker port in {PORT_ATTEMPTS} tries"
        raise ServerStartError(f"{what}; log {self.log_path}:\n{self.log_since(0)[-3000:]}")

    def stop(self, timeout: float = 10.0) -> None:
        """SIGTERM: the broker unregisters, flushes and releases the store; SIGKILL after ``timeout``."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.send_signal(signal.SIGTERM)
            try:
                self._proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        self._proc = None

    def kill(self) -> None:
        """SIGKILL, as a crash: nothing is flushed that was not already. :meth:`start` recovers the store."""
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.kill()
        self._proc.wait()
        self._proc = None

    def restart(self) -> FerryMQServer:
        """Stop and start again on the same ports and store."""
        self.stop()
        return self.start()

    def __enter__(self) -> FerryMQServer:  # noqa: PYI034 - start() returns self
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self.running else "stopped"
        return f"<FerryMQServer namesrv {self.namesrv_addr} broker {self.broker_addr} {state}>"

    # ------------------------------------------------------------------ starting

    def _start_on(self, broker_port: int) -> bool:
        """Start with the broker on ``broker_port``: True once ready, False if that port was taken."""
        self.home.mkdir(parents=True, exist_ok=True)
        conf = self.home / "standalone.conf"
        if self.http and not self.http_port:
            self.http_port = free_port()
        if self.mqtt and not self.mqtt_port:
            self.mqtt_port = free_port()
        if self.grpc and not self.grpc_port:
            self.grpc_port = free_port()
        keys = {**self.conf, "namesrvListenPort": str(self.namesrv_port), "listenPort": str(broker_port),
                "httpListenPort": str(self.http_port), "mqttListenPort": str(self.mqtt_port),
                "grpcListenPort": str(self.grpc_port)}
        keys.setdefault("storePathRootDir", str(self.home / "store"))
        keys.setdefault("kvConfigPath", str(self.home / "namesrv" / "kvConfig.json"))
        keys.setdefault("configStorePath", str(self.home / "namesrv" / "namesrv.properties"))
        conf.write_text("".join(f"{key}={value}\n" for key, value in keys.items()))
        offset = self.log_size()
        self._proc = start_cli(["standalone", "-c", str(conf)], self.log_path)
        try:
            return self._wait_ready(offset, broker_port)
        except BaseException:
            self.kill()
            raise

    def _wait_ready(self, offset: int, broker_port: int) -> bool:
        deadline = time.monotonic() + self.start_timeout
        namesrv_port = broker_up = None
        while time.monotonic() < deadline:
            text = self.log_since(offset)
            if self._proc.poll() is not None:
                if BROKER_PORT_TAKEN.search(text):
                    self._proc = None
                    return False
                raise ServerStartError(f"ferrymq standalone exited with status {self._proc.returncode}; "
                                       f"log {self.log_path}:\n{text[-3000:]}")
            if namesrv_port is None and (found := NAMESRV_UP.search(text)):
                namesrv_port = int(found.group(1))
            broker_up = broker_up or BROKER_UP.search(text)
            if (self.http and not HTTP_UP.search(text)) or (self.mqtt and not MQTT_UP.search(text)):
                time.sleep(0.005)
                continue
            if namesrv_port and broker_up and self._registered(namesrv_port, broker_port):
                self.namesrv_port = namesrv_port
                return True
            time.sleep(0.005)
        raise ServerStartError(f"ferrymq standalone not ready after {self.start_timeout} s; log {self.log_path}:\n"
                               f"{self.log_since(offset)[-3000:]}")

    def _registered(self, namesrv_port: int, broker_port: int) -> bool:
        try:
            info = admin.cluster_info(f"{LOOPBACK}:{namesrv_port}", tls=self.admin_tls)
        except OSError:  # exiting: the next look at the process says why
            return False
        data = info.broker_addr_table.get(self.broker_name)
        return data is not None and f"{LOOPBACK}:{broker_port}" in data.broker_addrs.values()


def _free_pair() -> int:
    """A loopback port P with P-2 and P+1 free too (the broker's VIP channel and HA port)."""
    try:
        return free_port(also_free=(-2, 1))
    except RuntimeError as exc:
        raise ServerStartError(str(exc)) from None


def _tls_keys(conf: Mapping[str, str]) -> dict[str, str]:
    """The tls.* keys of ``conf``, then those of its ``tls.config.file`` (``key=value`` lines), as the server
    reads them; read here because the test process talks to the server through ferrymq.wire alone."""
    keys = {k: v for k, v in conf.items() if k.startswith("tls.")}
    path = Path(keys.get("tls.config.file", ""))
    if keys.get("tls.config.file") and path.is_file():
        for line in path.read_text().splitlines():
            key, sep, value = line.strip().partition("=")
            if sep and not key.startswith("#"):
                keys[key.strip()] = value.strip()
    return keys
