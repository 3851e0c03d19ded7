"""The HTTP gateway served on a loop of its own in a thread (``httpEventLoop=OWN_THREAD``; the default
serves it on the broker's loop): the endpoint and transaction suites again, against a server serving it
that way."""

from __future__ import annotations

import re

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
            **test_http_transactions.BROKER_KEYS, "httpEventLoop": "OWN_THREAD"}
    with FerryMQServer(tmp_path_factory.mktemp("http-thread"), conf, http=True) as srv:
        yield srv


@pytest.fixture(scope="module")
def server(ferrymq_factory_module):
    return ferrymq_factory_module


def test_the_gateway_is_served_on_a_loop_of_its_own(server):
    assert re.search(r"HTTP gateway listening on \S+, on a loop of its own", server.log)
    assert not re.search(r"HTTP gateway listening on \S+, on the broker's event loop", server.log)
