"""dispatch: every handler outcome becomes an answer, late ones included."""

from __future__ import annotations

from types import SimpleNamespace

from twisted.internet import defer

from ferrymq.remoting.dispatch import dispatch
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.command import RemotingCommand

CHANNEL = SimpleNamespace(remote_address="127.0.0.1:1")


def _late(value):
    answers = []
    d = dispatch({10: lambda cmd, ch: defer.succeed(value)}, RemotingCommand(code=10, opaque=7), CHANNEL)
    d.addCallback(answers.append)
    return answers[0]


def test_a_late_answer_gets_the_request_correlation():
    answer = _late(RemotingCommand(code=ResponseCode.SUCCESS))
    assert (answer.code, answer.opaque, answer.is_response) == (ResponseCode.SUCCESS, 7, True)


def test_a_late_result_that_is_no_command_is_answered_as_a_system_error():
    answer = _late("not a command")
    assert (answer.code, answer.opaque) == (ResponseCode.SYSTEM_ERROR, 7)
    assert "not a RemotingCommand" in answer.remark
