"""What the HTTP gateway tests share: a client that holds every answer against /openapi.json."""

from __future__ import annotations

import json
import re
import uuid
import time
from typing import Any

import fastjsonschema
import httpx

from ferrymq.gateways.http.schema import DOCUMENT, ENVELOPE_TYPE

_DRAFT7 = "http://json-schema.org/draft-07/schema#"


def _operation(method: str, path: str) -> dict[str, Any]:
    for template, item in DOCUMENT["paths"].items():
        if re.fullmatch(re.sub(r"\{[^}]+\}", "[^/]+", template), path) and method.lower() in item:
            return item[method.lower()]
    raise AssertionError(f"{method} {path} is not in the OpenAPI document")


def check_answer(response: httpx.Response) -> None:
    """The answer's status is one the document lists for the operation, and its body matches the schema."""
    request = response.request
    operation = _operation(request.method, request.url.path)
    status = str(response.status_code)
    assert status in operation["responses"], f"{request.method} {request.url.path} answered {status}: {response.text}"
    content = operation["responses"][status].get("content")
    if not content:
        return
    media, spec = next(iter(content.items()))
    assert response.headers["content-type"].split(";")[0] == media, response.headers["content-type"]
    if not media.endswith("json"):  # text (/metrics): its format is checked by the tests of the route
        return
    fastjsonschema.validate({"$schema": _DRAFT7, "components": DOCUMENT["components"], **spec["schema"]},
                            response.json())


def _validator(schema: dict[str, Any]):
    return fastjsonschema.compile({"$schema": _DRAFT7, "components": DOCUMENT["components"], **schema})


class EventStream:
    """An open ``text/event-stream`` answer read line by line; each event is held against the document's
    x-itemSchema and its data against the schema that names (the heartbeats keep lines coming, so reading
    with a deadline needs no thread)."""

    def __init__(self, http: httpx.Client, response: httpx.Response):
        self.http = http
        self.response = response
        self.comments = 0
        self.ended = False
        content = _operation("GET", response.request.url.path)["responses"]["200"]["content"]
        self._check_event = _validator(content["text/event-stream"]["x-itemSchema"])
        self._check_data = _validator(content["text/event-stream"]["x-itemSchema"]["properties"]["data"]
                                      ["contentSchema"])
        self._lines = response.iter_lines()

    def next(self, timeout: float) -> dict[str, Any] | None:
        """The next event's message (with the event's ``id`` under ``eventId``), or None when ``timeout``
        seconds pass without one or the stream ends (``ended``)."""
        deadline = time.monotonic() + timeout
        fields: dict[str, str] = {}
        while time.monotonic() < deadline and not self.ended:
            line = next(self._lines, None)
            if line is None:
                self.ended = True
                break
            if line.startswith(":"):
                self.comments += 1
            elif line:
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
            elif fields:
                self._check_event(fields)
                message = json.loads(fields["data"])
                self._check_data(message)
                return {**message, "eventId": fields["id"]}
        return None

    def close(self) -> None:
        self.response.close()
        self.http.close()


class Gateway:
    """httpx against one gateway; every answer is checked against the document."""

    def __init__(self, base_url: str, auth: tuple[str, str] | None = None):
        """``auth``: HTTP Basic credentials sent with every request."""
        self.http = httpx.Client(base_url=base_url, timeout=40, auth=auth)

    def close(self) -> None:
        self.http.close()

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        response = self.http.request(method, path, **kwargs)
        check_answer(response)
        return response

    def publish(self, topic: str, body: bytes | str, **query: Any) -> dict[str, Any]:
        r = self.request("POST", f"/v1/topics/{topic}/messages", content=body, params=query,
                         headers={"Content-Type": "text/plain"})
        assert r.status_code == 200, r.text
        return r.json()

    def publish_envelope(self, topic: str, envelope: dict[str, Any]) -> httpx.Response:
        return self.request("POST", f"/v1/topics/{topic}/messages", json=envelope,
                            headers={"Content-Type": ENVELOPE_TYPE})

    def receive(self, topic: str, group: str, **query: Any) -> list[dict[str, Any]]:
        r = self.request("GET", f"/v1/topics/{topic}/messages", params={"group": group, **query})
        assert r.status_code == 200, r.text
        return r.json()["messages"]

    def receive_all(self, topic: str, group: str, count: int, rounds: int = 20, **query: Any) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        for _ in range(rounds):
            got += self.receive(topic, group, wait=query.pop("wait", 5), **query)
            if len(got) >= count:
                break
        return got

    def stream(self, topic: str, group: str, **query: Any) -> EventStream | httpx.Response:
        """An event stream on a connection of its own (closing it disconnects), or the refusal."""
        http = httpx.Client(base_url=self.http.base_url, timeout=10)
        request = http.build_request("GET", f"/v1/topics/{topic}/stream", params={"group": group, **query})
        response = http.send(request, stream=True)
        if response.status_code != 200:
            response.read()
            http.close()
            check_answer(response)
            return response
        assert response.headers["content-type"].split(";")[0] == "text/event-stream", response.headers
        return EventStream(http, response)

    def settle(self, verb: str, topic: str, group: str, handles: list[str], **extra: Any) -> httpx.Response:
        return self.request("POST", f"/v1/topics/{topic}/{verb}",
                            json={"group": group, "receiptHandles": handles, **extra})

    def ack(self, topic: str, group: str, messages: list[dict[str, Any]]) -> None:
        r = self.settle("ack", topic, group, [m["receiptHandle"] for m in messages])
        assert r.status_code == 200 and r.json() == {"settled": len(messages)}, r.text


def names(*prefixes: str) -> tuple[str, ...]:
    """Fresh names (topic, group...) for one test: ``prefix_<8 hex>`` each, one suffix for all."""
    tag = uuid.uuid4().hex[:8]
    return tuple(f"{prefix}_{tag}" for prefix in prefixes)


def wait_for(what, timeout: float = 20.0):
    """``what()``'s first truthy value, asked every 0.1 s; an AssertionError after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError("not reached in time")
