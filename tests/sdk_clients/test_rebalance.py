"""Rebalance scheduling: requests that pile up while a round runs."""

from __future__ import annotations

from types import SimpleNamespace

from twisted.internet import defer

from ferrymq.sdk.consumer.rebalance import Rebalancer


def test_rebalance_requests_queued_behind_a_running_one_share_one_round():
    rounds: list[defer.Deferred] = []
    r = Rebalancer(SimpleNamespace(), lambda *a: None)

    def fake_round():
        d = defer.Deferred()
        rounds.append(d)
        return d

    r._rebalance = fake_round
    first = r.do_rebalance()
    assert len(rounds) == 1, "the first request runs at once"
    queued = [r.do_rebalance() for _ in range(5)]
    assert all(q is queued[0] for q in queued), "requests waiting behind the running round share one"
    rounds[0].callback(None)
    assert first.called and len(rounds) == 2, "exactly one more round follows"
    rounds[1].callback(None)
    assert queued[0].called
    r.do_rebalance()
    assert len(rounds) == 3
