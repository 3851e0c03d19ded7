"""The request signature of Apache's ``AclClientRPCHook``: HMAC-SHA1 with the user's secret over the values
of the request's ext fields sorted by key (``Signature`` left out), followed by the body; Base64-encoded.

The broker checks it and FerryMQ's own clients make it, from this one module."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass

from .command import RemotingCommand
from .versions import VERSION_NAMES

ACCESS_KEY = "AccessKey"
SECRET_KEY = "SecretKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"

#: Clients up to 4.9.3 added ``_UNIQUE_KEY_QUERY`` after signing, so the broker leaves it out for them.
_UNIQUE_KEY_QUERY = "_UNIQUE_KEY_QUERY"
_V4_9_3 = VERSION_NAMES.index("V4_9_3")


@dataclass(frozen=True, slots=True)
class Credentials:
    """A user's access key and secret (Apache's ``SessionCredentials``), with the optional security token."""

    access_key: str
    secret_key: str
    security_token: str | None = None

    def __repr__(self) -> str:
        return f"Credentials(access_key={self.access_key!r}, secret_key=<hidden>)"


def signed_content(fields: Mapping[str, str | None], body: bytes | None, version: int) -> bytes:
    """The bytes a request's signature covers, as the broker rebuilds them from what arrived."""
    skip_unique_key = version <= _V4_9_3
    text = "".join(
        value for key, value in sorted(fields.items())
        if key != SIGNATURE and value is not None and not (skip_unique_key and key == _UNIQUE_KEY_QUERY)
    )
    return text.encode("utf-8") + (body or b"")


def sign(content: bytes, secret: str) -> str:
    """Apache's ``AclSigner.calSignature``: Base64 of HMAC-SHA1(secret, content)."""
    return base64.b64encode(hmac.new(secret.encode("utf-8"), content, hashlib.sha1).digest()).decode("ascii")


def signed_fields(fields: Mapping[str, str], body: bytes | None, access_key: str, secret: str,
                  version: int, security_token: str | None = None) -> dict[str, str]:
    """``fields`` with AccessKey (and SecurityToken) added and signed, as ``AclClientRPCHook`` sends them."""
    out = dict(fields)
    out[ACCESS_KEY] = access_key
    if security_token is not None:
        out[SECURITY_TOKEN] = security_token
    out[SIGNATURE] = sign(signed_content(out, body, version), secret)
    return out


def sign_command(cmd: RemotingCommand, credentials: Credentials) -> None:
    """Sign ``cmd`` in place before it is sent, as ``AclClientRPCHook.doBeforeRequest`` does. Signing again
    (a retried request) replaces the signature."""
    cmd.ext_fields = signed_fields(cmd.ext_fields or {}, cmd.body, credentials.access_key,
                                   credentials.secret_key, cmd.version, credentials.security_token)
