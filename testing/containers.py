"""``FerryMQContainer``: FerryMQ's image (the repository's ``Dockerfile``) under testcontainers-python.

    with FerryMQContainer("ferrymq:latest") as mq:
        producer = BlockingProducer("group", mq.namesrv_addr)

A RocketMQ client asks the name server where the broker is and is told ``brokerIP1:listenPort``, the
address the broker registered. Clients outside the container reach that address only when the broker
listens on the port number they use, so the container publishes each port on the same host port
(``namesrv_port``, ``broker_port`` and the broker's fast channel ``broker_port - 2``, free ports unless
given) and advertises the Docker host's address as ``brokerIP1``. With ``network_mode="host"`` (pass
``with_kwargs(network_mode="host")``) nothing is published: the container's ports are the host's.

The container counts as started once the name server lists the broker at that advertised address: the
point from which a client's route lookup succeeds.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Mapping

from testcontainers.core.container import DockerContainer

from . import admin
from .ports import free_port
from .server import SMALL_STORE

#: where the image reads a mounted config file (docker/entrypoint.sh)
CONF_IN_CONTAINER = "/etc/ferrymq/broker.conf"
#: prefix of the environment variables the image turns into config keys (docker/entrypoint.sh)
ENV_PREFIX = "FERRYMQ_"


class FerryMQContainer(DockerContainer):
    """FerryMQ standalone (name server and broker) in a container; ``namesrv_addr`` is for clients.

    ``conf`` is extra broker config: a mapping of Apache keys (passed as ``FERRYMQ_<key>`` variables)
    or the path of a ``broker.conf`` file (mounted read-only). ``advertised_ip`` overrides the address
    the broker tells clients (default: the Docker host's address, as this process resolves it).
    """

    def __init__(
        self,
        image: str = "ferrymq:latest",
        *,
        namesrv_port: int | None = None,
        broker_port: int | None = None,
        conf: Mapping[str, object] | str | os.PathLike[str] | None = None,
        advertised_ip: str | None = None,
        ready_timeout: float = 60.0,
        **kwargs,
    ) -> None:
        super().__init__(image, **kwargs)
        # host networking or ports published on the same numbers: free on every interface of this host
        self.namesrv_port = namesrv_port or free_port("0.0.0.0")
        self.broker_port = broker_port or free_port("0.0.0.0", also_free=(-2,))
        self.http_port = free_port("0.0.0.0")  #: the HTTP gateway's (docs/http.md)
        self.mqtt_port = free_port("0.0.0.0")  #: the MQTT gateway's (docs/mqtt.md)
        self.advertised_ip = advertised_ip
        self.ready_timeout = ready_timeout
        if conf is None or isinstance(conf, Mapping):  # a test's store is small unless the caller says
            for key, value in {**SMALL_STORE, **(conf or {})}.items():
                self.with_env(ENV_PREFIX + key, _prop(value))
        else:
            self.with_volume_mapping(os.fspath(conf), CONF_IN_CONTAINER, "ro")

    @property
    def host_network(self) -> bool:
        return self._kwargs.get("network_mode") == "host"

    def _configure(self) -> None:
        if self.advertised_ip is None:
            self.advertised_ip = socket.gethostbyname(self.get_docker_client().host())
        self.with_env(ENV_PREFIX + "namesrvListenPort", str(self.namesrv_port))
        self.with_env(ENV_PREFIX + "listenPort", str(self.broker_port))
        self.with_env(ENV_PREFIX + "httpListenPort", str(self.http_port))
        self.with_env(ENV_PREFIX + "mqttListenPort", str(self.mqtt_port))
        self.with_env(ENV_PREFIX + "brokerIP1", self.advertised_ip)
        if not self.host_network:
            for port in (self.namesrv_port, self.broker_port, self.broker_port - 2, self.http_port, self.mqtt_port):
                self.with_bind_ports(port, port)

    def start(self) -> FerryMQContainer:
        super().start()
        self._wait_until_registered()
        return self

    @property
    def namesrv_addr(self) -> str:
        """``host:port`` of the name server, the one address a client is given."""
        # a container on the host's network has no address of its own: the Docker host's is the one
        host = self.get_docker_client().host() if self.host_network else self.get_container_host_ip()
        return f"{host}:{self.namesrv_port}"

    @property
    def broker_addr(self) -> str:
        """The address the broker advertises (what the name server hands to clients)."""
        return f"{self.advertised_ip}:{self.broker_port}"

    @property
    def http_url(self) -> str:
        """The HTTP gateway's base URL (docs/http.md)."""
        return f"http://{self.namesrv_addr.rpartition(':')[0]}:{self.http_port}"

    def _wait_until_registered(self) -> None:
        deadline = time.monotonic() + self.ready_timeout
        last_error: OSError | None = None
        while time.monotonic() < deadline:
            self.reload()
            if self.status not in ("created", "running"):
                raise RuntimeError(f"the FerryMQ container {self.status} before it was ready:\n{self._logs()}")
            try:
                info = admin.cluster_info(self.namesrv_addr, timeout=3.0)
            except OSError as exc:  # the name server is not listening yet
                last_error = exc
            else:
                if any(self.broker_addr in data.broker_addrs.values() for data in info.broker_addr_table.values()):
                    return
            time.sleep(0.2)
        raise TimeoutError(f"the broker did not register at {self.broker_addr} with the name server at "
                           f"{self.namesrv_addr} within {self.ready_timeout:.0f}s (last error: {last_error!r}):\n"
                           f"{self._logs()}")

    def _logs(self) -> str:
        stdout, stderr = self.get_logs()
        return (stdout + stderr).decode(errors="replace")[-4000:]


def _prop(value: object) -> str:
    """A config value as the file format spells it (booleans lower-case, as Apache writes them)."""
    return str(value).lower() if isinstance(value, bool) else str(value)
