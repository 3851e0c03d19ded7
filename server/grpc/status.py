# cython: annotation_typing=False
# (an IntEnum is passed where an int is annotated: Cython would refuse it as not an int)
"""Refusals and their ``apache.rocketmq.v2.Status``, as Apache's proxy words them.

A refused request is still answered with gRPC status OK: the refusal is the response's ``status`` (a
``Code`` and a message), which is what the SDKs read. :class:`Refused` carries one from the check that
failed to the method that answers.
"""

from __future__ import annotations

import functools

from ferrymq.server.store.status import PutMessageStatus
from ferrymq.wire.codes import ResponseCode

from .protocol import Code, pb


class Refused(Exception):
    """A request answered with ``code`` (not OK) and ``message``."""

    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message

    def status(self) -> pb.Status:
        return status(self.code, self.message)


def status(code: int, message: str | None = None) -> pb.Status:
    """A status saying ``message``, else the code's name. Read-only: a response copies the status it is
    built with, and a status named by its code alone is made once (every send answers one or two)."""
    if message is None:
        return _named(code)
    return pb.Status(code=code, message=message)


@functools.cache
def _named(code: int) -> pb.Status:
    return pb.Status(code=code, message=Code.Name(code))


OK = status(Code.OK)

#: the remoting response codes the proxy names (its ResponseBuilder); any other is INTERNAL_SERVER_ERROR
_FROM_REMOTING = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.SYSTEM_BUSY: Code.TOO_MANY_REQUESTS,
    ResponseCode.REQUEST_CODE_NOT_SUPPORTED: Code.NOT_IMPLEMENTED,
    ResponseCode.SUBSCRIPTION_GROUP_NOT_EXIST: Code.CONSUMER_GROUP_NOT_FOUND,
    ResponseCode.TOPIC_NOT_EXIST: Code.TOPIC_NOT_FOUND,
}

#: a send's store results other than SEND_OK, as the proxy reports them per message
SEND_STATUS = {
    ResponseCode.SUCCESS: Code.OK,
    ResponseCode.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    ResponseCode.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    ResponseCode.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}

#: the same for a put stored without a send request (the statuses the broker answers with those codes)
STORED_STATUS = {
    PutMessageStatus.PUT_OK: Code.OK,
    PutMessageStatus.FLUSH_DISK_TIMEOUT: Code.MASTER_PERSISTENCE_TIMEOUT,
    PutMessageStatus.FLUSH_SLAVE_TIMEOUT: Code.SLAVE_PERSISTENCE_TIMEOUT,
    PutMessageStatus.SLAVE_NOT_AVAILABLE: Code.HA_NOT_AVAILABLE,
}


def from_remoting(code: int) -> int:
    """The v2 ``Code`` of a broker's refusal."""
    return _FROM_REMOTING.get(code, Code.INTERNAL_SERVER_ERROR)
