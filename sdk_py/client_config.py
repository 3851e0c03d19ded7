"""Settings shared by producers and consumers, with Apache's names and defaults (seconds, not ms).

Every scheduled interval is a field so that tests can shrink them instead of sleeping.
"""

from __future__ import annotations

import itertools
import os
import time
from dataclasses import dataclass

from ferrymq.remoting.local_address import local_ip
from ferrymq.wire.signature import Credentials
from ferrymq.wire.topics import validate_group

_instance_counter = itertools.count()


def default_instance_name() -> str:
    """Java turns the DEFAULT instance name into ``pid#nanoTime``, so two clients in one process get
    different client ids (and so different shares in a rebalance); the counter keeps that true here."""
    return f"{os.getpid()}#{time.monotonic_ns()}{next(_instance_counter)}"


@dataclass(slots=True)
class ClientConfig:
    #: ``host:port`` of name servers, ``;``-separated (Apache ``namesrvAddr``).
    namesrv_addr: str
    instance_name: str | None = None
    client_ip: str | None = None
    #: GET_ROUTEINFO_BY_TOPIC for every topic in use (``pollNameServerInterval`` 30 s).
    poll_name_server_interval: float = 30.0
    #: HEART_BEAT to every broker (``heartbeatBrokerInterval`` 30 s).
    heartbeat_broker_interval: float = 30.0
    #: UPDATE_CONSUMER_OFFSET for owned queues (``persistConsumerOffsetInterval`` 5 s).
    persist_consumer_offset_interval: float = 5.0
    #: periodic rebalance (``rocketmq.client.rebalance.waitInterval`` 20 s).
    rebalance_interval: float = 20.0
    #: RPC timeout (``mqClientApiTimeout`` 3 s).
    api_timeout: float = 3.0
    #: connect with TLS (Apache's ``setUseTLS`` / ``-Dtls.enable=true``), not checking the server's
    #: certificate, as Apache's client in its default test mode
    use_tls: bool = False
    #: sign every request with this user's access key and secret (Apache's ``AclClientRPCHook``), for a
    #: cluster with ``authenticationEnabled``; None sends requests unsigned
    credentials: Credentials | None = None

    def __post_init__(self) -> None:
        if self.instance_name is None:
            self.instance_name = default_instance_name()
        if self.client_ip is None:
            self.client_ip = local_ip()

    @property
    def client_id(self) -> str:
        return f"{self.client_ip}@{self.instance_name}"

    @property
    def namesrv_addrs(self) -> list[str]:
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]


def settle_config(group: str, namesrv_addr: str | None, config: ClientConfig | None) -> ClientConfig:
    """What every producer and consumer constructor starts with: refuse a bad group name (ValueError
    naming the rule), then take the given ClientConfig or make one for ``namesrv_addr``."""
    problem = validate_group(group)
    if problem:
        raise ValueError(problem)
    if config is not None:
        return config
    if namesrv_addr is None:
        raise ValueError("give namesrv_addr ('host:port') or a ClientConfig")
    return ClientConfig(namesrv_addr)
