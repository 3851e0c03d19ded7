"""Pending behaves like a Deferred for the steps a response chain uses, and dispatch/the connection take it."""

from __future__ import annotations

import pytest
from twisted.internet import defer
from twisted.python.failure import Failure

from ferrymq.remoting.dispatch import dispatch
from ferrymq.remoting.pending import Pending
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request


def chain(make):
    """The same steps on a Deferred or a Pending; returns (promise, log of what ran)."""
    seen = []
    p = make()
    p.addCallback(lambda r, k: seen.append(("cb", r, k)) or r + 1, "a")
    p.addCallback(lambda r: 1 // 0)  # raises: the next errback gets a Failure
    p.addCallback(lambda r: seen.append(("skipped", r)))
    p.addCallbacks(lambda r: seen.append(("not", r)), lambda f: seen.append(("eb", f.type)) or "recovered")
    p.addBoth(lambda r, k: seen.append(("both", r, k)) or r, "z")
    return p, seen


@pytest.mark.parametrize("fire_first", [False, True])
def test_same_order_and_error_passing_as_a_deferred(fire_first):
    logs = []
    for make in (defer.Deferred, Pending):
        if fire_first:  # steps added after the value is there run at once, in order
            p = make()
            p.callback(41)
            seen = []
            p.addCallback(lambda r: seen.append(("cb", r, "a")) or r + 1)
            p.addBoth(lambda r, k: seen.append(("both", r, k)) or r, "z")
        else:
            p, seen = chain(make)
            assert not p.called
            p.callback(41)
        assert p.called
        logs.append((seen, p.result if not isinstance(p.result, Failure) else p.result.type))
    assert logs[0] == logs[1]
    assert logs[1][0][0] == ("cb", 41, "a")


def test_fires_once_and_hands_over_to_a_deferred():
    p = Pending()
    d = p.deferred()
    got = []
    d.addCallback(got.append)
    p.callback("answer")
    assert got == ["answer"]
    with pytest.raises(defer.AlreadyCalledError):
        p.callback("again")


def test_a_step_added_by_a_running_step_runs_in_turn():
    p = Pending()
    order = []
    p.addCallback(lambda r: (order.append(1), p.addCallback(lambda r2: order.append(3) or r2))[1] and r)
    p.addCallback(lambda r: order.append(2) or r)
    p.callback("x")
    assert order == [1, 2, 3]


def test_dispatch_answers_a_pending_with_the_request_correlation_and_errors_as_system_error():
    cmd = request(RequestCode.SEND_MESSAGE_V2, {}, b"")
    cmd.opaque = 77
    answer = Pending()
    out = dispatch(lambda c, ch: answer, cmd, type("Ch", (), {"remote_address": "1.2.3.4:5"})())
    assert out is answer
    got = []
    out.addBoth(got.append)
    answer.callback(cmd.response(ResponseCode.SUCCESS, None, {}))
    assert got[0].opaque == 77 and got[0].code == ResponseCode.SUCCESS and got[0].is_response

    broken = Pending()
    out = dispatch(lambda c, ch: broken.addCallback(lambda r: r["missing"]), cmd,
                   type("Ch", (), {"remote_address": "1.2.3.4:5"})())
    got = []
    out.addBoth(got.append)
    broken.callback({})
    assert got[0].code == ResponseCode.SYSTEM_ERROR and "KeyError" in got[0].remark and got[0].opaque == 77
