"""schemathesis against /openapi.json of a running server with the gateway: whatever requests the
document allows or nearly allows, the gateway answers without a 5xx, with a status, media type and body
the document lists for the operation.

The stream (GET .../stream) never ends, so it is left out here (tests/gateways/test_http_stream.py
covers it); the long poll's wait is capped at a fraction of a second when generated larger, so a run
stays well under a minute (the document's bounds are what they are for users). Each operation's cases
come from its schemathesis strategy under hypothesis directly: schemathesis's lazy pytest loader
(``schemathesis.pytest.from_fixture``) reads a pytest-internal attribute pytest 9 no longer has."""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation.modes import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from ferrymq.gateways.http.schema import DOCUMENT

pytestmark = pytest.mark.timeout(300)

CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]
#: requests generated per operation and mode (all of them take under a minute)
EXAMPLES = 80
#: the longest long poll a generated request may ask for
MAX_WAIT = 0.2


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path_factory.mktemp("schemathesis"), {"enablePropertyFilter": True}, http=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def api(server):
    return schemathesis.openapi.from_url(f"{server.http_url}/openapi.json")


def _short_wait(case) -> None:
    if case.operation.method.upper() != "GET" or case.operation.path != "/v1/topics/{topic}/messages":
        return
    query = dict(case.query or {})
    wait = query.get("wait")
    if wait is None or (isinstance(wait, (int, float)) and not isinstance(wait, bool) and wait > MAX_WAIT):
        query["wait"] = MAX_WAIT
    case.query = query


def _cases():
    """(method, path, mode) of every operation but the stream; NEGATIVE only where there is a parameter
    or a body to break."""
    for path, item in DOCUMENT["paths"].items():
        for method, operation in item.items():
            if method == "parameters" or path == "/v1/topics/{topic}/stream":
                continue
            breakable = item.get("parameters") or operation.get("parameters") or operation.get("requestBody")
            for mode in GenerationMode:
                if breakable or mode == GenerationMode.POSITIVE:
                    yield pytest.param(method, path, mode, id=f"{method.upper()} {path} {mode.value}")


@pytest.mark.parametrize(("method", "path", "mode"), list(_cases()))
def test_every_answer_is_in_the_document(api, method, path, mode):
    """POSITIVE requests fit the document, NEGATIVE ones break it somewhere (and must be refused, not
    failed on)."""

    @given(case=api[path][method].as_strategy(mode))
    @settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    def run(case):
        _short_wait(case)
        case.call_and_validate(checks=CHECKS)

    run()
