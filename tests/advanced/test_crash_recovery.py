"""Kill ``ferrymq standalone`` with SIGKILL while delayed, timer and half messages are pending; after a
restart each delayed/timer message is delivered exactly once and each half message is checked (and,
once answered, committed) exactly once. Messages already delivered before the kill are not repeated."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.advanced.broker_session import COMMIT, standalone, WireClient, wait_for

TOPIC = "CrashT"
CONFIG = {
    "messageDelayLevel": "1s 3s 5s",
    "timerPrecisionMs": "100",
    "transactionTimeOut": "3000",
    "transactionCheckInterval": "300",
    "transactionCheckMax": "5",
    "flushConsumerOffsetInterval": "60000",  # the check progress must be saved by the check itself
}


@pytest.fixture
def broker(tmp_path):
    b = standalone(tmp_path, CONFIG)
    yield b
    if b.running:
        b.kill()


def bodies(client: WireClient) -> Counter:
    return Counter(m.body.decode() for m in client.drain(TOPIC))


def test_pending_work_survives_sigkill_exactly_once(broker):
    broker.start()
    with WireClient(broker.broker_addr) as c:
        # due before the kill: delay level 1 (1 s) and a 300 ms timer
        for i in range(3):
            assert c.send(TOPIC, f"early-delay-{i}".encode(), {"DELAY": "1"}).code == 0
            assert c.send(TOPIC, f"early-timer-{i}".encode(), {"TIMER_DELAY_MS": "300"}).code == 0
        # due after the restart: level 3 (5 s) and 5 s timers
        for i in range(3):
            assert c.send(TOPIC, f"late-delay-{i}".encode(), {"DELAY": "3"}).code == 0
            assert c.send(TOPIC, f"late-timer-{i}".encode(), {"TIMER_DELAY_MS": "5000"}).code == 0
        halves = {}
        for i in range(3):
            resp = c.send_half(TOPIC, f"half-{i}".encode(), "txg")
            assert resp.code == 0, resp.remark
            halves[resp.ext_fields["transactionId"]] = f"half-{i}"
        wait_for(lambda: sum(bodies(c).values()) >= 6, 8, "the early messages")
        early = bodies(c)
    assert sorted(early) == sorted([f"early-delay-{i}" for i in range(3)] + [f"early-timer-{i}" for i in range(3)])
    assert not any(k.startswith(("late", "half")) for k in early)
    broker.kill()  # nobody answered a check: no producer of txg was connected

    broker.start()
    answered = Counter()

    def on_check(seen):
        answered[seen.message.properties["UNIQ_KEY"]] += 1
        return COMMIT

    with WireClient(broker.broker_addr, on_check=on_check) as producer, WireClient(broker.broker_addr) as c:
        producer.register_producer("txg")
        expected = {f"{kind}-{i}" for kind in ("early-delay", "early-timer", "late-delay", "late-timer", "half")
                    for i in range(3)}
        wait_for(lambda: set(bodies(c)) >= expected, 20, "every message after the restart")
        time.sleep(1.5)  # several more check rounds, delay ticks and timer slots: nothing may repeat
        got = bodies(c)
        assert got == Counter({name: 1 for name in expected}), got
        assert {msg_id: n for msg_id, n in answered.items()} == {msg_id: 1 for msg_id in halves}
        committed = [m for m in c.drain(TOPIC) if m.body.startswith(b"half")]
        assert all(m.sys_flag & 0xC == COMMIT for m in committed)
    broker.stop()
