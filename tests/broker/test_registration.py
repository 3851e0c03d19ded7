"""The broker's registrations with one name server go out one at a time, each with the broker's identity as
it is when it goes out: a name server that runs two requests of a connection in either order (Apache's
runs them on a thread pool) cannot apply an older registration after a newer one."""

from __future__ import annotations

import pytest
from twisted.internet import defer

from ferrymq.remoting import RemotingServer
from ferrymq.sdk import reactor_thread
from ferrymq.server.broker.registration import NameServerRegistration
from ferrymq.wire.bodies import TopicConfigSerializeWrapper
from ferrymq.wire.codes import RequestCode
from tests.ha.helpers import wait_for


@pytest.fixture(scope="module")
def rt():
    reactor_thread.ensure_running()
    return reactor_thread


class HeldNamesrv:
    """A name server answering each REGISTER_BROKER only when the test releases it; the brokerIds of the
    registrations in the order they arrived."""

    def __init__(self):
        self.arrived: list[int] = []
        self.held: list[tuple] = []

    def table(self):
        return {RequestCode.REGISTER_BROKER: self.register}

    def register(self, cmd, _channel):
        self.arrived.append(int(cmd.ext("brokerId")))
        answer = defer.Deferred()
        self.held.append((cmd, answer))
        return answer

    def release(self) -> None:
        cmd, answer = self.held.pop(0)
        answer.callback(cmd.response())


def identity(broker_id: int) -> tuple[str, str, str, int, str]:
    return ("Cluster", "127.0.0.1:10911", "broker-a", broker_id, "127.0.0.1:10912")


def test_a_registration_goes_out_once_the_one_before_is_answered_and_sends_the_newest_identity(rt):
    from twisted.internet import reactor

    namesrv = HeldNamesrv()
    server = RemotingServer(namesrv.table(), name="held-namesrv")
    rt.call(server.listen, 0, "127.0.0.1")
    registration = rt.call(NameServerRegistration, server.address, identity(2), TopicConfigSerializeWrapper,
                           reactor)
    rounds: list[defer.Deferred] = []
    try:
        rt.call(lambda: rounds.append(registration.register_all()))
        wait_for(lambda: namesrv.arrived == [2], "the slave's registration arrives", timeout=5)
        # promoted before the name server answered: the master's registration waits for that answer
        rt.call(setattr, registration, "identity", identity(0))
        rt.call(lambda: rounds.append(registration.register_all()))
        rt.call(lambda: rounds.append(registration.register_all()))
        with pytest.raises(TimeoutError):
            wait_for(lambda: len(namesrv.arrived) > 1, "a second registration in flight", timeout=0.5)
        rt.call(namesrv.release)
        wait_for(lambda: namesrv.arrived == [2, 0], "the master's registration after the answer", timeout=5)
        assert rounds[0].called and not rounds[1].called
        rt.call(namesrv.release)
        wait_for(lambda: namesrv.arrived == [2, 0, 0], "the last round after its answer", timeout=5)
        rt.call(namesrv.release)
        wait_for(lambda: all(r.called for r in rounds), "every round answered", timeout=5)
    finally:
        rt.call(registration.close)
        rt.call(server.stop, 1.0)
