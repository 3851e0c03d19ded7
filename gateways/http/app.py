"""The HTTP routes: each reads and checks its request against :mod:`.schema`, calls the
:class:`~.gateway.Gateway`, and answers JSON or a problem (:mod:`.problems`)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import parse_qsl

import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Mount, Route
from twisted.python.threadable import isInIOThread

from ferrymq.sdk.producer import select_by_hash
from ferrymq.wire.topics import validate_topic

from ..access import CREATE, GET, LIST, PUB, SUB
from ..access import group as group_key
from ..access import topic as topic_key
from . import auth, groups, messages, metrics, schema, sse
from .gateway import Gateway
from .problems import Problem, from_client_error
from .transactions import State

log = logging.getLogger("ferrymq.gateway.http")

_publish_query = schema.query_checker(schema.PUBLISH_QUERY)
_consume_query = schema.query_checker(schema.CONSUME_QUERY)
_stream_query = schema.query_checker(schema.STREAM_QUERY)
_no_query = schema.query_checker([])
_check_envelope = schema.body_checker("Envelope")
_check_batch = schema.body_checker("Batch")
_check_receipts = schema.body_checker("Receipts")
_check_new_topic = schema.body_checker("NewTopic")
_check_new_transaction = schema.body_checker("NewTransaction")
_check_transaction_action = schema.body_checker("TransactionAction")

_GROUP_NAME = re.compile(schema.GROUP_PATH["schema"]["pattern"])
_OPENAPI = orjson.dumps(schema.DOCUMENT)


def _json(value: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(value), status_code=status, media_type="application/json")


def _query(check: Callable, request: Request) -> dict[str, Any]:
    return _checked_query(check, request.query_params)


def _checked_query(check: Callable, params: Mapping[str, str]) -> dict[str, Any]:
    try:
        return check(params)
    except schema.Invalid as exc:
        raise Problem(400, str(exc), exc.field) from None


def _topic(request: Request) -> str:
    return _checked_topic(request.path_params["topic"])


def _checked_topic(topic: str) -> str:
    problem = validate_topic(topic)
    if problem:
        raise Problem(400, problem, "path.topic")
    return topic


def _transaction_id(request: Request) -> str:
    tx_id = request.path_params["id"]
    if not schema.TRANSACTION_ID.fullmatch(tx_id):
        raise Problem(400, f"{tx_id!r} is not a transaction id (the msgId of its half message: hex digits)",
                      "path.id")
    return tx_id


async def _read_body(request: Request, limit: int) -> bytes:
    return await _receive_body(request.receive, request.headers.get("content-length"), limit)


async def _receive_body(receive: Callable, declared: str | None, limit: int) -> bytes:
    """The request body (``declared``: its Content-Length), refused with 413 as soon as it is known to
    be over ``limit`` bytes; a body that came in one message (the usual case) is taken with no copy."""
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise Problem(413, f"the body is {declared} bytes, over the limit of {limit} (maxMessageSize)", "/")
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise Problem(413, f"the body is over the limit of {limit} bytes (maxMessageSize)", "/")
        if not message.get("more_body", False):
            if not chunks:
                return chunk
            chunks.append(chunk)
            return b"".join(chunks)
        chunks.append(chunk)


async def _json_body(request: Request, check: Callable, limit: int = 1 << 20) -> Any:
    media = request.headers.get("content-type", "").split(";")[0].strip()
    if media != "application/json":
        raise Problem(415, f"send this request's body as application/json, not {media or 'no media type'}")
    return _parse(await _read_body(request, limit), check)


def _parse(raw: bytes, check: Callable) -> Any:
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise Problem(400, f"the body is not JSON: {exc}", "/") from None
    try:
        return check(value)
    except schema.Invalid as exc:
        raise Problem(400, str(exc), exc.field) from None


async def _unless_disconnected(request: Request, work: Awaitable[list]) -> list:
    """``work``'s result, or nothing when the client went away while it waited (a long poll given up):
    messages are not handed to a connection that is gone."""
    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    task = asyncio.ensure_future(work)
    watch = asyncio.ensure_future(disconnected())
    try:
        await asyncio.wait({task, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if not task.done():
        task.cancel()
        return []
    return task.result()


class Routes:
    def __init__(self, gateway: Gateway):
        self.gateway = gateway

    async def openapi(self, request: Request) -> Response:
        return Response(_OPENAPI, media_type="application/json")

    async def publish(self, topic: str, query_string: bytes, content_type: str | None,
                      read_body: Callable[[int], Awaitable[bytes]]) -> bytes:
        """``POST /v1/topics/{topic}/messages`` from the parts of the request it reads (:class:`_PublishFirst`
        takes them from the ASGI scope; ``read_body(limit)`` reads the body); the JSON answer."""
        _checked_topic(topic)
        query = _checked_query(_publish_query, dict(parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))
                               if query_string else {})
        body = await read_body(self.gateway.max_message_size)
        producer = self.gateway.producer
        if (content_type or "").split(";")[0].strip() == schema.ENVELOPE_TYPE:
            if query:
                raise Problem(400, "an envelope carries its message's tag, keys and delay itself; leave the "
                                   "query string empty", f"query.{next(iter(query))}")
            value = _parse(body, lambda v: _check_batch(v) if isinstance(v, dict) and "messages" in v
                           else _check_envelope(v))
            if "messages" in value:
                return orjson.dumps(await self._publish_batch(topic, value["messages"]))
            msg, sharding_key = messages.from_envelope(topic, value)
        else:
            msg, sharding_key = messages.from_raw(topic, body, content_type, query)
        try:
            if sharding_key is not None:
                result = await producer.send_orderly(msg, select_by_hash, sharding_key)
            else:
                result = await producer.send(msg)
        except Exception as exc:  # noqa: BLE001 - the SDK's failures become problems
            raise from_client_error(exc, "/") from None
        return orjson.dumps(messages.send_result(result))

    async def _publish_batch(self, topic: str, envelopes: list[dict]) -> dict[str, Any]:
        msgs = []
        for i, env in enumerate(envelopes):
            where = f"/messages/{i}"
            for member in ("delayLevel", "deliverAt", "shardingKey"):
                if member in env:
                    raise Problem(400, f"a batch is stored in one queue at once: {member} is not allowed in "
                                       f"it (publish such messages one by one)", f"{where}/{member}")
            msgs.append(messages.from_envelope(topic, env, where)[0])
        try:
            result = await self.gateway.producer.send_batch(msgs)
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc, "/messages") from None
        return {"results": messages.batch_results(result)}

    async def consume(self, request: Request) -> Response:
        topic = _topic(request)
        query = _query(_consume_query, request)
        group = self.gateway.consumer(query["group"], query["maxReconsumeTimes"], query["model"], query.get("client"))
        try:
            if not group.consumes(topic):  # a topic nobody can publish to is refused, not waited on
                await self.gateway.admin.fetch_route(topic)
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc, "path.topic") from None
        try:
            await group.subscribe(topic, query["expression"], query["type"])
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc, "query.expression") from None
        taken = await _unless_disconnected(request, group.take(topic, query["max"], query["wait"], query["invisible"]))
        return _json({"messages": [messages.to_json(p.msg, p.handle, p.broker_name, p.invisible_until)
                                   for p in taken]})

    async def stream(self, request: Request) -> Response:
        topic = _topic(request)
        query = _query(_stream_query, request)
        group = self.gateway.consumer(query["group"], query["maxReconsumeTimes"], query["model"], query.get("client"))
        try:
            await group.subscribe(topic, query["expression"], query["type"])
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc, "query.expression") from None
        body = sse.events(group, topic, inflight=query["inflight"], heartbeat=query["heartbeat"],
                          invisible=query["invisible"],
                          render=lambda p: messages.to_json(p.msg, p.handle, p.broker_name, p.invisible_until))
        return StreamingResponse(body, media_type="text/event-stream", headers=sse.HEADERS)

    async def ack(self, request: Request) -> Response:
        return await self._settle(request, consumed=True)

    async def nack(self, request: Request) -> Response:
        return await self._settle(request, consumed=False)

    async def _settle(self, request: Request, consumed: bool) -> Response:
        _topic(request)
        _query(_no_query, request)
        body = await _json_body(request, _check_receipts)
        if consumed and "delayLevel" in body:
            raise Problem(400, "delayLevel is for nack only", "/delayLevel")
        settled = self.gateway.settle(body["group"], body["receiptHandles"], consumed, body.get("delayLevel", 0))
        return _json({"settled": settled})

    async def list_topics(self, request: Request) -> Response:
        _query(_no_query, request)
        try:
            topics = await self.gateway.admin.list_topics()
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc) from None
        return _json({"topics": topics})

    async def create_topic(self, request: Request) -> Response:
        _query(_no_query, request)
        body = await _json_body(request, _check_new_topic)
        problem = validate_topic(body["topic"])
        if problem:
            raise Problem(400, problem, "/topic")
        access = self.gateway.access
        if access is not None:
            auth.authorize(access, request.state.user, CREATE, topic_key(body["topic"]), _client_ip(request), "/topic")
        try:
            await self.gateway.admin.create_topic(body["topic"], body["queueNums"], perm=body["perm"],
                                                  order=body["order"])
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc) from None
        return _json({"topic": body["topic"]}, 201)

    # ------------------------------------------------------------------ transactions

    async def publish_transaction(self, request: Request) -> Response:
        topic = _topic(request)
        _query(_no_query, request)
        body = await _json_body(request, _check_new_transaction, self.gateway.max_message_size)
        for member in ("delayLevel", "deliverAt", "shardingKey"):
            if member in body["message"]:
                raise Problem(400, f"a half message is delivered when it is committed: {member} is not allowed "
                                   f"in it", f"/message/{member}")
        msg, _ = messages.from_envelope(topic, body["message"], "/message")
        try:
            tx = await self.gateway.publish_half(body["producerGroup"], body["checkBackUrl"], msg)
        except Exception as exc:  # noqa: BLE001 - Problems pass through unchanged
            raise from_client_error(exc, "/message") from None
        response = _json(tx.to_json(), 201)
        response.headers["Location"] = f"/v1/transactions/{tx.id}"
        return response

    async def get_transaction(self, request: Request) -> Response:
        _query(_no_query, request)
        return _json(self.gateway.transaction(_transaction_id(request)).to_json())

    async def end_transaction(self, request: Request) -> Response:
        _query(_no_query, request)
        _transaction_id(request)
        body = await _json_body(request, _check_transaction_action)
        state = State.COMMIT if body["action"] == "commit" else State.ROLLBACK
        try:
            tx = await self.gateway.end_transaction(request.path_params["id"], state)
        except Exception as exc:  # noqa: BLE001 - Problems pass through unchanged
            raise from_client_error(exc) from None
        return _json(tx.to_json())

    async def list_groups(self, request: Request) -> Response:
        _query(_no_query, request)
        admin = self.gateway.admin
        try:
            names = await admin.subscription_groups()
            stats = await asyncio.gather(*(groups.progress(admin, name) for name in names))
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc) from None
        return _json({"groups": [groups.summary(name, s) for name, s in zip(names, stats)]})

    async def group_progress(self, request: Request) -> Response:
        _query(_no_query, request)
        name = request.path_params["group"]
        if not _GROUP_NAME.fullmatch(name) or len(name) > schema.GROUP_PATH["schema"]["maxLength"]:
            raise Problem(400, f"{name!r} is not a group name (letters, digits, %|_- up to "
                               f"{schema.GROUP_PATH['schema']['maxLength']} characters)", "path.group")
        admin = self.gateway.admin
        try:
            if name not in await admin.subscription_groups():
                raise Problem(404, f"no broker knows the subscription group {name}", "path.group")
            stats = await groups.progress(admin, name)
        except Exception as exc:  # noqa: BLE001
            raise from_client_error(exc) from None
        return _json(groups.detail(name, stats))


def _client_ip(request: Request) -> str:
    return request.client.host if request.client else ""


def _path_topic(request: Request) -> str | None:
    name = request.path_params.get("topic")
    return None if name is None else topic_key(name)


def _guarded(handler: Callable[[Request], Awaitable[Response]], action: str | None = None,
             resource: Callable[[Request], str | None] = _path_topic,
             field: str | None = "path.topic") -> Callable[[Request], Awaitable[Response]]:
    """Problems become problem+json answers; anything else is logged and answered 500, never a hang.
    When the gateway checks users, the request's credentials are checked first (the user they prove is
    ``request.state.user``), and ``action`` on the ``resource`` the request names (by default the topic of
    the path)."""

    async def run(request: Request) -> Response:
        try:
            if handler.__name__ != "openapi":
                gateway = handler.__self__.gateway
                gateway.require_started()
                if gateway.access is not None:
                    request.state.user = auth.check(gateway.access, request.headers.get("authorization"), action,
                                                    resource(request), _client_ip(request), field)
            return await handler(request)
        except Problem as problem:
            return problem.response(request.url.path)
        except Exception:
            log.exception("HTTP %s %s failed", request.method, request.url.path)
            return Problem(500, "the gateway failed on this request; its log has the details").response(
                request.url.path)

    return run


def _logged_in(gateway: Gateway, app: Callable) -> Callable:
    """``app`` (the web console) for the broker's users when the gateway checks them: a request without
    valid credentials is answered 401, with the Basic challenge a browser asks for credentials on. The user
    they prove is the request's ``state.user``, whose reads the console's pages authorize each."""

    async def guarded(scope: dict, receive: Callable, send: Callable) -> None:
        access = gateway.access
        if access is not None and scope["type"] == "http":
            authorization = next((value.decode("latin-1") for name, value in scope["headers"]
                                  if name == b"authorization"), None)
            client = scope.get("client")
            try:
                user = auth.check(access, authorization, None, None, client[0] if client else "")
            except Problem as problem:
                await problem.response(scope["path"])(scope, receive, send)
                return
            scope.setdefault("state", {})["user"] = user
        await app(scope, receive, send)

    return guarded


class _PublishFirst:
    """The application: ``POST /v1/topics/{topic}/messages``, the one route taken at message rates, is
    answered on the bare ASGI interface, its parts read straight from the scope; every other request goes
    through Starlette's middleware and router, whose request and response objects cost a publish about
    as much as the route itself. Its problems and failures are answered as :func:`_guarded` answers them."""

    _PATH = re.compile(r"/v1/topics/([^/]+)/messages")
    _ANSWER_HEADERS = ((b"content-type", b"application/json"),)

    def __init__(self, app: Starlette, routes: Routes):
        self.app = app
        self.routes = routes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            match = self._PATH.fullmatch(scope["path"])
            if match is not None:
                await self._publish(match.group(1), scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def _publish(self, topic: str, scope: dict, receive: Callable, send: Callable) -> None:
        content_type = declared = None
        for name, value in scope["headers"]:
            if name == b"content-type":
                content_type = value.decode("latin-1")
            elif name == b"content-length":
                declared = value.decode("latin-1")
        try:
            gateway = self.routes.gateway
            gateway.require_started()
            if gateway.access is not None:
                authorization = next((value.decode("latin-1") for name, value in scope["headers"]
                                      if name == b"authorization"), None)
                client = scope.get("client")
                auth.check(gateway.access, authorization, PUB, topic_key(topic), client[0] if client else "")
            answer = await self.routes.publish(topic, scope["query_string"], content_type,
                                               lambda limit: _receive_body(receive, declared, limit))
        except ClientDisconnect:
            return
        except Problem as problem:
            await problem.response(scope["path"])(scope, receive, send)
            return
        except Exception:
            log.exception("HTTP POST %s failed", scope["path"])
            await Problem(500, "the gateway failed on this request; its log has the details").response(
                scope["path"])(scope, receive, send)
            return
        if isInIOThread():
            # served on the broker's loop, the send was answered within this task's step: yield once, so
            # that the answers of every request read in this turn are written one after the other. Each
            # write wakes the client's side; written apart, each wakes it again, and on loopback that
            # wake-up is paid in the write (a third of the process's CPU under 64 connections).
            await asyncio.sleep(0)
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*self._ANSWER_HEADERS, (b"content-length", b"%d" % len(answer))]})
        await send({"type": "http.response.body", "body": answer})


def create_app(gateway: Gateway, *, manage_gateway: bool = True) -> _PublishFirst:
    """The ASGI application; with ``manage_gateway`` its lifespan starts and stops ``gateway``."""
    r = Routes(gateway)
    routes = [
        Route("/openapi.json", _guarded(r.openapi), methods=["GET"]),
        Route("/metrics", metrics.endpoint(gateway), methods=["GET"]),
        Route("/v1/topics", _guarded(r.list_topics, LIST, lambda _: topic_key("*"), None), methods=["GET"]),
        Route("/v1/topics", _guarded(r.create_topic), methods=["POST"]),
        Route("/v1/topics/{topic}/messages", _guarded(r.consume, SUB), methods=["GET"]),
        Route("/v1/topics/{topic}/stream", _guarded(r.stream, SUB), methods=["GET"]),
        Route("/v1/groups", _guarded(r.list_groups, LIST, lambda _: group_key("*"), None), methods=["GET"]),
        Route("/v1/groups/{group}", _guarded(r.group_progress, GET, lambda request: group_key(
            request.path_params["group"]), "path.group"), methods=["GET"]),
        Route("/v1/topics/{topic}/ack", _guarded(r.ack, SUB), methods=["POST"]),
        Route("/v1/topics/{topic}/nack", _guarded(r.nack, SUB), methods=["POST"]),
        Route("/v1/topics/{topic}/transactions", _guarded(r.publish_transaction, PUB), methods=["POST"]),
        Route("/v1/transactions/{id}", _guarded(r.get_transaction), methods=["GET"]),
        Route("/v1/transactions/{id}", _guarded(r.end_transaction), methods=["POST"]),
    ]

    sampler = None
    if gateway.console_sample_interval is not None:
        from ferrymq.gateways.console.app import mount

        console, sampler = mount(gateway, gateway.console_sample_interval)
        routes.append(Mount(console.path, app=_logged_in(gateway, console.app)))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette):
        if manage_gateway:
            await gateway.start()
        sampling = asyncio.get_running_loop().create_task(sampler.run()) if sampler is not None else None
        try:
            yield
        finally:
            if sampling is not None:
                sampling.cancel()
            if manage_gateway:
                await gateway.stop()

    async def no_route(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 404)
        detail = (f"{request.method} is not served at {request.url.path}" if status == 405
                  else f"nothing is served at {request.url.path}; /openapi.json lists what is")
        return Problem(status, detail).response(request.url.path)

    return _PublishFirst(Starlette(routes=routes, lifespan=lifespan,
                                   exception_handlers={404: no_route, 405: no_route}), r)
