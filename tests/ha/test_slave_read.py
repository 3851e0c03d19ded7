"""suggestWhichBrokerId and a slave's pull codes, as Apache's PullMessageProcessor sets them."""

from __future__ import annotations

from ferrymq.remoting.dispatch import Route, dispatch
from ferrymq.server.broker.processors.pull import slave_read
from ferrymq.server.config import BrokerConfig
from ferrymq.server.ha.roles import (
    IN_SYNC_REPLICAS_REMARK,
    REJECT_REMARK,
    with_rejections,
    with_replicas_short,
)
from ferrymq.server.store.status import GetMessageResult, GetMessageStatus
from ferrymq.wire.bodies import SubscriptionGroupConfig
from ferrymq.wire.codes import RequestCode
from ferrymq.wire.codes import ResponseCode as R
from ferrymq.wire.command import request
from ferrymq.wire.headers import SendMessageRequestHeader
from ferrymq.wire.message import encode_properties
from ferrymq.wire.requests import REQUESTS

GROUP = SubscriptionGroupConfig(group_name="g", broker_id=0, which_broker_when_consume_slowly=1)
MASTER = BrokerConfig(slaveReadEnable=True)
SLAVE = BrokerConfig(brokerRole="SLAVE", brokerId=1, slaveReadEnable=True)


def result(status=GetMessageStatus.FOUND, far_behind=False) -> GetMessageResult:
    return GetMessageResult(status, suggest_pulling_from_slave=far_behind)


def test_a_master_sends_a_consumer_far_behind_to_the_groups_slow_consumer_broker():
    assert slave_read(MASTER, GROUP, result(far_behind=True), R.SUCCESS) == (R.SUCCESS, 1)
    assert slave_read(MASTER, GROUP, result(), R.SUCCESS) == (R.SUCCESS, 0)
    assert slave_read(BrokerConfig(), GROUP, result(far_behind=True), R.SUCCESS) == (R.SUCCESS, 0)


def test_a_slave_sends_a_consumer_that_caught_up_back_to_the_master():
    assert slave_read(SLAVE, GROUP, result(), R.SUCCESS) == (R.SUCCESS, 0)
    assert slave_read(SLAVE, GROUP, result(GetMessageStatus.OFFSET_OVERFLOW_ONE), R.PULL_NOT_FOUND) == \
        (R.PULL_RETRY_IMMEDIATELY, 0)


def test_a_slave_keeps_a_consumer_far_behind_and_never_corrects_its_offset():
    assert slave_read(SLAVE, GROUP, result(far_behind=True), R.SUCCESS) == (R.SUCCESS, 1)
    moved = result(GetMessageStatus.OFFSET_TOO_SMALL, far_behind=True)
    assert slave_read(SLAVE, GROUP, moved, R.PULL_OFFSET_MOVED) == (R.PULL_RETRY_IMMEDIATELY, 0)


class _Channel:
    remote_address = "127.0.0.1:50000"


PULL_EXT = {"consumerGroup": "g", "topic": "T", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32",
            "sysFlag": "4", "commitOffset": "0", "suspendTimeoutMillis": "0", "subVersion": "0", "subscription": "*"}


def test_a_slave_refuses_sends_always_and_pulls_while_slave_read_is_off():
    served = []

    def serve(cmd, _channel, header):
        served.append(header)
        return cmd.response(R.SUCCESS, None, {})

    table = {code: Route(REQUESTS[code], serve, REQUESTS[code].decode)
             for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE)}
    assert with_rejections(table, BrokerConfig()) is table  # a master's table is untouched
    slave = BrokerConfig(brokerRole="SLAVE", brokerId=1)
    guarded = with_rejections(table, slave)

    def answer(code, ext):
        resp = dispatch(guarded, request(code, ext), _Channel())
        return resp.code, resp.remark

    assert answer(RequestCode.SEND_MESSAGE_V2, {}) == (R.SYSTEM_BUSY, REJECT_REMARK)
    assert answer(RequestCode.PULL_MESSAGE, PULL_EXT) == (R.SYSTEM_BUSY, REJECT_REMARK)
    slave.slaveReadEnable = True  # as UPDATE_BROKER_CONFIG sets it
    assert answer(RequestCode.SEND_MESSAGE_V2, {}) == (R.SYSTEM_BUSY, REJECT_REMARK)
    assert answer(RequestCode.PULL_MESSAGE, PULL_EXT) == (R.SUCCESS, None)
    assert [h.consumer_group for h in served] == ["g"]


def test_a_master_short_of_in_sync_replicas_refuses_sends_that_wait_for_the_store():
    served = []

    def serve(cmd, _channel, header):
        served.append(header.properties)
        return cmd.response(R.SUCCESS, None, {})

    table = {RequestCode.SEND_MESSAGE_V2: Route(REQUESTS[RequestCode.SEND_MESSAGE_V2], serve,
                                                REQUESTS[RequestCode.SEND_MESSAGE_V2].decode)}
    short = with_replicas_short(table)

    def answer(properties):
        ext = SendMessageRequestHeader("p", "T", "TBW102", 4, 0, 0, 0, 0, properties=properties).to_ext_v2()
        resp = dispatch(short, request(RequestCode.SEND_MESSAGE_V2, ext, b"x"), _Channel())
        return resp.code, resp.remark

    assert answer(encode_properties({"WAIT": "true"})) == (R.SYSTEM_ERROR, IN_SYNC_REPLICAS_REMARK)
    assert answer("") == (R.SYSTEM_ERROR, IN_SYNC_REPLICAS_REMARK)
    # a send that waits for nothing is stored without the check, as Apache's needHandleHA skips it
    assert answer(encode_properties({"WAIT": "false"})) == (R.SUCCESS, None)
    assert served == [encode_properties({"WAIT": "false"})]


def test_in_process_callers_follow_the_table_a_role_change_swaps_in():
    """A controller-mode broker starts fenced as a slave and swaps its request table when elected: the
    gateways and the gRPC service of its process, which call it through a LocalPeer, must see the swap."""
    from types import SimpleNamespace

    from ferrymq.remoting.local import LocalPeer
    from ferrymq.server.broker.service import LiveTable

    def serve(cmd, _channel, _header):
        return cmd.response(R.SUCCESS, None, {})

    table = {RequestCode.SEND_MESSAGE_V2: Route(REQUESTS[RequestCode.SEND_MESSAGE_V2], serve,
                                                REQUESTS[RequestCode.SEND_MESSAGE_V2].decode)}
    broker = SimpleNamespace(table=with_rejections(table, BrokerConfig(brokerRole="SLAVE", brokerId=1)))
    peer = LocalPeer(LiveTable(broker), "127.0.0.1:0")
    ext = SendMessageRequestHeader("p", "T", "TBW102", 4, 0, 0, 0, 0, properties="").to_ext_v2()

    def answer():
        return peer.invoke(request(RequestCode.SEND_MESSAGE_V2, ext), 1.0).result.code

    assert answer() == R.SYSTEM_BUSY
    broker.table = table  # elected master
    assert answer() == R.SUCCESS
    broker.table = with_replicas_short(table)
    assert answer() == R.SYSTEM_ERROR
    assert list(LiveTable(broker)) == [RequestCode.SEND_MESSAGE_V2] and len(LiveTable(broker)) == 1


def test_a_table_that_refuses_or_checks_sends_before_reading_them_is_told_apart():
    from ferrymq.server.ha.roles import refuses_sends

    table = {RequestCode.SEND_MESSAGE_V2: Route(REQUESTS[RequestCode.SEND_MESSAGE_V2], lambda *a: None,
                                                REQUESTS[RequestCode.SEND_MESSAGE_V2].decode)}
    assert not refuses_sends(table)
    assert refuses_sends(with_rejections(table, BrokerConfig(brokerRole="SLAVE", brokerId=1)))
    assert refuses_sends(with_replicas_short(table))
    assert refuses_sends({})
