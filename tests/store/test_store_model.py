"""Stateful property test: random puts, batches, pulls, clean restarts and simulated crashes against a
plain in-memory model of what each queue must hold. Tiny segments make every run cross commit-log and
consume-queue segment boundaries."""

from __future__ import annotations

import shutil
import tempfile

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from ferrymq.server.store import GetMessageStatus as G
from ferrymq.server.store import MessageStore
from ferrymq.wire.message import decode_records

from .conftest import simulate_crash, small_config

QUEUES = 3


class StoreModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="store-model-")
        self.config = small_config(self.dir, mappedFileSizeCommitLog=8 * 1024, mappedFileSizeConsumeQueue=20 * 7,
                                   maxMessageSize=3000, flushIntervalCommitLog=10, flushIntervalConsumeQueue=10)
        self.store = MessageStore(self.config)
        self.store.start()
        self.model: dict[int, list[bytes]] = {q: [] for q in range(QUEUES)}
        self.counter = 0

    def _body(self, size: int) -> bytes:
        self.counter += 1
        return (b"%d|" % self.counter) + bytes([self.counter % 256]) * size

    @rule(q=st.integers(0, QUEUES - 1), size=st.integers(0, 2500), tag=st.sampled_from([None, "a", "b"]))
    def put(self, q, size, tag):
        body = self._body(size)
        r = self.store.put_message("M", q, body, {"TAGS": tag, "KEYS": f"k{self.counter}"} if tag else {})
        assert r.ok, r.remark
        assert r.queue_offset == len(self.model[q])
        self.model[q].append(body)

    @rule(q=st.integers(0, QUEUES - 1), sizes=st.lists(st.integers(0, 600), min_size=1, max_size=4))
    def put_batch(self, q, sizes):
        bodies = [self._body(n) for n in sizes]
        r = self.store.put_messages("M", q, [(0, b, "") for b in bodies])
        assert r.ok and r.queue_offset == len(self.model[q]) and r.msg_num == len(bodies)
        self.model[q].extend(bodies)

    @rule(q=st.integers(0, QUEUES - 1), start=st.integers(0, 60), n=st.integers(1, 40))
    def pull(self, q, start, n):
        expected = self.model[q]
        g = self.store.get_message("g", "M", q, start, n)
        if not expected:
            assert g.status in (G.NO_MATCHED_LOGIC_QUEUE, G.NO_MESSAGE_IN_QUEUE)
        elif start == len(expected):
            assert g.status is G.OFFSET_OVERFLOW_ONE
        elif start > len(expected):
            assert g.status is G.OFFSET_OVERFLOW_BADLY and g.next_begin_offset == len(expected)
        else:
            assert g.status is G.FOUND
            got = [m.body for m in decode_records(g.body())]
            assert got == expected[start : start + len(got)] and 1 <= len(got) <= n
            assert g.next_begin_offset == start + len(got)

    @rule()
    def restart_clean(self):
        self.store.shutdown()
        self.store = MessageStore(self.config)
        self.store.start()
        assert self.store.recovery_report["clean"]

    @rule()
    def crash_and_recover(self):
        simulate_crash(self.store)
        self.store = MessageStore(self.config)
        self.store.start()
        assert not self.store.recovery_report["clean"]

    @precondition(lambda self: self.counter > 0)
    @rule(data=st.data())
    def query_key(self, data):
        k = data.draw(st.integers(1, self.counter))
        for m in (decode_records(v) for v in self.store.query_message("M", f"k{k}", 4, 0, 2**62).messages):
            assert m[0].body.startswith(b"%d|" % k)

    @invariant()
    def offsets_match_model(self):
        for q in range(QUEUES):
            assert self.store.get_max_offset("M", q) == len(self.model[q])

    def teardown(self):
        if self.store._lock_fd >= 0:
            self.store.shutdown()
        shutil.rmtree(self.dir, ignore_errors=True)


TestStoreModel = StoreModel.TestCase
TestStoreModel.settings = settings(max_examples=40, stateful_step_count=40, deadline=None,
                                   suppress_health_check=[HealthCheck.too_slow])
