"""Authentication and authorization of the v2 calls, as Apache's proxy checks them (docs/grpc.md): the
5.x clients sign the ``x-mq-date-time`` header with the user's secret (``authorization: MQv2-HMAC-SHA1
Credential=<user>/..., SignedHeaders=x-mq-date-time, Signature=<hex HMAC-SHA1>``), and each request needs
the actions the proxy maps it to on its topic and group.

The checks (:class:`AccessChecks`) exist only on a broker with ``authenticationEnabled`` or
``authorizationEnabled``: an open one serves its calls without them. The port's call dispatch runs
:meth:`AccessChecks.check` on each request before the method (:mod:`.dispatch`). A refusal is
answered, as the proxy answers it, with the method's response and status ``UNAUTHORIZED`` (40100) naming
the reason.
"""

from __future__ import annotations

import base64
import binascii
import logging
from typing import Any

from ferrymq.server.auth.acls import Action, Resource, ResourceType
from ferrymq.server.auth.authorization import Need
from ferrymq.server.auth.errors import AuthenticationError, AuthorizationError

from .protocol import Code, pb, service
from .status import status

log = logging.getLogger("ferrymq.grpc")

AUTHORIZATION = "authorization"
DATE_TIME = "x-mq-date-time"

_PUB, _SUB = (Action.PUB,), (Action.SUB,)


def _topic(name: str, actions: tuple[Action, ...]) -> Need:
    return Need(Resource(ResourceType.TOPIC, name), actions)


def _group(name: str) -> Need:
    return Need(Resource(ResourceType.GROUP, name), _SUB)


def needs_of(request: Any) -> list[Need]:
    """What ``request`` needs, as the proxy's ``DefaultAuthorizationContextBuilder`` maps the v2 requests."""
    kind = type(request).__name__
    if kind == "SendMessageRequest":
        if not request.messages:
            raise AuthorizationError("message is null.")
        return [_topic(request.messages[0].topic.name, _PUB)]
    if kind in ("EndTransactionRequest", "RecallMessageRequest"):
        return [_topic(request.topic.name, _PUB)]
    if kind == "HeartbeatRequest":
        consumer = request.client_type in (pb.PUSH_CONSUMER, pb.SIMPLE_CONSUMER, pb.PULL_CONSUMER)
        return [_group(request.group.name)] if consumer else []
    if kind == "ReceiveMessageRequest":
        if not request.HasField("message_queue"):
            raise AuthorizationError("messageQueue is null.")
        return [_group(request.group.name), _topic(request.message_queue.topic.name, _SUB)]
    if kind in ("AckMessageRequest", "ForwardMessageToDeadLetterQueueRequest", "QueryAssignmentRequest"):
        return [_group(request.group.name), _topic(request.topic.name, _SUB)]
    if kind in ("NotifyClientTerminationRequest", "ChangeInvisibleDurationRequest"):
        return [_group(request.group.name)] if request.group.name.strip() else []
    if kind == "QueryRouteRequest":
        if not request.topic.name.strip():
            raise AuthorizationError("topic is null.")
        return [_topic(request.topic.name, (Action.PUB, Action.SUB))]
    if kind == "TelemetryCommand" and request.WhichOneof("command") == "settings":
        settings = request.settings
        needs = [_topic(topic.name, _PUB) for topic in settings.publishing.topics] \
            if settings.HasField("publishing") else []
        if settings.HasField("subscription"):
            needs.append(_group(settings.subscription.group.name))
            needs += [_topic(entry.topic.name, _SUB) for entry in settings.subscription.subscriptions]
        return needs
    return []


def credentials_of(metadata: dict[str, str]) -> tuple[str | None, str | None, bytes]:
    """(user, Base64 signature, signed content) from the call's headers, as the proxy reads them."""
    authorization = metadata.get(AUTHORIZATION)
    if not authorization:
        return None, None, b""
    date_time = metadata.get(DATE_TIME)
    if not date_time:
        raise AuthenticationError("datetime is null.")
    items = authorization.partition(" ")[2]
    if not items:
        raise AuthenticationError("authentication header is incorrect.")
    user = signature = None
    for item in items.split(","):
        key, eq, value = item.strip().partition("=")
        if not eq:
            raise AuthenticationError("authentication keyValues length is incorrect, actual length=1.")
        if key == "Credential":
            user = value.split("/")[0]
        elif key == "Signature":
            try:
                signature = base64.b64encode(bytes.fromhex(value)).decode("ascii")
            except ValueError as exc:
                raise AuthenticationError("create authentication context error.") from exc
    return user, signature, date_time.encode("utf-8")


def peer_ip(peer: str) -> str:
    """A client's ``ipv4:127.0.0.1:5555`` or ``ipv6:[::1]:5555`` (grpcio's peer form) to the address alone."""
    return peer.partition(":")[2].rpartition(":")[0].strip("[]")


class AccessChecks:
    """Checks each call against ``control`` (the broker's :class:`~ferrymq.server.auth.control.AccessControl`,
    attached once the broker exists; calls before that pass to the service, which has no broker to serve
    them yet)."""

    def __init__(self) -> None:
        self.control: Any = None

    def check(self, metadata: dict[str, str], request: Any, ip: str) -> str | None:
        """None when ``request`` may be served, else the reason it may not."""
        control = self.control
        try:
            user = None
            if control.config.authenticationEnabled:
                user, signature, content = credentials_of(metadata)
                control.authenticator.authenticate(user, signature, content)
            else:
                user = credentials_of(metadata)[0]
            if control.config.authorizationEnabled:
                for need in needs_of(request):
                    control.authorizer.authorize(user, need.resource, need.actions, ip)
        except (AuthenticationError, AuthorizationError) as exc:
            log.info("gRPC %s from %s refused: %s", type(request).__name__, ip, exc)
            return str(exc)
        except binascii.Error as exc:
            return f"create authentication context error: {exc}"
        return None

    @staticmethod
    def refusal(path: str, reason: str) -> Any:
        """The answer of the method at ``path`` refusing its call for ``reason``, as the proxy answers it."""
        method = path.rpartition("/")[2]
        refusal_type = getattr(service, f"{method}Response", None) or service.TelemetryCommand
        return refusal_type(status=status(Code.UNAUTHORIZED, reason))
