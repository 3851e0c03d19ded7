"""SQL92 filters of groups that went away: kept dead for filterDataCleanTimeSpan (24 h), then removed."""

from __future__ import annotations

from ferrymq.server.broker.sql_subscriptions import CLEAN_INTERVAL_MS, FILTER_DATA_CLEAN_TIME_SPAN_MS, ConsumerFilterManager

DAY_S = FILTER_DATA_CLEAN_TIME_SPAN_MS / 1000
EXPIRY_S = 120


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def manager():
    clock = Clock()
    return ConsumerFilterManager(clock=clock), clock


def test_a_filter_kept_alive_by_heartbeats_is_never_removed():
    m, clock = manager()
    for _ in range(int(2 * DAY_S / 30)):
        m.register("g", "T", "a > 1", 1)
        clock.now += 30
    assert m.get("g", "T") is not None and m.dead_since("g", "T") is None


def test_a_silent_group_dies_after_the_channel_expiry_and_is_removed_a_day_later():
    m, clock = manager()
    m.register("g", "T", "a > 1", 1)
    start = clock.now
    clock.now += EXPIRY_S
    assert m.dead_since("g", "T") is None
    clock.now += 1
    assert m.dead_since("g", "T") == int((start + EXPIRY_S) * 1000)
    clock.now = start + EXPIRY_S + DAY_S - 1
    assert m.clean() == [] and m.get("g", "T").expression == "a > 1"  # dead, still kept (and still served)
    clock.now += 1
    assert m.clean() == [("g", "T")]
    assert m.get("g", "T") is None and len(m) == 0


def test_an_unregistered_group_dies_at_once_and_a_heartbeat_revives_it():
    m, clock = manager()
    m.register("g", "T", "a > 1", 1)
    m.register("g", "U", "b > 1", 1)
    m.register("other", "T", "c > 1", 1)
    clock.now += 5
    m.unregister_group("g")
    assert m.dead_since("g", "T") == int(clock.now * 1000) and m.dead_since("other", "T") is None
    clock.now += DAY_S / 2
    m.register("g", "T", "a > 1", 1)  # the consumer came back (same version: no recompilation)
    m.register("other", "T", "c > 1", 1)
    clock.now += DAY_S / 2 + 1
    m.register("g", "T", "a > 1", 1)  # a registration runs the (10-second) cleaning round
    assert m.get("g", "U") is None  # dead a day: removed
    assert m.get("g", "T") is not None and m.get("other", "T") is not None


def test_registrations_trigger_cleaning_so_departed_groups_do_not_accumulate():
    """Groups come and go (a new group per deployment): the table holds only the recent ones."""
    m, clock = manager()
    for i in range(300):
        m.register(f"g{i}", "T", "a > 1", 1)
        clock.now += DAY_S / 100  # each group heartbeats once and leaves
    live_window = (FILTER_DATA_CLEAN_TIME_SPAN_MS + EXPIRY_S * 1000 + CLEAN_INTERVAL_MS) / (DAY_S * 10)
    assert len(m) <= live_window + 2
    assert m.get("g299", "T") is not None and m.get("g0", "T") is None
