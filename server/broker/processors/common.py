"""Small helpers every processor uses: answers, refusals, peer addresses, running store calls that may be async."""

from __future__ import annotations

import functools
from typing import Any, Callable

from ferrymq.remoting.client import split_address
from ferrymq.remoting.pending import PROMISES, Pending
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.errors import Refusal
from ferrymq.wire.message import Host


def refuse(code: int, remark: str, ext: dict[str, str] | None = None) -> Refusal:
    """A broker refusal to raise. Its extFields are never null, as on every answer of Apache's broker."""
    return Refusal(code, remark, ext if ext is not None else {})


def ok(cmd: RemotingCommand, ext: dict[str, str] | None = None, body: bytes = b"") -> RemotingCommand:
    """A SUCCESS answer. extFields is never null: Apache's answers carry ``{}`` and some client paths
    read the map without a null check."""
    return cmd.response(0, None, ext if ext is not None else {}, body)


def peer_host(channel: Any) -> Host:
    """The client's ``(ip, port)`` as BORNHOST (Apache uses the socket's remote address, not a header)."""
    return _host_of(getattr(channel, "remote_address", "") or "")


@functools.lru_cache(maxsize=4096)
def _host_of(addr: str) -> Host:
    try:
        return split_address(addr)
    except ValueError:
        return ("127.0.0.1", 0)


def peer_addr(channel: Any) -> str:
    return getattr(channel, "remote_address", "") or "?"


def then(result: Any, fn: Callable[[Any], Any]) -> Any:
    """Apply ``fn`` to a plain result now, or to a promise's (Deferred's or Pending's) when it fires."""
    if isinstance(result, PROMISES):
        return result.addCallback(fn)
    return fn(result)


def after_registration(ctx: Any, created: bool, result: Any) -> Any:
    """Hold an answer until the name servers know a topic this request created (as Apache does)."""
    if not created or ctx.registration_pending is None:
        return result
    waited = ctx.registration_pending(REGISTRATION_WAIT_S)
    if isinstance(result, Pending):  # a Deferred's callback may return a Deferred, not a Pending
        result = result.deferred()
    return waited.addCallback(lambda _: result)


#: Longest an answer waits for the registration of a topic it created (the client times out at 3 s).
REGISTRATION_WAIT_S = 2.0
