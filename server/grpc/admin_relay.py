"""What an admin asks a gRPC consumer through the broker, relayed over the client's Telemetry stream.

``mqadmin consumerStatus -s`` (GET_CONSUMER_RUNNING_INFO with jstackEnable) becomes a
PrintThreadStackTraceCommand, ``mqadmin consumeMessage`` (CONSUME_MESSAGE_DIRECTLY) a
VerifyMessageCommand carrying the stored message; the client's answer, matched by its nonce, becomes
the broker's reply as the proxy builds it (its ClientActivity): a ConsumerRunningInfo holding only the
thread stacks, or a ConsumeMessageDirectlyResult. A running-info request without jstackEnable is one the
proxy never answers: it is refused at once here.
"""

from __future__ import annotations

import uuid

from ferrymq.wire.bodies import ConsumeMessageDirectlyResult, ConsumerRunningInfo
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.headers import GetConsumerRunningInfoRequestHeader
from ferrymq.wire.message import decode_record

from .messages import to_message
from .protocol import Code, service

#: what the client's verification status means to mqadmin (the proxy's CMResult mapping)
_VERIFIED = {Code.OK: "CR_SUCCESS", Code.FAILED_TO_CONSUME_MESSAGE: "CR_LATER",
             Code.MESSAGE_CORRUPTED: "CR_RETURN_NULL"}


class Unanswerable(Exception):
    """A request the client cannot be asked over Telemetry."""


def question(cmd: RemotingCommand) -> tuple[str, service.TelemetryCommand]:
    """The nonce and the command asking the client what the broker's ``cmd`` asks."""
    nonce = uuid.uuid4().hex
    if cmd.code == RequestCode.GET_CONSUMER_RUNNING_INFO:
        header = GetConsumerRunningInfoRequestHeader.from_ext(cmd.ext_fields or {})
        if not header.jstack_enable:
            raise Unanswerable("a gRPC client reports its thread stacks only (jstackEnable)")
        return nonce, service.TelemetryCommand(
            print_thread_stack_trace_command=service.PrintThreadStackTraceCommand(nonce=nonce))
    if cmd.code == RequestCode.CONSUME_MESSAGE_DIRECTLY:
        if not cmd.body:
            raise Unanswerable("no message to verify")
        message, _size = decode_record(cmd.body)
        return nonce, service.TelemetryCommand(
            verify_message_command=service.VerifyMessageCommand(nonce=nonce, message=to_message(message)))
    raise Unanswerable(f"request code {cmd.code} is not relayed to gRPC clients")


def nonce_of(command: service.TelemetryCommand) -> str | None:
    """The nonce of a client's answer (a thread stack or a verification), None for another command."""
    kind = command.WhichOneof("command")
    if kind == "thread_stack_trace":
        return command.thread_stack_trace.nonce
    if kind == "verify_message_result":
        return command.verify_message_result.nonce
    return None


def reply(cmd: RemotingCommand, answer: service.TelemetryCommand) -> RemotingCommand:
    """The broker's reply to ``cmd`` from the client's ``answer``."""
    code = answer.status.code
    if answer.WhichOneof("command") == "thread_stack_trace":
        if code == Code.OK:
            info = ConsumerRunningInfo(jstack=answer.thread_stack_trace.thread_stack_trace)
            return cmd.response(ResponseCode.SUCCESS, "", {}, info.encode())
        if code == Code.VERIFY_FIFO_MESSAGE_UNSUPPORTED:
            return cmd.response(ResponseCode.NO_PERMISSION, "forbidden to verify message", {})
        return cmd.response(ResponseCode.SYSTEM_ERROR, "verify message failed", {})
    result = ConsumeMessageDirectlyResult(consume_result=_VERIFIED.get(code), remark="from gRPC client")
    return cmd.response(ResponseCode.SUCCESS, "", {}, result.encode())

