"""suggestWhichBrokerId and a slave's pull codes, as Apache's PullMessageProcessor sets them."""

from __future__ import annotations

from ferrymq.server.broker.processors.pull import slave_read
from ferrymq.server.config import BrokerConfig
from ferrymq.server.store.status import GetMessageResult, GetMessageStatus
from ferrymq.wire.bodies import SubscriptionGroupConfig
from ferrymq.wire.codes import ResponseCode as R

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
