"""The MQTT gateway in front of each server of the ``server`` fixture.

On FerryMQ's side the gateway is the one ``ferrymq standalone`` serves itself (``mqttListenPort``); in
front of Apache RocketMQ it is ``ferrymq gateway mqtt -n <Apache's name server>``, a child process
(:class:`GatewayProcess`). Either is ready once a device's QoS 1 publish is acknowledged
(:func:`wait_until_publishing`): a PUBACK is sent once the broker stored the message, so the gateway's
RocketMQ producer is up and has a route.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.gateways.mqtt.devices import V5, Device

from .apache import write_conf
from .processes import LOOPBACK, Child, free_port

#: the topic the readiness check publishes to (auto-created on both servers)
READY_TOPIC = "CompatMqttGatewayReady"


def wait_until_publishing(port: int, timeout: float = 60, alive=lambda: True) -> None:
    """Block until a device on ``port`` has a QoS 1 publish acknowledged; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    while time.monotonic() < deadline and alive():
        try:
            device = Device(port, V5)
        except (OSError, TimeoutError) as exc:
            last = repr(exc)
            time.sleep(0.2)
            continue
        try:
            device.publish(f"{READY_TOPIC}/ready", b"ready", 1)
            return
        except AssertionError as exc:
            last = str(exc)
        finally:
            device.close()
    raise RuntimeError(f"the MQTT gateway on port {port} does not publish: {last}")


class GatewayProcess:
    """``ferrymq gateway mqtt -n NAMESRV`` on a free loopback port, its log in ``home``."""

    def __init__(self, child: Child, port: int):
        self.child = child
        self.port = port

    @classmethod
    def start(cls, cli: Path, home: Path, namesrv_addr: str, timeout: float = 60) -> GatewayProcess:
        home.mkdir(parents=True, exist_ok=True)
        port = free_port()
        conf = write_conf(home / "gateway.conf", {"bindAddress": LOOPBACK, "mqttListenPort": port})
        child = Child("ferrymq gateway mqtt", [str(cli), "gateway", "mqtt", "-n", namesrv_addr, "-c", str(conf)],
                      home / "gateway.out").start()
        gateway = cls(child, port)
        try:
            wait_until_publishing(port, timeout, alive=child.alive)
        except RuntimeError as exc:
            child.kill()
            raise RuntimeError(f"{exc}; log {child.log}:\n{child.log_tail()}") from None
        return gateway

    def stop(self) -> None:
        self.child.kill()
