from dataclasses import dataclass

from ferrymq.server.broker.clients import ClientChannelInfo, ConsumerManager, ProducerManager


@dataclass
class Sub:
    topic: str
    sub_string: str
    sub_version: int


class Clock:
    now = 1000.0

    def __call__(self):
        return self.now


def info(channel, cid):
    return ClientChannelInfo(channel=channel, client_id=cid, language="JAVA", version=479, last_update_ms=0)


def test_members_joining_and_leaving_notify_the_group():
    notices = []
    m = ConsumerManager(on_ids_changed=lambda g, chans: notices.append((g, sorted(chans))), clock=Clock())
    args = ("CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    assert m.register("g", info("ch1", "c1"), *args, [Sub("T", "*", 1)])
    assert not m.register("g", info("ch1", "c1"), *args, [Sub("T", "*", 1)])  # plain heartbeat
    assert m.register("g", info("ch2", "c2"), *args, [Sub("T", "*", 1)])
    assert m.client_ids("g") == ["c1", "c2"]
    m.channel_closed("ch1")
    assert m.client_ids("g") == ["c2"]
    assert notices == [("g", ["ch1"]), ("g", ["ch1", "ch2"]), ("g", ["ch2"])]
    m.unregister("g", "ch2")
    assert m.get("g") is None


def test_subscriptions_follow_the_newest_version_and_expire_with_the_channel():
    clock = Clock()
    m = ConsumerManager(clock=clock)
    args = ("CONSUME_PASSIVELY", "CLUSTERING", "CONSUME_FROM_LAST_OFFSET")
    m.register("g", info("ch1", "c1"), *args, [Sub("T", "TagA", 5)])
    m.register("g", info("ch2", "c2"), *args, [Sub("T", "TagB", 4)])  # older version: ignored
    assert m.find_subscription("g", "T").sub_string == "TagA"
    m.register("g", info("ch2", "c2"), *args, [Sub("T", "TagB", 6)])
    assert m.find_subscription("g", "T").sub_string == "TagB"
    assert m.groups_of_topic("T") == ["g"]
    clock.now += 121
    expired = m.scan_expired()
    assert {e.client_id for e in expired} == {"c1", "c2"}
    assert m.find_subscription("g", "T") is None


def test_producer_table():
    clock = Clock()
    p = ProducerManager(clock=clock)
    p.register("pg", info("ch1", "c1"))
    clock.now += 1
    p.register("pg", info("ch2", "c2"))
    assert p.any_channel("pg") == "ch2"
    assert [c.client_id for c in p.connections("pg")] == ["c1", "c2"]
    p.channel_closed("ch2")
    assert p.any_channel("pg") == "ch1"
    clock.now += 200
    assert [c.client_id for c in p.scan_expired()] == ["c1"]
    assert p.connections("pg") == []
