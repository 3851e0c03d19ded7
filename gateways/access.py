"""What a gateway asks of the broker's access control about its own clients (docs/acl.md): who a user
name and password prove, and whether that user may publish to or subscribe to a RocketMQ topic.

A broker with ``authenticationEnabled`` or ``authorizationEnabled`` gives the gateways it serves in its
process an :class:`Access` (``ferrymq.server.auth.gateway_access``); without one a gateway checks nothing."""

from __future__ import annotations

from typing import Protocol

PUB = "Pub"
SUB = "Sub"


class Access(Protocol):
    #: whether clients must log in (``authenticationEnabled``)
    authenticating: bool
    #: whether each publish and subscribe is checked against the user's ACL (``authorizationEnabled``)
    authorizing: bool

    def login(self, username: str | None, password: bytes | None, client_id: str = "") -> str | None:
        """The user ``username`` and ``password`` prove, or None (refused, with the reason logged)."""
        ...

    def allows(self, username: str | None, action: str, topic: str, ip: str) -> bool:
        """Whether ``username`` may do ``action`` (:data:`PUB` or :data:`SUB`) on ``topic`` from ``ip``."""
        ...

    def is_super(self, username: str | None) -> bool:
        """Whether ``username`` is a super user (who may see everything, as the web console shows it)."""
        ...
