"""Brokers in child processes for replication tests, and what the tests compare: commit-log bytes."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ferrymq.server.ha.autoswitch.epoch import EpochFile
from ferrymq.testing import admin
from ferrymq.testing.forkserver import ForkedProcess, start_cli
from ferrymq.testing.ports import LOOPBACK, free_port
from ferrymq.testing.server import SMALL_STORE
from ferrymq.wire.codes import RequestCode
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.headers import SendMessageRequestHeader


def wait_for(check, what: str, timeout: float = 20.0, every: float = 0.02):
    """Poll ``check()`` until it returns something true; that value."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not after {timeout} s")
        time.sleep(every)


@dataclass
class BrokerProcess:
    """``ferrymq broker`` in a child process, registered with ``namesrv_addr``."""

    home: Path
    namesrv_addr: str
    conf: dict[str, object]
    port: int = 0
    proc: subprocess.Popen | ForkedProcess | None = field(default=None, init=False)
    #: seconds :meth:`start` waits for the broker to register
    ready_timeout = 20.0

    @property
    def addr(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @property
    def store(self) -> Path:
        return self.home / "store"

    @property
    def log(self) -> str:
        try:
            return (self.home / "broker.out").read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def start(self, timeout: float | None = None) -> BrokerProcess:
        """:meth:`launch`, then :meth:`wait_registered`."""
        return self.launch().wait_registered(timeout)

    def launch(self) -> BrokerProcess:
        """Start the child process and return at once."""
        self.home.mkdir(parents=True, exist_ok=True)
        self.port = self.port or free_port(also_free=(-2, 1))
        keys = {**SMALL_STORE, "bindAddress": LOOPBACK, "brokerIP1": LOOPBACK, "namesrvAddr": self.namesrv_addr,
                "listenPort": self.port, "storePathRootDir": self.store, "httpListenPort": 0, "mqttListenPort": 0,
                "grpcListenPort": 0,
                **self.conf}
        conf = self.home / "broker.conf"
        conf.write_text("".join(f"{k}={str(v).lower() if isinstance(v, bool) else v}\n" for k, v in keys.items()))
        self.proc = start_cli(["broker", "-c", str(conf)], self.home / "broker.out")
        return self

    def wait_registered(self, timeout: float | None = None) -> BrokerProcess:
        """Wait until the name server lists the broker; kill it if it does not in ``timeout`` s
        (:attr:`ready_timeout` by default)."""
        broker_id = int(self.conf.get("brokerId", 0))
        try:
            wait_for(lambda: self._registered(broker_id), f"broker {self.addr} registered as id {broker_id}",
                     timeout=timeout or self.ready_timeout)
        except BaseException:
            self.kill()
            raise
        return self

    def _registered(self, broker_id: int) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"broker exited with {self.proc.returncode}:\n{self.log[-3000:]}")
        try:
            info = admin.cluster_info(self.namesrv_addr)
        except OSError:
            return False
        data = info.broker_addr_table.get(str(self.conf.get("brokerName", "broker-a")))
        return data is not None and data.broker_addrs.get(broker_id) == self.addr

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def commitlog_bytes(directory: Path, start: int, end: int) -> bytes:
    """Bytes ``[start, end)`` of the commit log whose segments (named by start offset) are in ``directory``."""
    out = bytearray()
    segments = sorted((int(p.name), p) for p in Path(directory).iterdir() if p.name.isdigit())
    for seg_start, path in segments:
        size = path.stat().st_size
        lo, hi = max(start, seg_start), min(end, seg_start + size)
        if lo < hi:
            with open(path, "rb") as f:
                f.seek(lo - seg_start)
                out += f.read(hi - lo)
    return bytes(out)


def commitlog_range(broker_addr: str) -> tuple[int, int]:
    """(commitLogMinOffset, commitLogMaxOffset) a broker reports in GET_BROKER_RUNTIME_INFO."""
    from ferrymq.wire.bodies import KVTable

    table = KVTable.decode(admin.call(broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO)).body).table
    return int(table["commitLogMinOffset"]), int(table["commitLogMaxOffset"])


def send_request(topic: str, body: bytes, queue_id: int = 0, properties: str = "") -> RemotingCommand:
    """One SEND_MESSAGE_V2 as a producer sends it."""
    h = SendMessageRequestHeader("ha-producer", topic, "TBW102", 4, queue_id, 0, int(time.time() * 1000), 0,
                                 properties=properties)
    return request(RequestCode.SEND_MESSAGE_V2, h.to_ext_v2(), body)


def send(broker_addr: str, topic: str, body: bytes, queue_id: int = 0, properties: str = "") -> RemotingCommand:
    """:func:`send_request` on a new connection; the broker's answer."""
    return admin.call(broker_addr, send_request(topic, body, queue_id, properties))


def epoch_file(path: Path, *entries: tuple[int, int]) -> EpochFile:
    """An epoch file at ``path`` holding ``(epoch, start offset)`` entries, in order."""
    epochs = EpochFile(path)
    for epoch, start in entries:
        epochs.append(epoch, start)
    return epochs


def pull(broker_addr: str, topic: str, group: str, queue_id: int = 0, offset: int = 0) -> RemotingCommand:
    """One PULL_MESSAGE (no suspension) for ``queue_id`` from ``offset``."""
    ext = {"consumerGroup": group, "topic": topic, "queueId": str(queue_id), "queueOffset": str(offset),
           "maxMsgNums": "32", "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0",
           "subVersion": "0", "subscription": "*"}
    return admin.call(broker_addr, request(RequestCode.PULL_MESSAGE, ext))
