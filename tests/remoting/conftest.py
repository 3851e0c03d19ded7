"""Transport tests run the real reactor in a background thread and talk to it over loopback."""

from __future__ import annotations

import pytest

from ferrymq.sdk import reactor_thread

from .helpers import RawClient


@pytest.fixture(scope="session")
def rt():
    reactor_thread.ensure_running()
    return reactor_thread


@pytest.fixture
def raw_client():
    made: list[RawClient] = []

    def connect(addr: tuple[str, int], **kw) -> RawClient:
        client = RawClient(addr, **kw)
        made.append(client)
        return client

    yield connect
    for client in made:
        client.close()
