"""Errors as RFC 9457 problem details (``application/problem+json``).

Every refusal names what was wrong: ``field`` points at the offending part of the request (a JSON
pointer into the body, ``query.<name>`` or ``path.<name>``), and an answer relayed from a broker keeps
its RocketMQ response ``code`` and remark, as the remoting clients would see them.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson
from starlette.responses import Response

from ferrymq.remoting.errors import RemotingConnectError, RemotingError, RemotingTimeoutError, ResponseCodeError
from ferrymq.sdk.client_instance import MQClientError
from ferrymq.wire.codes import ResponseCode

MEDIA_TYPE = "application/problem+json"

#: the relative URI each problem type is documented under in docs/http.md
_TYPES = {
    400: "invalid-request",
    401: "unauthenticated",
    403: "no-permission",
    404: "not-found",
    405: "method-not-allowed",
    409: "conflict",
    413: "too-large",
    415: "unsupported-media-type",
    500: "gateway-error",
    502: "broker-error",
    503: "busy",
    504: "timeout",
}

#: broker answers and the HTTP status they become
_BY_CODE = {
    ResponseCode.TOPIC_NOT_EXIST: 404,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: 404,
    ResponseCode.MESSAGE_ILLEGAL: 400,
    ResponseCode.SUBSCRIPTION_PARSE_FAILED: 400,
    ResponseCode.NO_PERMISSION: 403,
    ResponseCode.SYSTEM_BUSY: 503,
    ResponseCode.SERVICE_NOT_AVAILABLE: 503,
}


@dataclass
class Problem(Exception):
    """A refusal; raised anywhere in a request's handling and answered by the app."""

    status: int
    detail: str
    field: str | None = None
    code: int | None = None  #: the broker's RocketMQ response code, when it answered
    headers: dict[str, str] | None = None  #: headers of the answer (a 401's WWW-Authenticate)

    def __str__(self) -> str:
        return self.detail

    def response(self, instance: str | None = None) -> Response:
        body: dict = {"type": f"/problems/{_TYPES.get(self.status, 'error')}", "title": _title(self.status),
                      "status": self.status, "detail": self.detail}
        if self.field is not None:
            body["field"] = self.field
        if self.code is not None:
            body["code"] = self.code
        if instance is not None:
            body["instance"] = instance
        return Response(orjson.dumps(body), status_code=self.status, media_type=MEDIA_TYPE, headers=self.headers)


def _title(status: int) -> str:
    from http import HTTPStatus

    return HTTPStatus(status).phrase


def from_client_error(exc: BaseException, field: str | None = None) -> Problem:
    """What the SDK raised, as the problem the HTTP caller gets."""
    if isinstance(exc, Problem):
        return exc
    if isinstance(exc, ResponseCodeError):
        return Problem(_BY_CODE.get(exc.code, 502), f"{exc.remark or 'refused'} (RocketMQ code {exc.code})",
                       field if exc.code in _BY_CODE else None, exc.code)
    if isinstance(exc, RemotingTimeoutError):
        return Problem(504, f"the broker did not answer in time: {exc}")
    if isinstance(exc, (RemotingConnectError, RemotingError)):
        return Problem(503, f"no broker reachable: {exc}")
    if isinstance(exc, MQClientError) and str(exc).startswith("No route info of this topic"):
        return Problem(404, f"{exc}: create the topic first (POST /v1/topics) or turn on autoCreateTopicEnable",
                       "path.topic")
    if isinstance(exc, MQClientError):
        return Problem(400, str(exc), field)
    raise exc
