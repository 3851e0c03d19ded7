# cython: annotation_typing=False
# (an IntEnum is passed where an int is annotated: Cython would refuse it as not an int)
"""Calls of the v2 service run from the HTTP/2 transport: the method table, the context a method is handed,
and a call's life from its request to its status.

The table is the generated one: what ``add_MessagingServiceServicer_to_server`` registers (each method's
path, kind, request parser and response serializer), read through grpcio's public handler API, so no
method is listed twice. A method is a coroutine (unary answers) or an async generator (streamed answers);
it runs as a task on the port's loop. The access checks (:class:`.access.AccessChecks`), when the
broker has them, see each request before the method does.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
from collections.abc import AsyncIterator, Callable
from typing import Any, Protocol

from . import framing
from .access import peer_ip
from .framing import Status
from .protocol import service_grpc

log = logging.getLogger("ferrymq.grpc")

OK = Status(framing.OK)
CANCELLED = Status(framing.CANCELLED, "Cancelled")
DEADLINE_EXCEEDED = Status(framing.DEADLINE_EXCEEDED, "Deadline Exceeded")
_END = object()


class Host(Protocol):
    """What a call answers through: its connection."""

    loop: asyncio.AbstractEventLoop

    def send_message(self, stream_id: int, message: bytes) -> None: ...

    def finish(self, stream_id: int, status: Status, trailing: tuple = ()) -> None: ...

    def call_done(self, stream_id: int) -> None: ...


class Aborted(Exception):
    """Raised by :meth:`Context.abort`: the call ends with ``status``."""

    def __init__(self, status: Status):
        super().__init__(status.details)
        self.status = status


def _code(code: Any) -> int:
    """A ``grpc.StatusCode`` (whose value is ``(number, name)``) or a number, as a number."""
    value = getattr(code, "value", code)
    return value[0] if isinstance(value, tuple) else int(value)


class Context:
    """What a method reads and asks of its call: the parts of grpcio's ``ServicerContext`` the service uses."""

    __slots__ = ("_metadata", "_peer", "_deadline", "_callbacks", "code", "details", "trailing")

    def __init__(self, metadata: tuple, peer: str, timeout: float | None):
        self._metadata = metadata
        self._peer = peer
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._callbacks: list[Callable[[Context], None]] | None = []
        #: the status and trailing metadata a method set (grpcio's ``set_code``, ``set_details``, ...)
        self.code: int | None = None
        self.details = ""
        self.trailing: tuple = ()

    def invocation_metadata(self) -> tuple:
        return self._metadata

    def peer(self) -> str:
        """The client's address in grpcio's form (``ipv4:10.0.0.1:5000``): a PROXY header's when one came."""
        return self._peer

    def time_remaining(self) -> float | None:
        return None if self._deadline is None else max(0.0, self._deadline - time.monotonic())

    def add_done_callback(self, callback: Callable[[Context], None]) -> None:
        """``callback(context)`` once the call is over, however it ends (at once if it is)."""
        if self._callbacks is None:
            callback(self)
        else:
            self._callbacks.append(callback)

    async def abort(self, code: Any, details: str = "") -> None:
        raise Aborted(Status(_code(code), details))

    def set_code(self, code: Any) -> None:
        self.code = _code(code)

    def set_details(self, details: str) -> None:
        self.details = details

    def set_trailing_metadata(self, metadata: tuple) -> None:
        self.trailing = tuple(metadata)

    def _done(self) -> None:
        callbacks, self._callbacks = self._callbacks, None
        for callback in callbacks or ():
            try:
                callback(self)
            except Exception:  # noqa: BLE001 - one callback's failure leaves the others to run
                log.exception("a gRPC call's done callback failed")


class _Table:
    """Stands in for grpcio's server to ``add_MessagingServiceServicer_to_server``: keeps its handlers."""

    def __init__(self) -> None:
        self.generic: list[Any] = []

    def add_generic_rpc_handlers(self, handlers: Any) -> None:
        self.generic.extend(handlers)

    def add_registered_method_handlers(self, _service: str, _handlers: Any) -> None:
        pass  # the same handlers as the generic ones: looked up there


class _Details:
    __slots__ = ("method", "invocation_metadata")

    def __init__(self, method: str):
        self.method = method
        self.invocation_metadata = ()


class Dispatcher:
    """The methods of ``servicer`` by path; ``access``: the checks run before each request is served (its
    ``control`` None: none yet), or None for none."""

    def __init__(self, servicer: Any, access: Any = None):
        table = _Table()
        service_grpc.add_MessagingServiceServicer_to_server(servicer, table)
        self._generic = table.generic
        self._handlers: dict[str, Any] = {}
        self.access = access

    def handler(self, path: str) -> Any:
        """The grpcio method handler of ``path``; None for a method the service does not have."""
        try:
            return self._handlers[path]
        except KeyError:
            pass
        details = _Details(path)
        found = next((h for h in (g.service(details) for g in self._generic) if h is not None), None)
        if len(self._handlers) < 1000:  # paths named by clients: only so many are remembered
            self._handlers[path] = found
        return found


class Call:
    """One call on a connection: its requests come in through :meth:`message` and :meth:`requests_ended`,
    its method runs once it has what it needs (the request of a unary-request method, at once for a
    streaming one), and it ends answered, cancelled (:meth:`ended`) or out of time."""

    __slots__ = ("host", "stream_id", "handler", "context", "method", "access", "request", "requests", "task",
                 "_timer")

    def __init__(self, host: Host, stream_id: int, handler: Any, context: Context, method: str, access: Any,
                 timeout: float | None):
        self.host = host
        self.stream_id = stream_id
        self.handler = handler
        self.context = context
        self.method = method
        self.access = access if access is not None and access.control is not None else None
        self.request: Any = None
        self.requests: asyncio.Queue | None = None
        self.task: asyncio.Task | None = None
        self._timer = None if timeout is None else host.loop.call_later(timeout, self._expire)
        if handler.request_streaming:
            self.requests = asyncio.Queue()
            self._start(self._stream_stream())

    def message(self, data: bytes) -> None:
        try:
            request = self.handler.request_deserializer(data)
        except Exception:  # noqa: BLE001 - any parser failure is the client's bad message
            self._end(Status(framing.INTERNAL, "Exception deserializing request!"))
            return
        if self.requests is not None:
            self.requests.put_nowait(request)
        elif self.request is None and self.task is None:
            self.request = request
        else:
            self._end(Status(framing.UNIMPLEMENTED, "Too many requests for a unary-request method"))

    def requests_ended(self) -> None:
        if self.requests is not None:
            self.requests.put_nowait(_END)
        elif self.task is None:
            if self.request is None:
                self._end(Status(framing.INTERNAL, "Missing request message for a unary-request method"))
            else:
                request, self.request = self.request, None
                self._start(self._unary_stream(request) if self.handler.response_streaming
                            else self._unary_unary(request))

    def ended(self) -> None:
        """The call is over without an answer (the client reset it, the connection ended)."""
        self._stop()
        self.context._done()

    # ------------------------------------------------------------------ running the method

    def _start(self, coroutine: Any) -> None:
        self.task = self.host.loop.create_task(coroutine)

    def _refusal(self, request: Any) -> Any:
        """The answer refusing ``request`` when the access checks refuse it, else None."""
        reason = self.access.check(_text_metadata(self.context), request, peer_ip(self.context.peer()))
        return None if reason is None else self.access.refusal(self.method, reason)

    async def _unary_unary(self, request: Any) -> None:
        try:
            response = self._refusal(request) if self.access is not None else None
            if response is None:
                response = self.handler.unary_unary(request, self.context)
                if inspect.isawaitable(response):
                    response = await response
            self.host.send_message(self.stream_id, self.handler.response_serializer(response))
            self._end(OK)
        except BaseException as exc:  # noqa: BLE001 - every end of the method ends the call
            self._failed(exc)

    async def _unary_stream(self, request: Any) -> None:
        try:
            refusal = self._refusal(request) if self.access is not None else None
            if refusal is not None:
                self.host.send_message(self.stream_id, self.handler.response_serializer(refusal))
            else:
                await self._answer(self.handler.unary_stream(request, self.context))
            self._end(OK)
        except BaseException as exc:  # noqa: BLE001 - every end of the method ends the call
            self._failed(exc)

    async def _stream_stream(self) -> None:
        refused: list[Any] = []
        try:
            await self._answer(self.handler.stream_stream(self._read(refused), self.context))
            if refused:
                self.host.send_message(self.stream_id, self.handler.response_serializer(refused[0]))
            self._end(OK)
        except BaseException as exc:  # noqa: BLE001 - every end of the method ends the call
            self._failed(exc)

    async def _read(self, refused: list[Any]) -> AsyncIterator[Any]:
        """The call's requests as they come, each checked (a refused one ends them, its refusal kept)."""
        requests = self.requests
        while (request := await requests.get()) is not _END:
            if self.access is not None:
                refusal = self._refusal(request)
                if refusal is not None:
                    refused.append(refusal)
                    return
            yield request

    async def _answer(self, responses: Any) -> None:
        if inspect.isawaitable(responses):  # a method that is not a generator (the servicer's defaults)
            responses = await responses
        serialize = self.handler.response_serializer
        async for response in responses:
            self.host.send_message(self.stream_id, serialize(response))

    def _failed(self, exc: BaseException) -> None:
        if isinstance(exc, asyncio.CancelledError):
            self._end(CANCELLED)
            raise exc
        if isinstance(exc, Aborted):
            self._end(exc.status)
        elif self.context.code is not None:  # the servicer's defaults: UNIMPLEMENTED, set before they raise
            self._end(Status(self.context.code, self.context.details))
        elif isinstance(exc, Exception):
            log.exception("gRPC %s failed", self.method)
            self._end(Status(framing.UNKNOWN, f"Unexpected {type(exc)}: {exc}"))
        else:
            self._end(Status(framing.UNKNOWN, repr(exc)))
            raise exc

    # ------------------------------------------------------------------ ending

    def _expire(self) -> None:
        self._timer = None
        self._end(DEADLINE_EXCEEDED)

    def _end(self, status: Status) -> None:
        """Answer ``status`` and end the call (once: a later end finds it gone)."""
        if self.context._callbacks is None:
            return
        self.host.finish(self.stream_id, status, self.context.trailing)
        self._stop()
        self.context._done()

    def _stop(self) -> None:
        self.host.call_done(self.stream_id)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        task = self.task
        if task is not None and not task.done() and task is not asyncio.current_task(self.host.loop):
            task.cancel()


def _text_metadata(context: Context) -> dict[str, str]:
    return {key: value for key, value in context.invocation_metadata() if isinstance(value, str)}


