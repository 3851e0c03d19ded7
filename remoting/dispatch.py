"""Turning a decoded request into its response: routing, header decoding and the error-to-response mapping.

A processor is a table code -> handler (or one callable handling every code). A handler is either a
:class:`Route`, called as ``handle(cmd, channel, header)`` with the header its code declares
(:mod:`ferrymq.wire.requests`) already decoded, or a plain ``handler(cmd, channel)``. Either returns a
RemotingCommand, None (no answer), a Deferred, a :class:`.pending.Pending` or an awaitable of one, or
raises :class:`~ferrymq.wire.errors.Refusal`. The transport answers unknown codes, refusals and failures
here, in one place, the way Apache does.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from twisted.internet import defer

from ferrymq.wire.codes import Flag, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.errors import BodyError, FieldError, Refusal
from ferrymq.wire.requests import REQUESTS, HeaderDecoder, Request

from .pending import PROMISES, Pending

if TYPE_CHECKING:
    from .channel import Channel

log = logging.getLogger("ferrymq.remoting")
_RESPONSE = int(Flag.RESPONSE)

Handler = Callable[[RemotingCommand, "Channel"], Any]
#: ``handle(cmd, channel, header)``: the header is the request's declared header type (None if it has none).
TypedHandler = Callable[[RemotingCommand, "Channel", Any], Any]


@dataclass(frozen=True, slots=True)
class Route:
    """A request code's handler together with the decoder of the header the code declares."""

    request: Request
    handle: TypedHandler
    #: ``request.decode``, or a decoder answering None for a handler that reads no header.
    decode: HeaderDecoder


#: A table code -> handler, or one callable that handles every code itself.
Processor = Union[Mapping[int, Union[Route, Handler]], Handler]


def handles(*codes: int, header: bool = True) -> Callable[[TypedHandler], TypedHandler]:
    """Mark a method as the handler of ``codes`` (each declared in :data:`~ferrymq.wire.requests.REQUESTS`).

    ``header=False``: the handler is given None instead of the decoded header, so a malformed header
    is not refused (for codes whose handler ignores its fields, or checks something else first).
    """

    def mark(fn: TypedHandler) -> TypedHandler:
        fn.__handles__ = (tuple(int(c) for c in codes), header)  # type: ignore[attr-defined]
        return fn

    return mark


def _ignore_header(_ext: object) -> None:
    return None


def routes(processors: Iterable[object]) -> dict[int, Route]:
    """The table of every :func:`handles`-marked method of ``processors``; a code claimed twice is an error."""
    table: dict[int, Route] = {}
    for proc in processors:
        for name in dir(type(proc)):
            marked = getattr(getattr(type(proc), name, None), "__handles__", None)
            if marked is None:
                continue
            codes, wants_header = marked
            handle = getattr(proc, name)
            for code in codes:
                if code in table:
                    raise RuntimeError(f"request code {code} has two handlers: {table[code].handle} and {handle}")
                spec = REQUESTS[code]
                table[code] = Route(spec, handle, spec.decode if wants_header else _ignore_header)
    return table


def not_supported(cmd: RemotingCommand) -> RemotingCommand:
    """Apache's answer to a request code it has no processor for (remark text as Apache writes it)."""
    return cmd.response(
        ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f" request type {cmd.code} not supported"
    )


def error_response(cmd: RemotingCommand, exc: BaseException, peer: str) -> RemotingCommand:
    """The answer to a handler that raised: a refusal's own code, remark and extFields; otherwise
    SYSTEM_ERROR with a remark naming what went wrong, as Apache answers a failing processor."""
    if isinstance(exc, Refusal):
        return cmd.response(exc.code, exc.remark, exc.ext)
    if isinstance(exc, (FieldError, BodyError)):
        log.warning("request code %s from %s rejected: %s", cmd.code, peer, exc)
        return cmd.response(ResponseCode.SYSTEM_ERROR, str(exc))
    log.error(
        "request code %s from %s failed in its handler", cmd.code, peer, exc_info=(type(exc), exc, exc.__traceback__)
    )
    return cmd.response(ResponseCode.SYSTEM_ERROR, f"{type(exc).__name__}: {exc}")


def resolve_handler(processor: Processor | None, code: int) -> Route | Handler | None:
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
    no Deferred fails: a refusal becomes its answer, every other error a SYSTEM_ERROR response (dropped
    later for oneway requests).
    """
    handler = resolve_handler(processor, cmd.code)
    if handler is None:
        return not_supported(cmd)
    try:
        if handler.__class__ is Route:
            result = handler.handle(cmd, channel, handler.decode(cmd.ext_fields))
        else:
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
