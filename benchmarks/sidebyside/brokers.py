"""Starting the two brokers under test the same way: fresh store, free loopback ports, one config file.

Apache runs as two JVMs from the Maven Central jars (name server via compat_tests.apache, broker launched
here so its JVM can be sized for load and its launch time known to the millisecond). FerryMQ runs as
``ferrymq standalone -c FILE``: name server and broker in one process. Both get the same broker keys
(Apache's names); everything else is each broker's default.
"""

from __future__ import annotations

import re
import shutil
import sys
from abc import ABC, abstractmethod
from pathlib import Path

from compat_tests import apache, toolchain
from compat_tests.processes import LOOPBACK, Child, free_port
from ferrymq.server.stall_watch import LOGGED_STALL

from . import javatools

#: Apache broker JVM. Apache's runbroker.sh uses G1 with these tunings and an 8 GiB heap with
#: AlwaysPreTouch; on this 2-core, 24 GiB box shared with other work the heap is 2 GiB (the store lives in
#: the page cache, not the heap) and pre-touch is off, so RSS shows what the broker really uses.
APACHE_BROKER_JVM_FLAGS = (
    "-server",
    "-Xms2g",
    "-Xmx2g",
    "-XX:+UseG1GC",
    "-XX:G1HeapRegionSize=16m",
    "-XX:G1ReservePercent=25",
    "-XX:InitiatingHeapOccupancyPercent=30",
    "-XX:SoftRefLRUPolicyMSPerMB=0",
    "-XX:MaxDirectMemorySize=2g",
    "-XX:-OmitStackTraceInFastThrow",
    "-XX:-UsePerfData",
)
#: Apache name server JVM: compat_tests.apache's (256-512 MiB heap, G1); not measured.
APACHE_NAMESRV_JVM_FLAGS = apache.SERVER_JVM_FLAGS

CLUSTER = "BenchCluster"
BROKER_NAME = "bench-broker"


def broker_settings(store: Path, port: int, ha_port: int, namesrv: str, flush: str) -> dict[str, object]:
    """The broker keys both brokers get (Apache's names); anything not listed is the broker's default."""
    return {
        "brokerClusterName": CLUSTER,
        "brokerName": BROKER_NAME,
        "brokerId": 0,
        "brokerIP1": LOOPBACK,
        "namesrvAddr": namesrv,
        "listenPort": port,
        "haListenPort": ha_port,
        "storePathRootDir": store,
        "storePathCommitLog": store / "commitlog",
        "flushDiskType": flush,
        "autoCreateTopicEnable": "true",
        "autoCreateSubscriptionGroup": "true",
    }


class Side(ABC):
    """One broker under test in one home directory. ``launch`` only starts the process (the caller times it)."""

    name: str

    def __init__(self, home: Path, flush: str):
        self.home = home
        self.flush = flush
        self.store = home / "store"
        self.broker: Child | None = None
        home.mkdir(parents=True, exist_ok=True)

    @property
    @abstractmethod
    def namesrv_addr(self) -> str: ...

    @property
    @abstractmethod
    def broker_addr(self) -> str: ...

    def start_support(self) -> None:
        """Start what must run before the broker (and is not timed)."""

    @abstractmethod
    def launch(self) -> Child: ...

    @property
    def broker_pid(self) -> int:
        assert self.broker is not None and self.broker.proc is not None
        return self.broker.proc.pid

    def kill_broker(self) -> None:
        """SIGKILL, as a crash would: no flush, no clean shutdown marker."""
        if self.broker is not None:
            self.broker.kill()

    def stop(self) -> None:
        self.kill_broker()

    def remove_store(self) -> None:
        shutil.rmtree(self.store, ignore_errors=True)

    def reactor_stalls_ms(self) -> list[int] | None:
        """Event-loop stalls the broker logged since its last launch (None: it does not report them)."""
        return None

    def describe_failure(self) -> str:
        """Why the broker did not serve: its exit code, or the last warning or error it logged."""
        if self.broker is None:
            return "broker never launched"
        tail = self.broker.log_tail(20000)
        if not self.broker.alive():
            last = tail.strip().splitlines()[-3:]
            return f"broker process exited with code {self.broker.proc.returncode}: {' / '.join(last)} (log {self.broker.log})"
        complaints = [line for line in tail.splitlines() if re.search(r"\b(WARN|WARNING|ERROR|Exception)\b", line)]
        if complaints:
            return f"{complaints[-1].strip()} (log {self.broker.log})"
        return f"no warning in the broker log {self.broker.log}"


class ApacheSide(Side):
    name = "apache"

    def __init__(self, home: Path, flush: str, version: str = toolchain.ROCKETMQ_5):
        super().__init__(home, flush)
        self.version = version
        self.namesrv: apache.ApacheNamesrv | None = None
        self.classpath = ""
        self.port = free_port(also_free=(-2, 1))  # Apache also binds listenPort-2 and haListenPort

    @property
    def namesrv_addr(self) -> str:
        assert self.namesrv is not None
        return self.namesrv.addr

    @property
    def broker_addr(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start_support(self) -> None:
        # Resolve the classpath now: it takes compat_tests' build lock, which another build may hold for
        # minutes, and that wait must not count as start-up time.
        self.classpath = javatools.apache_server_classpath(self.version)
        self.namesrv = apache.ApacheNamesrv.start(self.home / "namesrv", self.version)

    def launch(self) -> Child:
        ratio = apache.disk_used_ratio(self.home)
        if ratio >= apache.DISK_MARGIN_RATIO:  # a tmpfs store would not measure the same thing: refuse
            raise RuntimeError(f"the partition of {self.home} is {ratio:.0%} used; Apache RocketMQ refuses writes "
                               f"above {apache.DISK_FULL_RATIO:.0%}. Free disk space before benchmarking.")
        settings = broker_settings(self.store, self.port, self.port + 1, self.namesrv_addr, self.flush)
        conf = apache.write_conf(self.home / "broker.conf", {**settings, "bindAddress": LOOPBACK})
        argv = [
            toolchain.require("java"),
            *APACHE_BROKER_JVM_FLAGS,
            f"-Duser.home={self.home}",  # logs go to ~/logs/rocketmqlogs
            f"-Djava.io.tmpdir={self.home}",  # its self-signed TLS files, kept out of /tmp
            f"-Drocketmq.home.dir={self.home}",
            "-cp",
            self.classpath,
            apache.BROKER_MAIN,
            "-c",
            str(conf),
        ]
        self.broker = Child("Apache broker", argv, self.home / "broker.out").start()
        return self.broker

    def stop(self) -> None:
        super().stop()
        if self.namesrv is not None:
            self.namesrv.stop()


def ferrymq_executable() -> str:
    """``ferrymq`` of this interpreter's venv (the harness runs with .venv/bin/python)."""
    candidate = Path(sys.executable).parent / "ferrymq"
    if candidate.exists():
        return str(candidate)
    found = shutil.which("ferrymq")
    if found is None:
        raise toolchain.ToolMissing("'ferrymq' is not installed in this venv; run `make` (pip install -e .) first")
    return found


class FerrySide(Side):
    name = "ferrymq"

    def __init__(self, home: Path, flush: str, overrides: dict[str, object] | None = None):
        super().__init__(home, flush)
        self.namesrv_port = free_port()
        self.port = free_port(also_free=(1,))
        self.overrides = dict(overrides or {})  # broker.conf keys on top of the harness's settings

    @property
    def namesrv_addr(self) -> str:
        return f"{LOOPBACK}:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def launch(self) -> Child:
        ratio = apache.disk_used_ratio(self.home)
        if ratio >= apache.DISK_MARGIN_RATIO:  # a tmpfs store would not measure the same thing: refuse
            raise RuntimeError(f"the partition of {self.home} is {ratio:.0%} used; Apache RocketMQ refuses writes "
                               f"above {apache.DISK_FULL_RATIO:.0%}. Free disk space before benchmarking.")
        settings = broker_settings(self.store, self.port, self.port + 1, self.namesrv_addr, self.flush)
        conf = apache.write_conf(self.home / "standalone.conf", {
            **settings,
            "namesrvListenPort": self.namesrv_port,
            # served as by default (measured with the gateway running, idle), on a port free here
            "httpListenPort": free_port(),
            "mqttListenPort": free_port(),
            "grpcListenPort": free_port(),
            "kvConfigPath": self.home / "namesrv" / "kvConfig.json",
            "configStorePath": self.home / "namesrv" / "namesrv.properties",
            **self.overrides,
        })
        # no --stall-traceback: faulthandler's dumps of the other threads can crash the process mid-run
        argv = [ferrymq_executable(), "standalone", "-c", str(conf)]
        self.broker = Child("FerryMQ standalone", argv, self.home / "ferrymq.out").start()
        return self.broker

    def reactor_stalls_ms(self) -> list[int] | None:
        if self.broker is None or not self.broker.log.exists():
            return None
        return [int(ms) for ms in LOGGED_STALL.findall(self.broker.log.read_text(errors="replace"))]


def make_side(broker: str, home: Path, flush: str) -> Side:
    if broker == "apache":
        return ApacheSide(home, flush)
    if broker == "ferrymq":
        return FerrySide(home, flush)
    raise ValueError(f"unknown broker {broker!r}; choose from apache, ferrymq")
