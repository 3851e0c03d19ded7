"""The brokers the official-client scenarios run against: Apache RocketMQ 5.5.0 and ``ferrymq standalone`` (as
:class:`ferrymq.testing.FerryMQServer` starts it),
configured alike (:data:`FEATURE_CONFIG`) so that one scenario proves its expectation on the original
and then checks FerryMQ.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .apache import ApacheBroker, ApacheNamesrv

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



@dataclass
class Server:
    """A name server with one master broker registered, as the scenarios see it."""

    kind: str  # "apache" | "ferrymq"
    namesrv_addr: str
    broker_addr: str
    broker_name: str
    cluster: str
    #: the HTTP gateway the server serves itself (FerryMQ's); None for Apache's
    http_url: str | None = None
    #: the loopback port of the MQTT gateway the server serves itself (FerryMQ's); None for Apache's
    mqtt_port: int | None = None
    #: FerryMQ's ``ferrymq.testing.FerryMQServer``, for the scenarios that restart it; None for Apache
    process: Any = None


def start_apache(home: Path) -> tuple[ApacheNamesrv, ApacheBroker]:
    """Boots the name server and the broker side by side: the broker's boot is the longer one, and it
    registers with the name server at its end (again every ``registerNameServerPeriod`` if that failed)."""
    ns = ApacheNamesrv.launch(home / "namesrv")
    broker = None
    try:
        broker = ApacheBroker.launch(home / "broker", ns.addr, cluster="FeatureCluster", name="feature-broker-a",
                                     extra=FEATURE_CONFIG)
        ns.wait_ready()
        broker.wait_ready()
    except BaseException:
        if broker is not None:
            broker.stop()
        ns.stop()
        raise
    return ns, broker
