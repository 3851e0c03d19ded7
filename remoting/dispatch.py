"""Turning a decoded request into its response: processor lookup and the error-to-response mapping.

Every processor in the project (name server, broker, client-side handlers) is a plain function
``handler(cmd, channel)`` returning a RemotingCommand, None (no answer), a Deferred, a
:class:`.pending.Pending` or an awaitable of one; the transport answers unknown codes and failures
here, in one place, the way Apache does.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Union

from twisted.internet import defer

from ferrymq.wire.codes import Flag, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.errors import BodyError, FieldError

from .pending import PROMISES, Pending

if TYPE_CHECKING:
    from .channel import Channel

log = logging.getLogger("ferrymq.remoting")
_RESPONSE = int(Flag.RESPONSE)

Handler = Callable[[RemotingCommand, "Channel"], Any]
#: A table code -> handler, or one callable that handles every code itself.
Processor = Union[Mapping[int, Handler], Handler]


def not_supported(cmd: RemotingCommand) -> RemotingCommand:
    """Apache's answer to a request code it has no processor for (remark text as Apache writes it)."""
    return cmd.response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
    )


def error_response(cmd: RemotingCommand, exc: BaseException, peer: str) -> RemotingCommand:
    """SYSTEM_ERROR with a remark naming what went wrong, as Apache answers a failing processor."""
    if isinstance(exc, (FieldError, BodyError)):
        log.warning("request code %s from %s rejected: %s", cmd.code, peer, exc)
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    log.error(
        "request code %s from %s failed in its handler", cmd.code, peer, exc_info=(type(exc), exc, exc.__traceback__)
    )
    return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


def resolve_handler(processor: Processor | None, code: int) -> Handler | None:
    if processor is None:
        return None
    if isinstance(processor, Mapping):
        return processor.get(code)
    return processor


def _finish(cmd: RemotingCommand, result: object) -> RemotingCommand | None:
    """Force the response's correlation fields from the request, whoever built it."""
    if result is None:
        return None
    if not isinstance(result, RemotingCommand):
        raise TypeError(f"handler for code {cmd.code} returned {type(result).__name__}, not a RemotingCommand")
    result.opaque = cmd.opaque
    result.flag |= _RESPONSE
    result.serialize_type = cmd.serialize_type
    return result


def _finish_late(cmd: RemotingCommand, result: object, peer: str) -> RemotingCommand | None:
    """:func:`_finish` for a Deferred's result: a wrong one is answered as SYSTEM_ERROR too."""
    try:
        return _finish(cmd, result)
    except TypeError as exc:
        return error_response(cmd, exc, peer)


def dispatch(
    processor: Processor | None, cmd: RemotingCommand, channel: "Channel"
) -> RemotingCommand | None | defer.Deferred | Pending:
    """Run the handler for ``cmd``: the response to write (None: nothing to write), or a promise of it
    (a Deferred or a Pending).

    Synchronous answers stay synchronous (no Deferred per request on the hot path). Nothing raises and
    no Deferred fails: every error becomes a SYSTEM_ERROR response (dropped later for oneway requests).
    """
    handler = resolve_handler(processor, cmd.code)
    if handler is None:
        return not_supported(cmd)
    try:
        result = handler(cmd, channel)
    except Exception as exc:  # noqa: BLE001 - every handler failure becomes a response
        return error_response(cmd, exc, channel.remote_address)
    if isinstance(result, RemotingCommand) or result is None:
        return _finish(cmd, result)
    if inspect.isawaitable(result) and not isinstance(result, defer.Deferred):
        result = defer.ensureDeferred(result)
    if isinstance(result, PROMISES):
        return result.addCallbacks(lambda r: _finish_late(cmd, r, channel.remote_address),
                                   lambda f: error_response(cmd, f.value, channel.remote_address))
    return error_response(
        cmd,
        TypeError(f"handler for code {cmd.code} returned {type(result).__name__}, not a RemotingCommand"),
        channel.remote_address,
    )
