"""What a slave refuses, as Apache's processors' ``rejectRequest`` does before reading the request.

Apache answers a rejected request SYSTEM_BUSY with the flow-control remark, the same for a send to a
slave (unless it acts as master) and a pull from a slave without slaveReadEnable: the clients retry the
send elsewhere and pull from the master again.
"""

from __future__ import annotations

from typing import Any

from ferrymq.remoting.dispatch import Route
from ferrymq.server.config import BrokerConfig
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.errors import Refusal

REJECT_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"

#: Apache's SendMessageProcessor codes
SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
              RequestCode.CONSUMER_SEND_MSG_BACK)
#: Apache's PullMessageProcessor codes
PULL_CODES = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)


def rejected_codes(config: BrokerConfig) -> tuple[int, ...]:
    """The request codes ``config``'s broker refuses outright."""
    if not config.is_slave:
        return ()
    return SEND_CODES + (() if config.slaveReadEnable else PULL_CODES)


def _reject(_cmd: Any, _channel: Any, _header: None) -> None:
    raise Refusal(ResponseCode.SYSTEM_BUSY, REJECT_REMARK, None)  # Apache writes no extFields here


def _no_header(_ext: object) -> None:
    return None


def with_rejections(table: dict[int, Route], config: BrokerConfig) -> dict[int, Route]:
    """``table`` with the codes :func:`rejected_codes` names answered by the refusal (header unread)."""
    out = dict(table)
    for code in rejected_codes(config):
        route = out.get(code)
        if route is not None:
            out[code] = Route(route.request, _reject, _no_header)
    return out
