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

from . import gateway_process

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


class GatewayProcess(gateway_process.GatewayProcess):
    """``ferrymq gateway mqtt -n NAMESRV`` on a free loopback port, its log and its sessions in ``home``."""

    protocol = "mqtt"
    port_key = "mqttListenPort"

    @classmethod
    def home_config(cls, home: Path) -> dict[str, object]:
        return {"storePathRootDir": home / "store"}

    def wait_until_publishing(self, timeout: float, alive) -> None:
        wait_until_publishing(self.port, timeout, alive)


class InBroker:
    """The MQTT gateway a ``ferrymq standalone`` serves (``server``, a ``FerryMQServer``): restarting it
    restarts the server."""

    def __init__(self, server, port: int):
        self.server = server
        self.port = port

    def restart(self, *, kill: bool = False, timeout: float = 60) -> None:
        """Stop (SIGTERM; SIGKILL with ``kill``, as a crash) and start again on the same ports and store."""
        if kill:
            self.server.kill()
            self.server.start()
        else:
            self.server.restart()
        wait_until_publishing(self.port, timeout)
