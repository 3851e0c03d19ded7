"""``GET /metrics``: Prometheus's text exposition of this process.

Inside a broker the families are the broker's (:mod:`ferrymq.server.broker.metrics`, collected by the
reactor thread that owns its state), then the process's (CPU, memory, open files, the interpreter's GC).
A gateway serving alone (``ferrymq gateway http -n``) has no broker: it shows the process's figures only.

The route is open, as Prometheus scrapes it and Apache's rocketmq-exporter serves it; a broker with
``metricsAuthEnabled`` asks for a user's HTTP Basic credentials on it (Prometheus's ``basic_auth``).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable

from prometheus_client import CollectorRegistry, GCCollector, PlatformCollector, ProcessCollector
from prometheus_client.exposition import generate_latest
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector
from starlette.requests import Request
from starlette.responses import Response

from . import auth
from .gateway import Gateway
from .problems import Problem

log = logging.getLogger("ferrymq.gateway.http")

#: the text format generate_latest writes, which every Prometheus version reads (newer prometheus_client
#: releases name version 1.0.0 as their latest; this route does not negotiate it)
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
#: how long a scrape waits for the reactor to collect the broker's figures (Prometheus's own scrape
#: timeout is 10 s by default)
COLLECT_TIMEOUT_S = 5.0


class _Collected(Collector):
    """Families already collected, served as they are."""

    def __init__(self, families: Iterable[Metric]):
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self.families


def _process_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    PlatformCollector(registry=registry)
    GCCollector(registry=registry)
    return registry


def endpoint(gateway: Gateway):
    """The route's handler for ``gateway``: served whether or not the gateway's client has started."""
    process = _process_registry()

    async def metrics(request: Request) -> Response:
        access = gateway.access
        if access is not None and access.metrics_authenticating:
            try:
                auth.check(access, request.headers.get("authorization"), None, None,
                           request.client.host if request.client else "")
            except Problem as problem:
                return problem.response(request.url.path)
        text = b""
        if gateway.broker_metrics is not None:
            try:
                families = await gateway.broker_metrics.collect_from_thread(COLLECT_TIMEOUT_S)
            except TimeoutError:
                return Problem(503, f"the broker did not collect its figures within {COLLECT_TIMEOUT_S:g} s: its "
                                    "reactor is stalled (the log says where)").response(request.url.path)
            except Exception:
                log.exception("collecting the broker's metrics failed")
                return Problem(500, "collecting the broker's figures failed; the log has the details").response(
                    request.url.path)
            registry = CollectorRegistry(auto_describe=False)
            registry.register(_Collected(families))
            text = generate_latest(registry)
        return Response(text + generate_latest(process), media_type=CONTENT_TYPE)

    return metrics
