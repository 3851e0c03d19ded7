"""Who sends an HTTP request and whether they may, when the broker serving the gateway checks its users
(docs/http.md, *Users and ACLs*): HTTP Basic credentials of one of the broker's users, then ``Pub`` or
``Sub`` on the topic of the path in the user's ACL. Refusals are problems: 401 with a Basic challenge when
the credentials are missing or wrong, 403 when the ACL does not allow the action. The admin routes need
``Create``, ``List`` or ``Get`` on their topic or group, as the broker's admin request codes do."""

from __future__ import annotations

import base64
import binascii

from ..access import Access
from .problems import Problem

CHALLENGE = {"WWW-Authenticate": 'Basic realm="ferrymq", charset="UTF-8"'}


def _unauthenticated(detail: str) -> Problem:
    return Problem(401, detail, "header.Authorization", headers=CHALLENGE)


def check(access: Access, authorization: str | None, action: str | None, resource: str | None, ip: str,
          field: str | None = "path.topic") -> str | None:
    """The user the request's ``Authorization`` header proves (None when ``access`` does not
    authenticate); raises a 401 or 403 :class:`Problem`. ``action`` on ``resource`` (an
    :mod:`ferrymq.gateways.access` resource key) is checked when both are given and ``access`` authorizes; a
    refusal names the resource and the request's ``field`` that named it."""
    user = None
    if authorization is not None:
        scheme, _, encoded = authorization.strip().partition(" ")
        if scheme.lower() != "basic":
            raise _unauthenticated(f"the Authorization scheme is {scheme!r}: send Basic with a user's name and "
                                   "password")
        try:
            user, colon, password = base64.b64decode(encoded.strip(), validate=True).decode("utf-8").partition(":")
        except (binascii.Error, UnicodeDecodeError):
            raise _unauthenticated("the Basic credentials are not Base64 of UTF-8 'user:password'") from None
        if not colon:
            raise _unauthenticated("the Basic credentials have no ':' between the user and the password")
        if access.authenticating and access.login(user, password.encode("utf-8")) is None:
            raise _unauthenticated(f"user {user!r} is unknown or disabled, or the password is wrong")
    elif access.authenticating:
        raise _unauthenticated("no Authorization header: send HTTP Basic credentials of a broker user")
    if action is not None and resource is not None:
        authorize(access, user, action, resource, ip, field)
    return user


def authorize(access: Access, user: str | None, action: str, resource: str, ip: str, field: str | None) -> None:
    """Raises a 403 :class:`Problem` naming ``resource`` unless ``user`` may do ``action`` on it (or
    ``access`` does not authorize)."""
    if access.authorizing and not access.allows(user, action, resource, ip):
        raise Problem(403, f"User:{user} may not {action} on {resource}", field)
