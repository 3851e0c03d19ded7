"""An admin's questions to a gRPC consumer and the client's answers, as the broker's requests and replies
(:mod:`ferrymq.server.grpc.admin_relay`)."""

from __future__ import annotations

import pytest

pytest.importorskip("rocketmq.grpc_protocol")

from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402
from rocketmq.grpc_protocol import service_pb2 as service  # noqa: E402

from ferrymq.server.grpc import admin_relay  # noqa: E402
from ferrymq.wire.bodies import ConsumeMessageDirectlyResult, ConsumerRunningInfo  # noqa: E402
from ferrymq.wire.codes import RequestCode, ResponseCode  # noqa: E402
from ferrymq.wire.command import request  # noqa: E402
from ferrymq.wire.headers import GetConsumerRunningInfoRequestHeader  # noqa: E402
from ferrymq.wire.message import MessageConst, MessageExt, encode_record  # noqa: E402


def running_info(jstack: bool):
    return request(RequestCode.GET_CONSUMER_RUNNING_INFO,
                   GetConsumerRunningInfoRequestHeader("g", "c1", jstack_enable=jstack).to_ext())


def test_thread_stacks_are_asked_with_a_nonce_and_answered_as_the_running_infos_jstack():
    cmd = running_info(jstack=True)
    nonce, asked = admin_relay.question(cmd)
    assert asked.print_thread_stack_trace_command.nonce == nonce
    answer = service.TelemetryCommand(status=pb.Status(code=pb.OK), thread_stack_trace=service.ThreadStackTrace(
        nonce=nonce, thread_stack_trace="main"))
    assert admin_relay.nonce_of(answer) == nonce
    reply = admin_relay.reply(cmd, answer)
    assert (reply.code, reply.opaque, ConsumerRunningInfo.decode(reply.body).jstack) == (ResponseCode.SUCCESS,
                                                                                         cmd.opaque, "main")
    failed = admin_relay.reply(cmd, service.TelemetryCommand(status=pb.Status(code=pb.INTERNAL_SERVER_ERROR),
                                                             thread_stack_trace=service.ThreadStackTrace(nonce=nonce)))
    assert failed.code == ResponseCode.SYSTEM_ERROR


def test_running_info_without_thread_stacks_and_other_requests_are_not_asked():
    with pytest.raises(admin_relay.Unanswerable):
        admin_relay.question(running_info(jstack=False))
    with pytest.raises(admin_relay.Unanswerable):
        admin_relay.question(request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, {}))
    assert admin_relay.nonce_of(service.TelemetryCommand(settings=pb.Settings())) is None


@pytest.mark.parametrize(("code", "result"), [(pb.OK, "CR_SUCCESS"), (pb.FAILED_TO_CONSUME_MESSAGE, "CR_LATER"),
                                              (pb.MESSAGE_CORRUPTED, "CR_RETURN_NULL"), (pb.BAD_REQUEST, None)])
def test_a_message_to_verify_is_sent_as_stored_and_the_verdict_is_a_consume_result(code, result):
    stored = MessageExt(topic="T", body=b"verify me", properties={MessageConst.TAGS: "TagV", MessageConst.UNIQ_KEY: "ID1"})
    cmd = request(RequestCode.CONSUME_MESSAGE_DIRECTLY, {"consumerGroup": "g", "clientId": "c1"},
                  encode_record(stored))
    nonce, asked = admin_relay.question(cmd)
    verify = asked.verify_message_command
    assert (verify.nonce, verify.message.body, verify.message.system_properties.tag) == (nonce, b"verify me", "TagV")
    reply = admin_relay.reply(cmd, service.TelemetryCommand(status=pb.Status(code=code),
                                                            verify_message_result=service.VerifyMessageResult(nonce=nonce)))
    verdict = ConsumeMessageDirectlyResult.decode(reply.body)
    assert (reply.code, verdict.consume_result, verdict.remark) == (ResponseCode.SUCCESS, result, "from gRPC client")
