"""What a gateway asks of the broker's access control about its own clients (docs/acl.md): who a user
name and password prove, and whether that user may do an action (publish, subscribe, and the create, list
and get of the HTTP gateway's admin routes and web console) on a RocketMQ topic or group.

A broker with ``authenticationEnabled`` or ``authorizationEnabled`` gives the gateways it serves in its
process an :class:`Access` (``ferrymq.server.auth.gateway_access``); without one a gateway checks nothing."""

from __future__ import annotations

from typing import Protocol

PUB = "Pub"
SUB = "Sub"
CREATE = "Create"
LIST = "List"
GET = "Get"


def topic(name: str) -> str:
    """The resource key of a topic (``Topic:*`` for every topic), as ACL entries name it."""
    return f"Topic:{name}"


def group(name: str) -> str:
    """The resource key of a consumer group (``Group:*`` for every group)."""
    return f"Group:{name}"


class Access(Protocol):
    #: whether clients must log in (``authenticationEnabled``)
    authenticating: bool
    #: whether each publish and subscribe is checked against the user's ACL (``authorizationEnabled``)
    authorizing: bool

    def login(self, username: str | None, password: bytes | None, client_id: str = "") -> str | None:
        """The user ``username`` and ``password`` prove, or None (refused, with the reason logged)."""
        ...

    #: whether ``/metrics`` needs a user's credentials too (``metricsAuthEnabled``)
    metrics_authenticating: bool

    def allows(self, username: str | None, action: str, resource: str, ip: str) -> bool:
        """Whether ``username`` may do ``action`` (:data:`PUB`, :data:`SUB`, :data:`CREATE`, :data:`LIST`
        or :data:`GET`) on ``resource`` (a key of :func:`topic` or :func:`group`) from ``ip``."""
        ...
