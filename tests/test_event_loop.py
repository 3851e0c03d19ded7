"""server.event_loop: call_soon is the asyncio loop's own next-turn call on the asyncio reactor, callLater(0)
elsewhere, and runs once, in a later turn, unless cancelled; the broker's asyncio reactor on uvloop arms
its timers so that they neither fire before the call is due nor make the loop turn until it is."""

from __future__ import annotations

import asyncio

import pytest
from twisted.internet import asyncioreactor, task

from ferrymq.server.event_loop import BrokerReactor, call_soon


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


@pytest.mark.parametrize("reactor_class, most_turns", [(asyncioreactor.AsyncioSelectorReactor, None),
                                                       (BrokerReactor, 2)])
def test_timed_calls_on_uvloop_run_when_due_after_at_most_one_early_wake(reactor_class, most_turns):
    """uvloop counts delays in rounded milliseconds: Twisted's reactor as it comes wakes again and again
    (no wait) until its clock reaches the call, the broker's wakes at most twice a call, never early."""
    uvloop = pytest.importorskip("uvloop")
    loop = uvloop.new_event_loop()
    try:
        reactor = reactor_class(loop)
        wakes = []
        on_timer = reactor._onTimer
        reactor._onTimer = lambda: wakes.append(1) or on_timer()
        late: list[float] = []
        for i in range(20):
            fired = loop.create_future()
            due = reactor.seconds() + 0.0024 + i * 0.0001
            reactor.callLater(due - reactor.seconds(), lambda f=fired, d=due: (late.append(reactor.seconds() - d),
                                                                                 f.set_result(None)))
            loop.run_until_complete(fired)
        assert min(late) >= 0
        if most_turns is None:
            assert len(wakes) > 2 * 20  # the loop spins until the call is due: why the broker's reactor exists
        else:
            assert len(wakes) <= most_turns * 20
    finally:
        loop.close()


@pytest.mark.parametrize("reactor_class, system", [(asyncioreactor.AsyncioSelectorReactor, "the reader"),
                                                   (BrokerReactor, "-")])
def test_the_broker_reactor_reads_without_a_log_context_and_stops_when_removed(reactor_class, system):
    """Each read runs without Twisted's legacy log context (the reader's prefix as "system"); a reader
    removed is read no more."""
    import socket

    from twisted.python import context, log

    uvloop = pytest.importorskip("uvloop")
    loop = uvloop.new_event_loop()
    a, b = socket.socketpair()
    try:
        reactor = reactor_class(loop)
        got: list = []
        read = loop.create_future()

        class Reader:
            def fileno(self):
                return b.fileno()

            def logPrefix(self):
                return "the reader"

            def doRead(self):
                got.append((b.recv(10), context.get(log.ILogContext)["system"]))
                if not read.done():
                    read.set_result(None)

        reader = Reader()
        reactor.addReader(reader)
        a.send(b"x")
        loop.run_until_complete(read)
        assert got == [(b"x", system)]
        reactor.removeReader(reader)
        a.send(b"y")
        loop.run_until_complete(asyncio.sleep(0.05))
        assert got == [(b"x", system)] and reader not in reactor.getReaders()
    finally:
        a.close()
        b.close()
        loop.close()
