"""The brokers the official-client scenarios run against: Apache RocketMQ 5.5.0 and ``ferrymq standalone``,
configured alike (:data:`FEATURE_CONFIG`) so that one scenario proves its expectation on the original
and then checks FerryMQ.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from .apache import ApacheBroker, ApacheNamesrv, write_conf
from .processes import LOOPBACK, Child, free_port, port_open

#: Broker settings the scenarios rely on, the same on both brokers (Apache's key names).
#: Delay level 3 (the first retry's level too) is 4 s instead of 10 s, so retry and delay scenarios stay
#: short; transactions are checked back after 2 s, every second, at most twice.
DELAY_LEVELS = "1s 2s 4s 5s 6s 7s 8s 9s 10s 11s 12s 13s 14s 15s 16s 17s 18s 19s"
DELAY_LEVEL_3_MS = 4000
TRANSACTION_TIMEOUT_MS = 2000
TRANSACTION_CHECK_INTERVAL_MS = 1000
TRANSACTION_CHECK_MAX = 2
FEATURE_CONFIG: dict[str, object] = {
    "enablePropertyFilter": "true",
    "messageDelayLevel": DELAY_LEVELS,
    "transactionTimeOut": TRANSACTION_TIMEOUT_MS,
    "transactionCheckInterval": TRANSACTION_CHECK_INTERVAL_MS,
    "transactionCheckMax": TRANSACTION_CHECK_MAX,
    "autoCreateTopicEnable": "true",
    "autoCreateSubscriptionGroup": "true",
}

#: Apache 5.x writes transaction op records (commit/rollback marks) in batches every
#: transactionOpBatchInterval (3 s); with the 2 s transaction timeout above its check-back would ask about
#: transactions already decided. FerryMQ writes them at once and has no such key.
APACHE_ONLY_CONFIG: dict[str, object] = {"transactionOpBatchInterval": 200}


@dataclass
class Server:
    """A name server with one master broker registered, as the scenarios see it."""

    kind: str  # "apache" | "ferrymq"
    namesrv_addr: str
    broker_addr: str
    broker_name: str
    cluster: str


class FerryStandalone:
    """``ferrymq standalone``: name server and broker in one process, store in a temp dir."""


    def __init__(self, home: Path, cli: Path, *, cluster: str = "SdkCluster", name: str = "sdk-broker-a",
                 extra: dict[str, object] | None = None):
        home.mkdir(parents=True, exist_ok=True)
        self.ns_port = free_port()
        self.port = free_port(also_free=(-2, 1))
        self.cluster, self.name = cluster, name
        conf = write_conf(home / "standalone.conf", {
            "namesrvListenPort": self.ns_port,
            "listenPort": self.port,
            "brokerIP1": LOOPBACK,
            "brokerClusterName": cluster,
            "brokerName": name,
            "storePathRootDir": home / "store",
            "autoCreateTopicEnable": "true",
            "autoCreateSubscriptionGroup": "true",
            "mappedFileSizeCommitLog": 64 * 1024 * 1024,
            **(extra or {}),
        })
        self.child = Child("ferrymq standalone", [str(cli), "standalone", "-c", str(conf)], home / "standalone.out")

    @property
    def namesrv_addr(self) -> str:
        return f"{LOOPBACK}:{self.ns_port}"

    @property
    def broker_addr(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def start(self) -> None:
        """Start and wait until the broker is registered with its name server."""
        self.child.start()
        self.child.wait_until(lambda: port_open(LOOPBACK, self.ns_port), f"listening on {self.ns_port}", 30)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if port_open(LOOPBACK, self.port) and self._registered():
                return
            time.sleep(0.2)
        log = self.child.log_tail()
        self.child.kill()
        raise RuntimeError(f"ferrymq standalone: broker not registered on {self.port} after 30 s; log:\n{log}")

    def _registered(self) -> bool:
        from .apache import _routes_to

        return _routes_to(self.namesrv_addr, "TBW102", self.name)

    def stop(self) -> None:
        self.child.kill()


def start_apache(home: Path) -> tuple[ApacheNamesrv, ApacheBroker]:
    ns = ApacheNamesrv.start(home / "namesrv")
    try:
        broker = ApacheBroker.start(home / "broker", ns.addr, cluster="FeatureCluster", name="feature-broker-a",
                                    extra={**FEATURE_CONFIG, **APACHE_ONLY_CONFIG})
    except BaseException:
        ns.stop()
        raise
    return ns, broker
