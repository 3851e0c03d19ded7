"""``ferrymq gateway <protocol> -n <name server>`` as a child process: how the compat suite puts a FerryMQ
gateway in front of Apache RocketMQ. ``http_gateway`` and ``mqtt_gateway`` say which protocol, which
port key and when the gateway is ready."""

from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable, ClassVar

from .apache import write_conf
from .processes import LOOPBACK, Child, free_port


class GatewayProcess(ABC):
    """One gateway on a free loopback port, its log in ``home``; started once it publishes."""

    #: the ``ferrymq gateway`` sub-command and the config key of its port
    protocol: ClassVar[str]
    port_key: ClassVar[str]
    #: further keys of its config file
    config: ClassVar[dict[str, object]] = {}

    def __init__(self, child: Child, port: int):
        self.child = child
        self.port = port

    @abstractmethod
    def wait_until_publishing(self, timeout: float, alive: Callable[[], bool]) -> None:
        """Block until a message published through the gateway is stored (RuntimeError after ``timeout``)."""

    @classmethod
    def home_config(cls, home: Path) -> dict[str, object]:
        """Keys of its config file that name places in ``home``."""
        return {}

    @classmethod
    def start(cls, cli: Path, home: Path, namesrv_addr: str, timeout: float = 60, *, port: int | None = None,
              settings: dict[str, object] | None = None):
        """On ``port`` (else a free one), with ``settings`` added to its config file."""
        home.mkdir(parents=True, exist_ok=True)
        port = port or free_port()
        conf = write_conf(home / "gateway.conf", {"bindAddress": LOOPBACK, cls.port_key: port, **cls.config,
                                                  **cls.home_config(home), **(settings or {})})
        child = Child(f"ferrymq gateway {cls.protocol}",
                      [str(cli), "gateway", cls.protocol, "-n", namesrv_addr, "-c", str(conf)],
                      home / "gateway.out").start()
        gateway = cls(child, port)
        try:
            gateway.wait_until_publishing(timeout, alive=child.alive)
        except RuntimeError as exc:
            child.kill()
            raise RuntimeError(f"{exc}; log {child.log}:\n{child.log_tail()}") from None
        return gateway

    def restart(self, *, kill: bool = False, timeout: float = 60) -> None:
        """Stop (SIGTERM; SIGKILL with ``kill``, as a crash) and start again on the same port and config."""
        if kill:
            self.child.kill()
        else:
            self.child.stop()
        self.child.start()
        try:
            self.wait_until_publishing(timeout, alive=self.child.alive)
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}; log {self.child.log}:\n{self.child.log_tail()}") from None

    def stop(self) -> None:
        self.child.kill()
