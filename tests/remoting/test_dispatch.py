"""dispatch: every handler outcome becomes an answer, late ones included."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from twisted.internet import defer

from ferrymq.remoting.dispatch import dispatch, handles, routes
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.errors import Refusal
from ferrymq.wire.headers import GetTopicConfigRequestHeader

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


class _Topics:
    """A processor with typed handlers, as the broker's are written."""

    def __init__(self):
        self.seen = []

    @handles(RequestCode.GET_TOPIC_CONFIG)
    def topic_config(self, cmd, channel, header: GetTopicConfigRequestHeader):
        self.seen.append(header)
        if header.topic == "missing":
            raise Refusal(ResponseCode.TOPIC_NOT_EXIST, f"No topic in this broker. topic: {header.topic}", {})
        return RemotingCommand(code=ResponseCode.SUCCESS, body=header.topic.encode())

    @handles(RequestCode.GET_ALL_TOPIC_CONFIG, header=False)
    def all_topics(self, cmd, channel, header):
        self.seen.append(header)
        return defer.fail(Refusal(ResponseCode.SYSTEM_ERROR, "late refusal"))


def _ask(table, code, ext):
    return dispatch(table, RemotingCommand(code=code, opaque=9, ext_fields=ext), CHANNEL)


def test_a_route_hands_its_handler_the_declared_header():
    proc = _Topics()
    answer = _ask(routes([proc]), RequestCode.GET_TOPIC_CONFIG, {"topic": "T"})
    assert proc.seen == [GetTopicConfigRequestHeader(topic="T")]
    assert (answer.code, answer.body, answer.opaque) == (ResponseCode.SUCCESS, b"T", 9)


def test_a_refusal_is_answered_with_its_code_remark_and_ext_fields():
    answer = _ask(routes([_Topics()]), RequestCode.GET_TOPIC_CONFIG, {"topic": "missing"})
    assert (answer.code, answer.remark, answer.ext_fields, answer.opaque) == (
        ResponseCode.TOPIC_NOT_EXIST, "No topic in this broker. topic: missing", {}, 9)
    assert answer.is_response


def test_a_refusal_without_ext_fields_writes_none():
    table = {RequestCode.GET_TOPIC_CONFIG: lambda cmd, ch: (_ for _ in ()).throw(Refusal(17, "disable"))}
    answer = _ask(table, RequestCode.GET_TOPIC_CONFIG, None)
    assert (answer.code, answer.remark, answer.ext_fields) == (17, "disable", None)


def test_a_late_refusal_is_answered_like_a_prompt_one():
    proc = _Topics()
    answers = []
    _ask(routes([proc]), RequestCode.GET_ALL_TOPIC_CONFIG, {"topicSeq": "not a number"}).addCallback(answers.append)
    assert proc.seen == [None]  # header=False: the fields are not read, so not refused
    assert (answers[0].code, answers[0].remark, answers[0].opaque) == (ResponseCode.SYSTEM_ERROR, "late refusal", 9)


def test_a_malformed_header_is_refused_before_the_handler_runs():
    proc = _Topics()
    answer = _ask(routes([proc]), RequestCode.GET_TOPIC_CONFIG, {})
    assert proc.seen == []
    assert answer.code == ResponseCode.SYSTEM_ERROR and "'topic'" in answer.remark


def test_two_handlers_for_one_code_are_an_error():
    with pytest.raises(RuntimeError, match="two handlers"):
        routes([_Topics(), _Topics()])
