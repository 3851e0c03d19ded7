"""The console's routes, mounted on the HTTP listener's application, and its sampler; each with the action
a user needs on the resource it names (:mod:`.pages` says which)."""

from __future__ import annotations

from collections.abc import Callable

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

from ..access import GET, LIST, group, topic
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

    def every(kind: Callable[[str], str]) -> Callable[[Request], str]:
        return lambda _: kind("*")

    def named(kind: Callable[[str], str], param: str) -> Callable[[Request], str]:
        return lambda request: kind(request.path_params[param])

    routes = [
        Route("/", pages.guarded(pages.cluster, "/"), methods=["GET"]),
        Route("/console.css", stylesheet, methods=["GET"]),
        Route("/topics", pages.guarded(pages.topics, "/topics", LIST, every(topic)), methods=["GET"]),
        Route("/topics/{topic}", pages.guarded(pages.topic, "/topics", GET, named(topic, "topic"), "path.topic"),
              methods=["GET"]),
        Route("/groups", pages.guarded(pages.groups, "/groups", LIST, every(group)), methods=["GET"]),
        Route("/groups/{group}", pages.guarded(pages.group, "/groups", GET, named(group, "group"), "path.group"),
              methods=["GET"]),
        Route("/messages", pages.guarded(pages.messages, "/messages"), methods=["GET"]),
        Route("/transactions", pages.guarded(pages.transactions, "/transactions", LIST, every(topic)),
              methods=["GET"]),
        Route("/transactions/{id}", pages.guarded(pages.transaction, "/transactions"), methods=["GET"]),
    ]
    return Mount(PATH, routes=routes), sampler
