"""What a slave refuses, as Apache's processors' ``rejectRequest`` does before reading the request.

Apache answers a rejected request SYSTEM_BUSY with the flow-control remark, the same for a send to a
slave (unless it acts as master) and a pull from a slave without slaveReadEnable; the clients take the
code as "busy": a send is retried on another queue, a pull later.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ferrymq.remoting.dispatch import Route
from ferrymq.server.config import BrokerConfig
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.errors import Refusal
from ferrymq.wire.message import decode_properties

REJECT_REMARK = "[REJECTREQUEST]system busy, start flow control for a while"
#: Apache's answer to a put while the sync state set is smaller than minInSyncReplicas
IN_SYNC_REPLICAS_REMARK = "in-sync replicas not enough"

#: Apache's SendMessageProcessor codes
SEND_CODES = (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE,
              RequestCode.CONSUMER_SEND_MSG_BACK)
#: Apache's PullMessageProcessor codes
PULL_CODES = (RequestCode.PULL_MESSAGE, RequestCode.LITE_PULL_MESSAGE)


def _reject(_cmd: Any, _channel: Any, _header: None) -> None:
    raise Refusal(ResponseCode.SYSTEM_BUSY, REJECT_REMARK, None)  # Apache writes no extFields here


def _no_header(_ext: object) -> None:
    return None


def _unless_slave_read(route: Route, config: BrokerConfig) -> Route:
    """``route`` answering only while ``config.slaveReadEnable`` is on (UPDATE_BROKER_CONFIG may change it):
    the refusal comes before the header is read, as Apache's ``rejectRequest`` does."""

    def handle(cmd: Any, channel: Any, _header: None) -> Any:
        if not config.slaveReadEnable:
            _reject(cmd, channel, None)
        return route.handle(cmd, channel, route.decode(cmd.ext_fields))

    return Route(route.request, handle, _no_header)


def refuses_sends(table: Mapping[int, Route]) -> bool:
    """Whether ``table`` refuses (a slave's) or checks (a master's short of in-sync replicas) a send before
    its processor reads it: callers in the broker's process that store without a request must then send
    one through the table, to be answered as a socket client would."""
    route = table.get(RequestCode.SEND_MESSAGE_V2)
    return route is None or route.decode is _no_header


def with_rejections(table: dict[int, Route], config: BrokerConfig) -> dict[int, Route]:
    """A slave's request table: sends refused, pulls refused unless slaveReadEnable. A master's is
    ``table`` itself (a role changes only with a restart), so its send path gains no step."""
    if not config.is_slave:
        return table
    out = dict(table)
    for code in SEND_CODES:
        if code in out:
            out[code] = Route(out[code].request, _reject, _no_header)
    for code in PULL_CODES:
        if code in out:
            out[code] = _unless_slave_read(out[code], config)
    return out


def _waits_for_store(header: Any) -> bool:
    """Whether a put waits for the store (Apache's waitStoreMsgOK): all but a send whose properties say
    WAIT=false, which Apache puts without any replica check."""
    properties = getattr(header, "properties", None)
    return not properties or decode_properties(properties).get("WAIT") != "false"


def _unless_replicas_short(route: Route) -> Route:
    def handle(cmd: Any, channel: Any, _header: None) -> Any:
        header = route.decode(cmd.ext_fields)
        if _waits_for_store(header):
            raise Refusal(ResponseCode.SYSTEM_ERROR, IN_SYNC_REPLICAS_REMARK, None)
        return route.handle(cmd, channel, header)

    return Route(route.request, handle, _no_header)


def with_replicas_short(table: dict[int, Route]) -> dict[int, Route]:
    """A controller-mode master's table while its sync state set is smaller than minInSyncReplicas:
    puts are refused before they are stored, as Apache's IN_SYNC_REPLICAS_NOT_ENOUGH (answered
    SYSTEM_ERROR, which the clients retry). The table is swapped when the set or the key changes, so
    the send path of a master with enough replicas gains no step."""
    out = dict(table)
    for code in SEND_CODES:
        if code in out:
            out[code] = _unless_replicas_short(out[code])
    return out
