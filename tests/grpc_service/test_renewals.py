"""What the server does with the messages a client receives with auto_renew (:mod:`ferrymq.server.grpc.renewals`):
which are renewed when, for how long, and which are handed back."""

from __future__ import annotations

import pytest

pytest.importorskip("rocketmq.grpc_protocol")

from ferrymq.server.grpc.receipts import GrpcReceipt  # noqa: E402
from ferrymq.server.grpc.renewals import RENEW_DELAYS_MS, Held, RenewalPolicy, Renewals  # noqa: E402
from ferrymq.server.grpc.settings import retry_delay_ms  # noqa: E402
from ferrymq.wire.bodies import SubscriptionGroupConfig  # noqa: E402
from ferrymq.wire.extra_info import ReceiptHandle  # noqa: E402

RECEIVED = 1_000_000
INVISIBLE = 60_000


def receipt(pop_time: int = RECEIVED, invisible: int = INVISIBLE, offset: int = 7) -> GrpcReceipt:
    return GrpcReceipt(ReceiptHandle(offset, pop_time, invisible, 0, "0", "broker-a", 0, offset), 4096)


def held(**kwargs) -> Held:
    return Held("T", receipt(**kwargs), RECEIVED, reconsume_times=2)


def no_retry(group: str, times: int) -> int:
    raise AssertionError("not handed back")


def test_a_handle_is_renewed_only_within_renew_ahead_of_its_visibility_then_for_longer_each_time():
    renewals = Renewals(RenewalPolicy())
    message = held()
    renewals.hold("c1", "g", "M1", message)
    visible = RECEIVED + INVISIBLE
    assert renewals.due(visible - 10_001, no_retry) == []
    [due] = renewals.due(visible - 10_000, no_retry)
    assert (due.client_id, due.group, due.invisible_ms, due.last) == ("c1", "g", RENEW_DELAYS_MS[0], False)
    renewals.renewed(due, receipt(pop_time=visible - 10_000, invisible=RENEW_DELAYS_MS[0], offset=7))
    assert renewals.due(visible, no_retry) == []  # the new handle is visible a minute later
    later = visible - 10_000 + RENEW_DELAYS_MS[0] - 10_000
    [again] = renewals.due(later, no_retry)
    assert again.invisible_ms == RENEW_DELAYS_MS[1]
    for _ in range(10):
        renewals.renewed(again, receipt())
    assert renewals.due(RECEIVED + INVISIBLE, no_retry)[0].invisible_ms == RENEW_DELAYS_MS[-1]


def test_after_renew_max_time_a_message_is_handed_back_after_the_groups_retry_delay():
    renewals = Renewals(RenewalPolicy(renewMaxTimeMillis=3_600_000))
    renewals.hold("c1", "g", "M1", Held("T", receipt(pop_time=RECEIVED + 3_600_000), RECEIVED, reconsume_times=2))
    [due] = renewals.due(RECEIVED + 3_600_000 + INVISIBLE, lambda group, times: 1000 * times)
    assert (due.invisible_ms, due.last) == (2000, True)
    renewals.forget(due)
    assert not renewals


def test_the_client_hands_back_a_held_message_with_the_handle_it_got_and_the_latest_is_used():
    renewals = Renewals()
    message = held()
    renewals.hold("c1", "g", "M1", message)
    [due] = renewals.due(RECEIVED + INVISIBLE, no_retry)
    latest = receipt(pop_time=RECEIVED + INVISIBLE, invisible=RENEW_DELAYS_MS[0])
    renewals.renewed(due, latest)
    assert renewals.release("c1", "g", "M1", "another handle") is None
    assert renewals.release("c2", "g", "M1", str(receipt())) is None
    assert renewals.release("c1", "g", "M1", str(receipt())).receipt == latest
    assert not renewals
    renewals.renewed(due, receipt())  # a renewal done after the ack changes nothing
    assert not renewals


def test_a_client_gone_has_every_message_it_holds_handed_back_soon():
    renewals = Renewals(RenewalPolicy(invisibleTimeMillisWhenClear=1500))
    renewals.hold("c1", "g", "M1", held(offset=1))
    renewals.hold("c1", "g", "M2", held(offset=2))
    renewals.hold("c2", "g", "M3", held(offset=3))
    assert renewals.client_ids() == {"c1", "c2"}
    cleared = renewals.clear("c1")
    assert sorted((r.key[0], r.invisible_ms, r.last) for r in cleared) == [("M1", 1500, True), ("M2", 1500, True)]
    assert renewals.client_ids() == {"c2"}
    assert renewals.clear("c1") == []


@pytest.mark.parametrize(("policy", "times", "delay"), [
    (None, 0, 10_000),  # the default list read from its third delay: 1s 5s [10s] 30s ...
    (None, 1, 30_000),
    (None, 99, 7_200_000),
    ({"type": "CUSTOMIZED", "customizedRetryPolicy": {"next": [1000, 2000, 3000, 4000]}}, 1, 4000),
    ({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 2}}, 3, 8000),
    ({"type": "EXPONENTIAL", "exponentialRetryPolicy": {"initial": 1000, "max": 60000, "multiplier": 2}}, 40, 60000),
])
def test_the_retry_delay_is_the_groups_retry_policys(policy, times, delay):
    group = SubscriptionGroupConfig(group_name="g", group_retry_policy=policy) if policy else None
    assert retry_delay_ms(group, times) == delay
