"""build_broker: the one wiring of a broker, used by the service and by these tests."""

from __future__ import annotations

from ferrymq.remoting.dispatch import Route
from ferrymq.wire.codes import RequestCode
from ferrymq.wire.requests import REQUESTS


def test_every_served_code_is_routed_through_its_declaration(bk):
    assert bk.table, "the broker serves requests"
    for code, route in bk.table.items():
        assert isinstance(route, Route)
        assert route.request is REQUESTS[code]
    served = {RequestCode(c) for c in bk.table}
    assert {RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE, RequestCode.END_TRANSACTION,
            RequestCode.UPDATE_AND_CREATE_TOPIC, RequestCode.HEART_BEAT} <= served


def test_services_share_the_contexts_store_port(bk):
    """The delay, timer and transaction services read and write through the same port as the processors."""
    ctx = bk.ctx
    assert ctx.scheduler.store is ctx.store
    assert ctx.timer.store is ctx.store
    assert ctx.transactions.service.store is ctx.store


def test_a_held_pull_is_answered_through_the_pull_processor(bk):
    bk.send("T", b"first")
    bk.heartbeat("g", "T")
    held = bk.pull("g", "T", offset=1, sys_flag=2, suspend_ms=15000)  # suspend flag, nothing yet
    assert not held.called
    bk.send("T", b"second")
    assert held.called and held.result.code == 0
