"""The HTTP gateway served on the broker's own event loop (``httpEventLoop=BROKER``: Twisted's asyncio
reactor on uvloop): the endpoint and transaction suites again, against a server serving it that way."""

from __future__ import annotations

import pytest
from ferrymq.testing.server import FerryMQServer

from . import test_http_gateway, test_http_transactions

# the same tests, against this module's server
from .test_http_gateway import *
from .test_http_transactions import *

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def ferrymq_factory_module(tmp_path_factory):
    conf = {"enablePropertyFilter": True, "messageDelayLevel": test_http_gateway.LEVELS, "maxMessageSize": 65536,
            **test_http_transactions.BROKER_KEYS, "httpEventLoop": "BROKER"}
    with FerryMQServer(tmp_path_factory.mktemp("http-loop"), conf, http=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def server(ferrymq_factory_module):
    return ferrymq_factory_module


def test_the_gateway_is_served_on_the_brokers_loop(server):
    assert "on the broker's event loop" in server.log
    assert "cannot be installed" not in server.log
