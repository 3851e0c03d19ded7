"""Who sent a request: the user its AccessKey names, proven by the signature only that user's secret makes
(Apache's ``DefaultAuthenticationHandler``, with its refusal messages)."""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.signature import ACCESS_KEY, SIGNATURE, sign, signed_content

from .errors import AuthenticationError
from .users import User, Users, UserStatus


class Authenticator:
    """Checks credentials against ``users``; request codes in ``whitelist`` are let through unsigned."""

    def __init__(self, users: Users, whitelist: Iterable[int] = ()):
        self.users = users
        self.whitelist = frozenset(whitelist)

    def authenticate(self, access_key: str | None, signature: str | None, content: bytes) -> User:
        """The enabled user ``access_key`` names, if ``signature`` is its HMAC of ``content``; else raise
        :class:`AuthenticationError`. The entry point of every protocol that signs like the remoting clients."""
        if not access_key:
            raise AuthenticationError("username cannot be null.")
        user = self.users.get(access_key)
        if user is None:
            raise AuthenticationError(f"User:{access_key} is not found.")
        if user.user_status is UserStatus.DISABLE:
            raise AuthenticationError(f"User:{access_key} is disabled.")
        expected = sign(content, user.password or "")
        if signature is None or not hmac.compare_digest(expected.encode(), signature.encode()):
            raise AuthenticationError("check signature failed.")
        return user

    def check(self, cmd: RemotingCommand) -> None:
        """Refuse ``cmd`` unless its code is whitelisted or it is signed by an enabled user."""
        if cmd.code in self.whitelist:
            return
        fields = cmd.ext_fields
        if not fields or ACCESS_KEY not in fields:
            raise AuthenticationError("username cannot be null.")
        self.authenticate(fields[ACCESS_KEY], fields.get(SIGNATURE),
                          signed_content(fields, cmd.body, cmd.version))


def parse_code_list(value: str) -> frozenset[int]:
    """A whitelist key's value: request codes separated by commas (blank entries ignored)."""
    codes = set()
    for item in value.split(","):
        item = item.strip()
        if item:
            codes.add(int(item))
    return frozenset(codes)
