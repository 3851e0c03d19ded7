"""Apache RocketMQ's own name server and broker, run from the Maven Central jars.

Each compat scenario runs against these too, to prove the scenario right on the original. The JVMs are
sized for a 2-core, 24 GiB machine (Apache's scripts default to an 8 GiB broker heap) and the broker's
store is small and lives in a temp dir.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import toolchain
from .processes import LOOPBACK, Child, free_port, port_open

NAMESRV_MAIN = "org.apache.rocketmq.namesrv.NamesrvStartup"
BROKER_MAIN = "org.apache.rocketmq.broker.BrokerStartup"
PROXY_MAIN = "org.apache.rocketmq.proxy.ProxyStartup"
CONTROLLER_MAIN = "org.apache.rocketmq.controller.ControllerStartup"

#: Heap and GC for the server JVMs. G1 as Apache's scripts use; the heap is what a 2-core box can spare.
SERVER_JVM_FLAGS = (
    "-Xms256m",
    "-Xmx512m",
    "-XX:+UseG1GC",
    "-XX:MaxDirectMemorySize=512m",
    "-XX:-UsePerfData",
)

BOOT_TIMEOUT = 90.0

#: Broker keys every Apache broker here gets, so that Apache 5.5.0's transaction threads wait instead of
#: turning on a core (read from its classes):
#: - the transaction-metrics flusher busy-waits through its first transactionMetricFlushInterval after boot
#:   (10 s by default, on every broker start): 1 s here;
#: - the transaction-end writer (commit/rollback marks go to the op topic in batches, every
#:   transactionOpBatchInterval or once transactionOpMsgMaxSize bytes wait) stops waiting altogether once a
#:   queue's last mark is older than the interval. A one-byte size writes each mark at once (FerryMQ writes
#:   them at once too, so a check-back never asks about a transaction its client has ended), and the
#:   interval, then only an idle wake-up, is set beyond any test session.
QUIET_TRANSACTION_THREADS: dict[str, object] = {
    "transactionMetricFlushInterval": 1000,
    "transactionOpMsgMaxSize": 1,
    "transactionOpBatchInterval": 2**31 - 1,
}

#: Apache marks its store "disk full" and refuses every write (SERVICE_NOT_AVAILABLE, which the clients
#: report only as "Send [3] times, still failed") once the partition holding the commitlog is more than
#: 90 % used; the ratio cannot be configured higher. Below this margin the store stays where it is.
DISK_FULL_RATIO = 0.90
DISK_MARGIN_RATIO = 0.85
#: Where the store goes when the temp dir's partition is too full: a tmpfs has room on a 24 GiB box.
TMPFS = Path("/dev/shm")


def disk_used_ratio(path: Path) -> float:
    """The used share of ``path``'s partition as Apache computes it: used / (used + space usable by us)."""
    st = os.statvfs(path)
    used = (st.f_blocks - st.f_bfree) * st.f_frsize
    usable = st.f_bavail * st.f_frsize
    return used / (used + usable) if used + usable else 0.0


def store_root(home: Path) -> Path:
    """A store directory on a partition Apache will write to (see :data:`DISK_FULL_RATIO`)."""
    if disk_used_ratio(home) < DISK_MARGIN_RATIO:
        return home / "store"
    if TMPFS.is_dir() and disk_used_ratio(TMPFS) < DISK_MARGIN_RATIO:
        return Path(tempfile.mkdtemp(prefix="ferrymq-apache-store-", dir=TMPFS))
    raise RuntimeError(
        f"the partition of {home} is {disk_used_ratio(home):.0%} used and no tmpfs has room: Apache RocketMQ "
        f"refuses every write above {DISK_FULL_RATIO:.0%}. Free disk space (old pytest temp dirs under "
        f"{tempfile.gettempdir()} are a usual culprit) and rerun.")


def write_conf(path: Path, settings: dict[str, object]) -> Path:
    """An Apache-style ``key=value`` properties file."""
    path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    return path


def _java_command(home: Path, main: str, conf: Path, version: str,
                  system_properties: dict[str, str] | None = None) -> list[str]:
    """``system_properties`` are the settings Apache reads only as -D flags (the tls.* keys)."""
    return [
        toolchain.require("java"),
        *SERVER_JVM_FLAGS,
        *(f"-D{k}={v}" for k, v in (system_properties or {}).items()),
        f"-Duser.home={home}",  # logs (~/logs/rocketmqlogs) and default store stay in the temp dir
        f"-Drocketmq.home.dir={home}",
        f"-Djava.io.tmpdir={home}",  # the broker's self-signed TLS files (keyutil_*) go here, not /tmp
        "-cp",
        toolchain.apache_server_classpath(version),
        main,
        "-c",
        str(conf),
    ]


def _wait_booted(child: Child, port: int) -> None:
    """Waits until a name server or controller JVM says it booted and listens on ``port``; kills it if not."""
    try:
        child.wait_until(lambda: "boot success" in child.log_tail(400) and port_open(LOOPBACK, port),
                         f"listening on {port}", BOOT_TIMEOUT)
    except BaseException:
        child.kill()
        raise


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
    def start(cls, home: Path, version: str = toolchain.ROCKETMQ_5) -> ApacheNamesrv:
        ns = cls.launch(home, version)
        ns.wait_ready()
        return ns

    @classmethod
    def launch(cls, home: Path, version: str = toolchain.ROCKETMQ_5,
               system_properties: dict[str, str] | None = None,
               extra: dict[str, object] | None = None) -> ApacheNamesrv:
        """Starts the JVM and returns at once; :meth:`wait_ready` waits for it to listen. ``extra``: more
        keys of its config file (the embedded controller's, for one)."""
        home.mkdir(parents=True, exist_ok=True)
        port = free_port()
        conf = write_conf(home / "namesrv.conf", {"listenPort": port, **(extra or {})})
        child = Child("Apache name server", _java_command(home, NAMESRV_MAIN, conf, version, system_properties),
                      home / "namesrv.out")
        child.start()
        return cls(home, port, child, version)

    @classmethod
    def launch_with_controller(cls, home: Path, group: str, *, notify_role_changes: bool = True) -> ApacheNamesrv:
        """A name server with Apache's controller embedded (a single DLedger peer, dead brokers scanned every
        second), started as :meth:`launch` does; ``.controller_addr`` is the controller's address, the one
        brokers take as ``controllerAddr``. Without ``notify_role_changes`` brokers learn elections by polling."""
        peer_port = free_port()
        ns = cls.launch(home, extra={
            "enableControllerInNamesrv": "true", "controllerDLegerGroup": group,
            "controllerDLegerPeers": f"n0-{LOOPBACK}:{peer_port}", "controllerDLegerSelfId": "n0",
            "controllerStorePath": home / "controller-store", "mappedFileSize": 4 * 1024 * 1024,
            "scanNotActiveBrokerInterval": 1000, "notifyBrokerRoleChanged": str(notify_role_changes).lower()})
        ns.controller_addr = f"{LOOPBACK}:{peer_port}"
        return ns

    def wait_ready(self) -> None:
        """Waits until the name server listens; kills it if it does not."""
        _wait_booted(self.child, self.port)

    def stop(self) -> None:
        self.child.kill()


@dataclass
class ApacheController:
    """One node of Apache's standalone controller (``mqcontroller``), a DLedger peer.

    The controller answers brokers and mqadmin on its DLedger peer port, so :attr:`addr` is both the
    peer's address and the one brokers list in ``controllerAddr``.
    """

    home: Path
    self_id: str
    port: int
    child: Child

    @property
    def addr(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    @classmethod
    def launch_nodes(cls, home: Path, group: str, nodes: int = 3,
                     extra: dict[str, object] | None = None) -> list[ApacheController]:
        """``nodes`` controllers of one DLedger group (``n0``, ``n1``, ...), each with a config file as
        docs/ha.md shows, started at once; :meth:`wait_ready` waits for each. ``extra``: more keys of
        every node's config file."""
        ports = [free_port() for _ in range(nodes)]
        peers = ";".join(f"n{i}-{LOOPBACK}:{port}" for i, port in enumerate(ports))
        controllers = []
        for i, port in enumerate(ports):
            node_home = home / f"n{i}"
            node_home.mkdir(parents=True, exist_ok=True)
            conf = write_conf(node_home / f"controller-n{i}.conf", {
                "controllerDLegerGroup": group, "controllerDLegerPeers": peers, "controllerDLegerSelfId": f"n{i}",
                "controllerStorePath": node_home / "store", "configStorePath": node_home / "controller.properties",
                **(extra or {})})
            child = Child(f"Apache controller n{i}",
                          _java_command(node_home, CONTROLLER_MAIN, conf, toolchain.ROCKETMQ_5),
                          node_home / "controller.out")
            controllers.append(cls(node_home, f"n{i}", port, child.start()))
        return controllers

    def wait_ready(self) -> None:
        """Waits until the controller listens; kills it if it does not."""
        _wait_booted(self.child, self.port)

    def kill(self) -> None:
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
    store: Path
    namesrv_addr: str
    bind_ip: str
    #: the name server only takes TLS clients: its readiness is asked over TLS, with this context when given
    #: (one presenting a client certificate to a name server that requires one)
    namesrv_tls: bool | ssl.SSLContext = False

    @property
    def addr(self) -> str:
        return f"{self.advertised_ip}:{self.port}"

    @classmethod
    def start(cls, home: Path, namesrv_addr: str, **options) -> ApacheBroker:
        """:meth:`launch` with the same arguments, then :meth:`wait_ready`."""
        broker = cls.launch(home, namesrv_addr, **options)
        broker.wait_ready()
        return broker

    @classmethod
    def launch(
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
        system_properties: dict[str, str] | None = None,
        namesrv_tls: bool | ssl.SSLContext = False,
    ) -> ApacheBroker:
        """Starts the JVM and returns at once; :meth:`wait_ready` waits for it to serve and register.
        A key of ``extra`` set to None is left out of the config file."""
        home.mkdir(parents=True, exist_ok=True)
        port = free_port(also_free=(-2, 1))
        store = store_root(home)
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
            **QUIET_TRANSACTION_THREADS,
            **(extra or {}),
        }
        conf = write_conf(home / "broker.conf", {k: v for k, v in settings.items() if v is not None})
        child = Child("Apache broker", _java_command(home, BROKER_MAIN, conf, version, system_properties),
                      home / "broker.out")
        child.start()
        return cls(home, port, child, cluster, name, advertised_ip, version, store, namesrv_addr, bind_ip,
                   namesrv_tls)

    def wait_ready(self) -> None:
        """Waits until the broker listens and the name server routes to it; stops it if not."""
        child = self.child
        try:
            child.wait_until(lambda: "boot success" in child.log_tail(600) and port_open(self.bind_ip, self.port),
                             f"listening on {self.port}", BOOT_TIMEOUT)
            # "boot success" can come before the name server has the registration; clients need it.
            child.wait_until(lambda: _routes_to(self.namesrv_addr.split(";")[0], "TBW102", self.name,
                                                self.namesrv_tls),
                             f"registered with the name server {self.namesrv_addr}", BOOT_TIMEOUT)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        self.child.kill()
        _remove_if_outside(self.store, self.home)


#: ``ProxyStartup -pm``: ``cluster`` (Apache's default) runs the proxy as a process of its own that forwards
#: to brokers over remoting; ``local`` runs a broker inside the proxy's JVM (no hop between them).
PROXY_MODES = ("local", "cluster")


@dataclass
class ApacheProxy:
    """Apache's proxy serving the gRPC MessagingService on ``grpc_port`` in front of a master broker
    registered with ``namesrv_addr``: in ``local`` mode that broker runs in the proxy's JVM, in ``cluster``
    mode it is an :class:`ApacheBroker` of its own that the proxy reaches over remoting."""

    home: Path
    grpc_port: int
    broker: ApacheBroker
    #: the proxy's JVM (in local mode also the broker's)
    child: Child
    mode: str = "local"

    @property
    def grpc_endpoint(self) -> str:
        return f"{LOOPBACK}:{self.grpc_port}"

    @property
    def pids(self) -> tuple[int, ...]:
        """The server's processes: the proxy's JVM, and in cluster mode its broker's."""
        children = (self.child,) if self.child is self.broker.child else (self.child, self.broker.child)
        return tuple(child.proc.pid for child in children)

    @classmethod
    def launch(cls, home: Path, namesrv_addr: str, *, mode: str = "local", name: str = "proxy-broker-a",
               cluster: str = "CompatCluster", extra: dict[str, object] | None = None,
               proxy_extra: dict[str, object] | None = None, version: str = toolchain.ROCKETMQ_5,
               system_properties: dict[str, str] | None = None,
               namesrv_tls: bool | ssl.SSLContext = False) -> ApacheProxy:
        """Starts the JVM (in cluster mode the broker's; its proxy then starts in :meth:`wait_ready`) and
        returns at once; :meth:`wait_ready` waits for them to serve and register.
        ``mode``: one of :data:`PROXY_MODES`. ``extra``: more keys of its broker's config file;
        ``proxy_extra``: of the proxy's (rmq-proxy.json); ``system_properties`` and ``namesrv_tls`` as
        :meth:`ApacheBroker.launch` takes them (tls.server.mode applies to the broker's remoting port and
        the proxy's gRPC port alike)."""
        if mode not in PROXY_MODES:
            raise ValueError(f"proxy mode {mode!r}: one of {', '.join(PROXY_MODES)}")
        home.mkdir(parents=True, exist_ok=True)
        grpc_port, remoting_port = free_port(), free_port()
        if mode == "cluster":
            broker = ApacheBroker.launch(home / "broker", namesrv_addr, cluster=cluster, name=name, extra=extra,
                                         version=version, system_properties=system_properties,
                                         namesrv_tls=namesrv_tls)
            mode_args: list[str] = []
        else:
            broker_port = free_port(also_free=(-2, 1))
            store = store_root(home)
            broker_conf = write_conf(home / "broker.conf", {
                "brokerClusterName": cluster, "brokerName": name, "brokerId": 0, "namesrvAddr": namesrv_addr,
                "listenPort": broker_port, "haListenPort": broker_port + 1, "bindAddress": LOOPBACK,
                "brokerIP1": LOOPBACK, "storePathRootDir": store, "storePathCommitLog": store / "commitlog",
                "autoCreateTopicEnable": "true", "mappedFileSizeCommitLog": 64 * 1024 * 1024,
                "mappedFileSizeConsumeQueue": 30000 * 20, "flushDiskType": "ASYNC_FLUSH",
                **QUIET_TRANSACTION_THREADS, **(extra or {}),
            })
            mode_args = ["-bc", str(broker_conf)]
        proxy_conf = home / "rmq-proxy.json"
        proxy_conf.write_text(json.dumps({"rocketMQClusterName": cluster, "namesrvAddr": namesrv_addr,
                                          "grpcServerPort": grpc_port, "remotingListenPort": remoting_port,
                                          **(proxy_extra or {})}, default=str))
        command = [
            toolchain.require("java"), *SERVER_JVM_FLAGS,
            *(f"-D{k}={v}" for k, v in (system_properties or {}).items()),
            f"-Duser.home={home}", f"-Drocketmq.home.dir={home}", f"-Djava.io.tmpdir={home}",
            "-cp", toolchain.apache_proxy_classpath(version), PROXY_MAIN,
            "-pm", mode, *mode_args, "-pc", str(proxy_conf),
        ]
        child = Child("Apache proxy", command, home / "proxy.out")
        if mode == "local":
            child.start()
            broker = ApacheBroker(home, broker_port, child, cluster, name, LOOPBACK, version, store, namesrv_addr,
                                  LOOPBACK, namesrv_tls)
        # in cluster mode the proxy starts once its broker is registered (wait_ready): booting, it creates a
        # system topic on the cluster and exits when the name server knows no broker of it
        return cls(home, grpc_port, broker, child, mode)

    def wait_ready(self) -> None:
        """Waits until the gRPC port listens and the name server routes to the proxy's broker."""
        child = self.child
        try:
            if self.broker.child is not child:
                self.broker.wait_ready()
                child.start()
            child.wait_until(lambda: "rocketmq-proxy startup successfully" in child.log_tail(600)
                             and port_open(LOOPBACK, self.grpc_port), f"gRPC on {self.grpc_port}", BOOT_TIMEOUT)
            child.wait_until(lambda: _routes_to(self.broker.namesrv_addr, "TBW102", self.broker.name,
                                                self.broker.namesrv_tls),
                             f"registered with the name server {self.broker.namesrv_addr}", BOOT_TIMEOUT)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.broker.child is not self.child:
            self.child.kill()
        self.broker.stop()


def _remove_if_outside(store: Path, home: Path) -> None:
    """A store moved to tmpfs (see :func:`store_root`) is memory: free it with the broker."""
    if not store.is_relative_to(home):
        shutil.rmtree(store, ignore_errors=True)


def _routes_to(namesrv_addr: str, topic: str, broker_name: str, tls: bool | ssl.SSLContext = False) -> bool:
    """Whether the name server's route for ``topic`` names ``broker_name`` (asked over TLS with ``tls``, as
    :class:`.socket_client.Connection` takes it)."""
    from ferrymq.wire.codes import RequestCode, ResponseCode
    from ferrymq.wire.command import request

    from .socket_client import call

    try:
        reply = call(namesrv_addr, request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": topic}), timeout=3, tls=tls)
    except OSError:
        return False
    return reply.code == ResponseCode.SUCCESS and f'"brokerName":"{broker_name}"'.encode() in reply.body


def broker_version_desc(version: str) -> str:
    """The ``V5_5_0`` form mqadmin prints for a release such as ``5.5.0``."""
    return "V" + re.sub(r"[.-]", "_", version.upper())
