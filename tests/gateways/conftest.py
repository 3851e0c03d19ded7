"""What the HTTP gateway's test modules share: ``gw``, a checked client of the module's ``server``."""

from __future__ import annotations

import pytest

from .http_client import Gateway


@pytest.fixture
def gw(server):
    """A client of the gateway of the module's ``server`` fixture; every answer is checked against the document."""
    client = Gateway(server.http_url)
    yield client
    client.close()
