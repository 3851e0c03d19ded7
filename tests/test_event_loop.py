"""server.event_loop.call_soon: the asyncio loop's own next-turn call on the asyncio reactor, callLater(0)
elsewhere; either way the call runs once, in a later turn, unless cancelled."""

from __future__ import annotations

import asyncio

from twisted.internet import asyncioreactor, task

from ferrymq.server.event_loop import call_soon


def test_asyncio_reactor_runs_it_on_the_loop_without_a_timed_call():
    loop = asyncio.new_event_loop()
    try:
        reactor = asyncioreactor.AsyncioSelectorReactor(loop)
        ran = []
        call_soon(reactor, lambda: ran.append("first"))
        cancelled = call_soon(reactor, lambda: ran.append("cancelled"))
        cancelled.cancel()
        assert ran == [] and reactor.getDelayedCalls() == []
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert ran == ["first"]
    finally:
        loop.close()


def test_other_reactors_get_a_call_later_of_zero():
    clock = task.Clock()
    ran = []
    call_soon(clock, lambda: ran.append(1))
    cancelled = call_soon(clock, lambda: ran.append(2))
    cancelled.cancel()
    assert ran == []
    clock.advance(0)
    assert ran == [1]
