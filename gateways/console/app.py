"""The console's routes, mounted on the HTTP listener's application, and its sampler."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from ..http.gateway import Gateway
from .html import STYLESHEET
from .pages import Pages
from .sampler import Sampler

#: where the console is served
PATH = "/console"


def mount(gateway: Gateway, sample_interval: float) -> tuple[Mount, Sampler]:
    """The console's routes under :data:`PATH`, and the sampler to run beside them (the caller runs
    :meth:`Sampler.run` while it serves)."""
    sampler = Sampler(lambda: gateway.admin, sample_interval)
    pages = Pages(gateway, sampler, PATH)

    async def stylesheet(request: Request) -> Response:
        return Response(STYLESHEET, media_type="text/css", headers={"Cache-Control": "max-age=300"})

    routes = [
        Route("/", pages.guarded(pages.cluster, "/"), methods=["GET"]),
        Route("/console.css", stylesheet, methods=["GET"]),
        Route("/topics", pages.guarded(pages.topics, "/topics"), methods=["GET"]),
        Route("/topics/{topic}", pages.guarded(pages.topic, "/topics"), methods=["GET"]),
        Route("/groups", pages.guarded(pages.groups, "/groups"), methods=["GET"]),
        Route("/groups/{group}", pages.guarded(pages.group, "/groups"), methods=["GET"]),
        Route("/messages", pages.guarded(pages.messages, "/messages"), methods=["GET"]),
        Route("/transactions", pages.guarded(pages.transactions, "/transactions"), methods=["GET"]),
        Route("/transactions/{id}", pages.guarded(pages.transaction, "/transactions"), methods=["GET"]),
    ]
    return Mount(PATH, routes=routes), sampler
