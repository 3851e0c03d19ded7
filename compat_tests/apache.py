"""Apache RocketMQ's own name server and broker, run from the Maven Central jars.

Each compat scenario runs against these too, to prove the scenario right on the original. The JVMs are
sized for a 2-core, 24 GiB machine (Apache's scripts default to an 8 GiB broker heap) and the broker's
store is small and lives in a temp dir.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from . import toolchain
from .processes import LOOPBACK, Child, free_port, port_open

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"

#: Heap and GC for the server JVMs. G1 as Apache's scripts use; the heap is what a 2-core box can spare.
SERVER_JVM_FLAGS = (
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxDirectMemorySize=512m",
    "-XX:-UsePerfData",
)

BOOT_TIMEOUT = 90.0


def write_conf(path: Path, settings: dict[str, object]) -> Path:
    """An Apache-style ``key=value`` properties file."""
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def _java_command(home: Path, main: str, conf: Path, version: str) -> list[str]:
    return [
        toolchain.require("java"),
        *SERVER_JVM_FLAGS,
        f"-Duser.home={home}",  # logs (~/logs/rocketmqlogs) and default store stay in the temp dir
        f"-Drocketmq.home.dir={home}",
        "-cp",
        toolchain.apache_server_classpath(version),
        main,
        "-c",
        str(conf),
    ]


@dataclass
class ApacheNamesrv:
    home: Path
    port: int
    child: Child
    version: str

    @property
    def addr(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @classmethod
    def start(cls, home: Path, version: str = toolchain.ROCKETMQ_5) -> "ApacheNamesrv":
        home.mkdir(parents=True, exist_ok=True)
        port = free_port()
        conf = write_conf(home / "namesrv.conf", {"listenPort": port})
        child = Child("Apache name server", _java_command(home, NAMESRV_MAIN, conf, version), home / "namesrv.out")
        child.start()
        try:
            child.wait_until(lambda: "boot success" in child.log_tail(400) and port_open(LOOPBACK, port),
                             f"listening on {port}", BOOT_TIMEOUT)
        except BaseException:
            child.kill()
            raise
        return cls(home, port, child, version)

    def stop(self) -> None:
        self.child.kill()


@dataclass
class ApacheBroker:
    """A master broker (brokerId 0) registered with ``namesrv_addr``.

    ``advertised_ip`` is the address the broker registers (brokerIP1); with ``bind_ip`` set apart from
    it, a recording proxy can sit on the advertised address (see capture.py).
    """

    home: Path
    port: int
    child: Child
    cluster: str
    name: str
    advertised_ip: str
    version: str

    @property
    def addr(self) -> str:
        return f"{self.advertised_ip}:{self.port}"

    @classmethod
    def start(
        cls,
        home: Path,
        namesrv_addr: str,
        *,
        cluster: str = "CompatCluster",
        name: str = "compat-broker-a",
        advertised_ip: str = LOOPBACK,
        bind_ip: str = LOOPBACK,
        extra: dict[str, object] | None = None,
        version: str = toolchain.ROCKETMQ_5,
    ) -> "ApacheBroker":
        home.mkdir(parents=True, exist_ok=True)
        port = free_port(also_free=(-2, 1))
        store = home / "store"
        settings: dict[str, object] = {
            "brokerClusterName": cluster,
            "brokerName": name,
            "brokerId": 0,
            "namesrvAddr": namesrv_addr,
            "listenPort": port,
            "haListenPort": port + 1,
            "bindAddress": bind_ip,
            "brokerIP1": advertised_ip,
            "storePathRootDir": store,
            "storePathCommitLog": store / "commitlog",
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
            "mappedFileSizeCommitLog": 64 * 1024 * 1024,
            "mappedFileSizeConsumeQueue": 30000 * 20,
            "flushDiskType": "ASYNC_FLUSH",
            # Register with the name server often, so a restarted namesrv learns the broker quickly.
            "registerNameServerPeriod": 10000,
            **(extra or {}),
        }
        conf = write_conf(home / "broker.conf", settings)
        child = Child("Apache broker", _java_command(home, BROKER_MAIN, conf, version), home / "broker.out")
        child.start()
        try:
            child.wait_until(lambda: "boot success" in child.log_tail(600) and port_open(bind_ip, port),
                             f"listening on {port}", BOOT_TIMEOUT)
            # "boot success" can come before the name server has the registration; clients need it.
            child.wait_until(lambda: _routes_to(namesrv_addr.split(";")[0], "TBW102", name),
                             f"registered with the name server {namesrv_addr}", BOOT_TIMEOUT)
        except BaseException:
            child.kill()
            raise
        return cls(home, port, child, cluster, name, advertised_ip, version)

    def stop(self) -> None:
        self.child.kill()


def _routes_to(namesrv_addr: str, topic: str, broker_name: str) -> bool:
    """Whether the name server's route for ``topic`` names ``broker_name``."""
    from wire.codes import RequestCode, ResponseCode
    from wire.command import request

    from .wireclient import call

    try:
        reply = call(namesrv_addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), timeout=3)
    except OSError:
        return False
    return reply.code == ResponseCode.SUCCESS and f'"brokerName":"{broker_name}"'.encode() in reply.body


def broker_version_desc(version: str) -> str:
    """The ``V5_5_0`` form mqadmin prints for a release such as ``5.5.0``."""
    return "V" + re.sub(r"[.-]", "_", version.upper())
