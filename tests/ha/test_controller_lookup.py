"""fetchControllerAddrByDnsLookup: controllerAddr is one ``name:port`` whose IPv4 addresses are the
controllers, resolved again every two minutes; a name that does not resolve is logged and keeps the
controllers known."""

from __future__ import annotations

import logging

import pytest
from ferrymq.server.config import BrokerConfig, ConfigError
from ferrymq.server.ha.controller.lookup import ControllerLookupError, resolve
from ferrymq.server.ha.controller.replicas import ReplicasManager
from twisted.internet.task import Clock
from twisted.python.failure import Failure

UNRESOLVABLE = "no-such-controller.invalid:9878"


class InlineThreads(Clock):
    """A clock whose thread pool runs each call at once, on the caller's thread: the lookup's own blocking
    call still runs for real."""

    def getThreadPool(self):
        return self

    def callInThreadWithCallback(self, on_result, f, *args, **kwargs):
        try:
            result = f(*args, **kwargs)
        except Exception:  # noqa: BLE001 - handed on as the thread pool does
            on_result(False, Failure())
        else:
            on_result(True, result)

    def callFromThread(self, f, *args, **kwargs):
        f(*args, **kwargs)


def controller_mode(controller_addr: str, **extra: object) -> BrokerConfig:
    return BrokerConfig(enableControllerMode=True, controllerAddr=controller_addr,
                        fetchControllerAddrByDnsLookup=True, **extra)


def test_a_name_resolves_to_its_ipv4_addresses_at_the_port_given():
    found = resolve("localhost:9878")
    assert "127.0.0.1:9878" in found
    assert all(addr.endswith(":9878") and addr.count(":") == 1 for addr in found)


def test_a_name_that_does_not_resolve_says_so():
    with pytest.raises(ControllerLookupError, match=r"'no-such-controller\.invalid' does not resolve"):
        resolve(UNRESOLVABLE)


def test_several_names_are_refused_at_start():
    """Apache resolves what stands before the first ':' and reaches no controller: a list is refused."""
    with pytest.raises(ConfigError, match="one domain name and port"):
        controller_mode("localhost:9878;localhost:9879")
    assert controller_mode("localhost:9878;").controllerAddr == "localhost:9878;"
    assert BrokerConfig(enableControllerMode=True, controllerAddr="127.0.0.1:9878;127.0.0.1:9879")


def test_each_lookup_replaces_the_controllers_and_a_failed_one_keeps_them(caplog):
    config = controller_mode("localhost:9878")
    replicas = ReplicasManager(config, InlineThreads(), "127.0.0.1:10911", roles=None, identity=None,
                               epochs=None, max_offset=lambda: 0)
    assert replicas.controllers == []
    replicas.lookup_controllers()
    assert "127.0.0.1:9878" in replicas.controllers
    config.controllerAddr = "127.0.0.1:9879"  # the name's records changed
    replicas.lookup_controllers()
    assert replicas.controllers == ["127.0.0.1:9879"]

    config.controllerAddr = UNRESOLVABLE
    with caplog.at_level(logging.ERROR, logger="ferrymq.ha.controller"):
        replicas.lookup_controllers()
    assert replicas.controllers == ["127.0.0.1:9879"]
    assert "does not resolve" in caplog.text and "keeping the controllers 127.0.0.1:9879" in caplog.text


def test_a_broker_whose_name_never_resolved_has_no_controller_and_says_why(caplog):
    replicas = ReplicasManager(controller_mode(UNRESOLVABLE), InlineThreads(), "127.0.0.1:10911", roles=None,
                               identity=None, epochs=None, max_offset=lambda: 0)
    with caplog.at_level(logging.ERROR, logger="ferrymq.ha.controller"):
        replicas.lookup_controllers()
    assert replicas.controllers == []
    assert "no controller to register with until it does" in caplog.text
