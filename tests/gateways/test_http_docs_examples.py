"""docs/http.md's curl examples, run as written against a FerryMQ server (its address put for the docs'
``127.0.0.1:8080``/``localhost:8080``): publish raw and as an envelope, consume with a tag expression,
ack with the handle the consume gave, list and create topics, read the groups. The examples that need
more than a server (a stream left open, a check-back receiver, ACL users over HTTPS) are run by the
gateway's own tests in other forms."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "http.md"

pytestmark = [pytest.mark.timeout(120),
              pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed (apt-get install curl)")]


def _examples() -> list[str]:
    """Each curl command of the doc's ``sh`` blocks, continuation lines joined."""
    commands = []
    for block in re.findall(r"^```sh\n(.*?)^```$", DOC.read_text(), re.MULTILINE | re.DOTALL):
        for command in block.replace("\\\n", " ").splitlines():
            if command.strip().startswith("curl "):
                commands.append(command.strip())
    return commands


def _example(*needles: str, exact: str | None = None) -> str:
    """The one example holding every needle (or written exactly as ``exact``)."""
    found = [c for c in _examples() if c == exact] if exact else [c for c in _examples() if all(n in c for n in needles)]
    assert len(found) == 1, f"docs/http.md: {len(found)} curl examples with {needles}: {found}"
    return found[0]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from ferrymq.testing.server import FerryMQServer

    with FerryMQServer(tmp_path_factory.mktemp("http-docs"), {}, http=True) as srv:
        yield srv


def _run(server, command: str) -> str:
    here = server.http_url.removeprefix("http://")
    command = command.replace("127.0.0.1:8080", here).replace("localhost:8080", here)
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"{command}\n{done.stderr}"
    return done.stdout


def test_the_documented_examples_publish_consume_ack_and_list(server):
    created = json.loads(_run(server, _example("-X POST", "/v1/topics ", "queueNums")))
    assert created["topic"] == "DemoTopic", created
    assert "DemoTopic" in json.loads(_run(server, _example(exact="curl -s http://127.0.0.1:8080/v1/topics")))["topics"]
    raw = json.loads(_run(server, _example("tag=TagA&keys=order-1")))
    envelope = json.loads(_run(server, _example("application/vnd.ferrymq.message+json", '"tag": "TagB"')))
    assert raw["status"] == envelope["status"] == "SEND_OK", (raw, envelope)

    consume = _example("group=demo_http", "expression=TagA||TagB")
    got: dict[str, dict] = {}
    for _ in range(5):  # a new group starts its consumer with the first request; the messages follow
        for m in json.loads(_run(server, consume))["messages"]:
            got[m["msgId"]] = m
        if len(got) == 2:
            break
    assert set(got) == {raw["msgId"], envelope["msgId"]}, got
    assert got[raw["msgId"]]["body"] == '{"order": 1, "total": 12.5}'
    assert got[envelope["msgId"]]["properties"]["region"] == "eu"

    ack = _example("/v1/topics/DemoTopic/ack")
    handles = json.dumps([m["receiptHandle"] for m in got.values()])
    acked = json.loads(_run(server, re.sub(r'"receiptHandles": \[[^\]]*\]', f'"receiptHandles": {handles}', ack)))
    assert acked == {"settled": len(got)}, acked

    groups = json.loads(_run(server, _example(exact="curl http://localhost:8080/v1/groups")))
    assert any(g.get("group") == "demo_http" for g in groups["groups"]), groups
