"""The broker's users and ACLs as the gateways in its process check their own clients (an MQTT CONNECT's
user name and password, an HTTP request's credentials), implementing :class:`ferrymq.gateways.access.Access`.

A password proves a user when it is the user's password (its secret key), as a mosquitto password file
has it, or when it is rocketmq-mqtt's signature of the client: Base64 of HMAC-SHA1 keyed by the secret over
the client identifier, so a device set up for rocketmq-mqtt connects unchanged and its secret never
crosses the network."""

from __future__ import annotations

import hmac
import logging

from ferrymq.wire.signature import sign

from .acls import Action, Resource
from .control import AccessControl
from .errors import AuthorizationError
from .users import UserStatus

log = logging.getLogger("ferrymq.auth")

_ACTIONS = {action.value: action for action in (Action.PUB, Action.SUB, Action.CREATE, Action.LIST, Action.GET)}


class GatewayAccess:
    def __init__(self, control: AccessControl):
        self.control = control
        self.authenticating = control.config.authenticationEnabled
        self.authorizing = control.config.authorizationEnabled
        self.metrics_authenticating = control.config.metricsAuthEnabled

    def login(self, username: str | None, password: bytes | None, client_id: str = "") -> str | None:
        user = self.control.users.get(username) if username else None
        if user is None or user.user_status is UserStatus.DISABLE or not password or not user.password:
            log.info("gateway login as %r refused: %s", username, "no such user" if user is None else
                     "disabled" if user.user_status is UserStatus.DISABLE else "no password")
            return None
        if hmac.compare_digest(password, user.password.encode("utf-8")):
            return user.username
        if client_id and hmac.compare_digest(password, sign(client_id.encode("utf-8"), user.password).encode()):
            return user.username
        log.info("gateway login as %r refused: wrong password", username)
        return None

    def allows(self, username: str | None, action: str, resource: str, ip: str) -> bool:
        try:
            self.control.authorizer.authorize(username, Resource.parse(resource), (_ACTIONS[action],), ip)
        except AuthorizationError as exc:
            log.info("gateway %s on %s refused: %s", action, resource, exc)
            return False
        return True
