"""The HTTP gateway in front of each server of the ``server`` fixture.

On FerryMQ's side the gateway is the one ``ferrymq standalone`` serves itself (``httpListenPort``); in
front of Apache RocketMQ it is ``ferrymq gateway http -n <Apache's name server>``, a child process
(:class:`GatewayProcess`). Either is ready once ``GET /openapi.json`` answers and a publish is stored
(:func:`wait_until_publishing`): the gateway's RocketMQ client starts after its HTTP port is bound.
"""

from __future__ import annotations

import time

import httpx
from ferrymq.gateways.http.schema import ENVELOPE_TYPE

from . import gateway_process
from .processes import LOOPBACK

#: the topic the readiness check publishes to (auto-created on both servers)
READY_TOPIC = "CompatHttpGatewayReady"
#: the key both gateways sign transaction check-back calls with; the scenarios' receivers verify with it
CHECK_BACK_SECRET = "compat-check-back-secret"
#: the gateway keys of both servers: FerryMQ's broker keys, and ``ferrymq gateway http``'s config file
GATEWAY_CONFIG: dict[str, object] = {"httpCheckBackSecret": CHECK_BACK_SECRET}


def wait_until_publishing(url: str, timeout: float = 60, alive=lambda: True) -> None:
    """Block until the gateway at ``url`` serves its document and stores a message; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    last = "no answer"
    with httpx.Client(base_url=url, timeout=10) as http:
        while time.monotonic() < deadline and alive():
            try:
                if http.get("/openapi.json").status_code == 200:
                    r = http.post(f"/v1/topics/{READY_TOPIC}/messages", json={"body": "ready"},
                                  headers={"Content-Type": ENVELOPE_TYPE})
                    if r.status_code == 200:
                        return
                    last = f"publish answered {r.status_code}: {r.text[:500]}"
            except httpx.TransportError as exc:
                last = repr(exc)
            time.sleep(0.2)
    raise RuntimeError(f"the HTTP gateway at {url} does not publish: {last}")


class GatewayProcess(gateway_process.GatewayProcess):
    """``ferrymq gateway http -n NAMESRV`` on a free loopback port, its log in ``home``."""

    protocol = "http"
    port_key = "httpListenPort"
    config = GATEWAY_CONFIG

    @property
    def url(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def wait_until_publishing(self, timeout: float, alive) -> None:
        wait_until_publishing(self.url, timeout, alive)
