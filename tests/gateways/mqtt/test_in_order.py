"""gateways.mqtt.in_order: a topic's next send waits for the answer to the one on its way, no longer."""

from __future__ import annotations

from twisted.internet import defer
from twisted.python.failure import Failure

from ferrymq.gateways.mqtt.in_order import InOrder


class Broker:
    """Sends that are answered when the test says so, in any order it chooses."""

    def __init__(self) -> None:
        self.on_the_way: dict[str, defer.Deferred] = {}
        self.sent: list[str] = []

    def send(self, name: str):
        def go() -> defer.Deferred:
            self.sent.append(name)
            self.on_the_way[name] = d = defer.Deferred()
            return d
        return go


def test_the_next_send_of_a_topic_waits_for_the_answer_before_it():
    broker, in_order = Broker(), InOrder()
    first = in_order.run("t", broker.send("a1"))
    second = in_order.run("t", broker.send("a2"))
    third = in_order.run("t", broker.send("a3"))
    assert broker.sent == ["a1"]
    broker.on_the_way["a1"].callback("stored a1")
    assert first.result == "stored a1" and broker.sent == ["a1", "a2"]
    broker.on_the_way["a2"].callback("stored a2")
    broker.on_the_way["a3"].callback("stored a3")
    assert (second.result, third.result) == ("stored a2", "stored a3")
    assert len(in_order) == 0


def test_topics_do_not_wait_for_each_other():
    broker, in_order = Broker(), InOrder()
    in_order.run("t", broker.send("a1"))
    in_order.run("u", broker.send("b1"))
    in_order.run("t", broker.send("a2"))
    assert broker.sent == ["a1", "b1"]
    broker.on_the_way["b1"].callback(None)
    assert broker.sent == ["a1", "b1"]
    broker.on_the_way["a1"].callback(None)
    assert broker.sent == ["a1", "b1", "a2"]


def test_a_failed_send_lets_the_next_go_and_keeps_its_failure():
    broker, in_order = Broker(), InOrder()
    first = in_order.run("t", broker.send("a1"))
    second = in_order.run("t", broker.send("a2"))
    failures: list[Failure] = []
    first.addErrback(failures.append)
    broker.on_the_way["a1"].errback(RuntimeError("broker busy"))
    assert [f.getErrorMessage() for f in failures] == ["broker busy"]
    assert broker.sent == ["a1", "a2"]
    broker.on_the_way["a2"].callback("stored a2")
    assert second.result == "stored a2"


def test_a_send_that_raises_while_waiting_fails_its_own_outcome_only():
    broker, in_order = Broker(), InOrder()
    in_order.run("t", broker.send("a1"))

    def broken():
        raise ValueError("bad message")

    second = in_order.run("t", broken)
    third = in_order.run("t", broker.send("a3"))
    failures: list[Failure] = []
    second.addErrback(failures.append)
    broker.on_the_way["a1"].callback(None)
    assert [f.getErrorMessage() for f in failures] == ["bad message"]
    assert broker.sent == ["a1", "a3"]
    assert not third.called


def test_a_send_answered_at_once_returns_its_answer_and_holds_nothing():
    in_order = InOrder()
    assert in_order.run("t", lambda: "put") == "put"
    assert in_order.run("t", lambda: "put again") == "put again"
    assert len(in_order) == 0
