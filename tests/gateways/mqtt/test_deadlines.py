"""The connections' deadlines share one reactor timer (sans sockets: Twisted's ``task.Clock``)."""

from __future__ import annotations

import pytest
from twisted.internet import task

from ferrymq.gateways.mqtt.deadlines import Deadlines


@pytest.fixture
def clock():
    return task.Clock()


def _deadlines(clock, calls, due=None, **kwargs):
    return Deadlines(clock, due or calls.append, now=clock.seconds, **kwargs)


def test_deadlines_are_served_by_one_timer_on_the_resolution_grid(clock):
    calls = []
    deadlines = _deadlines(clock, calls, resolution=0.1)
    for key, at in (("a", 1.01), ("b", 1.07), ("c", 2.0)):
        deadlines.file(key, at)
    assert len(clock.getDelayedCalls()) == 1
    clock.advance(1.05)
    assert calls == []  # a's deadline is served at 1.1, with b's
    clock.advance(0.05)
    assert calls == ["a", "b"]
    clock.advance(0.8)
    assert calls == ["a", "b"]
    clock.advance(0.1)
    assert calls == ["a", "b", "c"]
    assert clock.getDelayedCalls() == [] and len(deadlines) == 0


def test_an_earlier_deadline_moves_the_timer_and_a_later_one_waits_for_the_callback(clock):
    calls = []
    deadlines = _deadlines(clock, calls)
    deadlines.file("a", 5.0)
    deadlines.file("b", 1.0)  # earlier than the timer: it moves
    deadlines.file("a", 9.0)  # later than what is filed for a: a is asked at 5 and files 9 then
    assert [round(c.getTime(), 6) for c in clock.getDelayedCalls()] == [1.0]
    clock.advance(1.0)
    clock.advance(4.0)
    assert calls == ["b", "a"]


def test_a_forgotten_key_is_not_called_and_a_callback_may_file_again(clock):
    calls = []

    def due(key):
        calls.append((key, clock.seconds()))
        if key == "again" and len(calls) < 2:
            deadlines.file(key, clock.seconds() + 2.0)

    deadlines = _deadlines(clock, calls, due=due, resolution=1.0)
    deadlines.file("gone", 1.0)
    deadlines.file("again", 1.0)
    deadlines.forget("gone")
    clock.pump([1.0] * 6)
    assert calls == [("again", 1.0), ("again", 3.0)]
    assert clock.getDelayedCalls() == []


def test_a_failing_callback_does_not_stop_the_others(clock, caplog):
    calls = []

    def due(key):
        if key == "bad":
            raise RuntimeError("boom")
        calls.append(key)

    deadlines = _deadlines(clock, calls, due=due)
    deadlines.file("bad", 1.0)
    deadlines.file("good", 1.0)
    deadlines.file("later", 3.0)
    clock.advance(1.0)
    clock.advance(2.0)
    assert calls == ["good", "later"]
    assert "boom" in caplog.text


def test_stop_cancels_the_timer(clock):
    calls = []
    deadlines = _deadlines(clock, calls)
    deadlines.file("a", 1.0)
    deadlines.stop()
    assert clock.getDelayedCalls() == []
    clock.advance(2.0)
    assert calls == []
