"""Where the console is served: under /console of the HTTP listener's application when consoleEnabled, not
at all when not; before the gateway's client has started its pages say so (503)."""

from __future__ import annotations

import asyncio

import httpx

from ferrymq.gateways.http.app import create_app
from ferrymq.gateways.http.gateway import Gateway
from ferrymq.server import config as cfg


def _get(props: dict[str, str], *paths: str) -> list[httpx.Response]:
    """GET ``paths`` from the application of a gateway configured with ``props`` (its client not started)."""
    options = cfg.from_properties(cfg.GatewayConfig, props).console_options()
    app = create_app(Gateway("127.0.0.1:9", **options), manage_gateway=False)

    async def get() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://console") as http:
            return [await http.get(path) for path in paths]

    return asyncio.run(get())


def test_the_console_is_served_under_its_path_by_default():
    page, css = _get({}, "/console/", "/console/console.css")
    assert (page.status_code, page.headers["content-type"]) == (503, "text/html; charset=utf-8")
    assert "starting" in page.text
    assert (css.status_code, css.headers["content-type"].split(";")[0]) == (200, "text/css")


def test_consoleEnabled_false_serves_no_console():
    (page,) = _get({"consoleEnabled": "false"}, "/console/")
    assert (page.status_code, page.headers["content-type"]) == (404, "application/problem+json")


def test_the_sample_interval_is_read_in_milliseconds():
    assert cfg.from_properties(cfg.GatewayConfig, {"consoleSampleInterval": "250"}).console_options() == {
        "console_sample_interval": 0.25}
