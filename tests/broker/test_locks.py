from ferrymq.server.broker.locks import QueueLockManager


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_first_client_gets_free_queues_and_second_gets_none():
    clock = Clock()
    locks = QueueLockManager(clock=clock)
    assert locks.try_lock_batch("g", ["q0", "q1"], "c1") == {"q0", "q1"}
    assert locks.try_lock_batch("g", ["q0", "q1", "q2"], "c2") == {"q2"}
    assert locks.holder("g", "q0") == "c1"
    assert locks.try_lock_batch("other-group", ["q0"], "c2") == {"q0"}


def test_renewal_keeps_the_lock_and_expiry_releases_it():
    clock = Clock()
    locks = QueueLockManager(max_live_ms=60_000, clock=clock)
    locks.try_lock_batch("g", ["q0"], "c1")
    clock.now += 50
    assert locks.try_lock_batch("g", ["q0"], "c1") == {"q0"}  # renewed at t+50 s
    clock.now += 50
    assert locks.try_lock_batch("g", ["q0"], "c2") == set()  # 50 s since renewal: still c1's
    clock.now += 11
    assert locks.holder("g", "q0") is None
    assert locks.try_lock_batch("g", ["q0"], "c2") == {"q0"}


def test_unlock_only_releases_own_locks():
    locks = QueueLockManager(clock=Clock())
    locks.try_lock_batch("g", ["q0", "q1"], "c1")
    locks.unlock_batch("g", ["q0", "q1"], "c2")
    assert locks.is_locked_by("g", "q0", "c1")
    locks.unlock_batch("g", ["q0"], "c1")
    assert locks.holder("g", "q0") is None
    assert locks.is_locked_by("g", "q1", "c1")


def test_purge_expired_drops_only_lapsed_locks():
    now = [1000.0]
    m = QueueLockManager(max_live_ms=60_000, clock=lambda: now[0])
    m.try_lock_batch("g", ["q1"], "c1")
    now[0] += 30
    m.try_lock_batch("g", ["q2"], "c1")
    now[0] += 31
    assert m.purge_expired() == 1
    assert m.holder("g", "q2") == "c1" and m.holder("g", "q1") is None
