"""The slave's metadata schedule (server/ha/slave_sync.py), against a master answering from tables in memory."""

from __future__ import annotations

from types import SimpleNamespace

from ferrymq.server.broker.offsets import ConsumerOffsetManager
from ferrymq.server.broker.subscriptions import SubscriptionGroupManager
from ferrymq.server.broker.topics import TopicConfigManager
from ferrymq.server.ha.slave_sync import FULL_SYNC_INTERVAL_S, SYNC_INTERVAL_S, SlaveSynchronize
from ferrymq.wire import fastjson
from ferrymq.wire.bodies import DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper, TopicConfig
from ferrymq.wire.bodies import TopicConfigSerializeWrapper
from ferrymq.wire.codes import RequestCode
from twisted.internet import defer, task


class Master(SlaveSynchronize):
    """A slave whose master is tables in memory: the admin answers the master's broker would give."""

    def __init__(self, clock: task.Clock):
        ctx = SimpleNamespace(topics=TopicConfigManager(), groups=SubscriptionGroupManager(auto_create=False),
                              offsets=ConsumerOffsetManager(), scheduler=SimpleNamespace(offsets={}, persist=lambda: None))
        super().__init__(ctx, clock, persist_offsets=lambda: None)
        self.topics: dict[str, TopicConfig] = {}
        self.groups: dict[str, SubscriptionGroupConfig] = {}
        self.offsets: dict[str, dict[str, int]] = {}
        self.version = DataVersion(timestamp=1)
        self.asked: list[int] = []

    async def _call(self, addr, code, ext=None):
        self.asked.append(code)
        if code == RequestCode.GET_ALL_TOPIC_CONFIG:
            body = TopicConfigSerializeWrapper(topic_config_table=self.topics, data_version=self.version).encode()
        elif code == RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG:
            body = SubscriptionGroupWrapper(subscription_group_table=self.groups, data_version=self.version).encode()
        elif code == RequestCode.GET_ALL_CONSUMER_OFFSET:
            body = fastjson.dumps({"offsetTable": self.offsets})
        else:
            body = fastjson.dumps({"offsetTable": {}})
        return SimpleNamespace(body=body, ext=lambda _name: None)

    def look(self, seconds: float) -> list[int]:
        """What the slave asked in the next ``seconds``."""
        self.asked = []
        self.reactor.advance(seconds)
        return self.asked

    def changed(self) -> None:
        self.version = DataVersion(counter=self.version.counter + 1, timestamp=1)


TABLES = [RequestCode.GET_ALL_CONSUMER_OFFSET, RequestCode.GET_ALL_TOPIC_CONFIG,
          RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, RequestCode.GET_ALL_DELAY_OFFSET]
OFFSETS_ONLY = [RequestCode.GET_ALL_CONSUMER_OFFSET, RequestCode.GET_ALL_DELAY_OFFSET]


def test_every_table_at_once_then_offsets_every_look_and_everything_once_a_minute():
    clock = task.Clock()
    slave = Master(clock)
    slave.set_master_addr("127.0.0.1:10911")
    assert slave.asked == TABLES  # the first round: as soon as the master is known
    assert slave.look(SYNC_INTERVAL_S) == OFFSETS_ONLY
    looks = int(FULL_SYNC_INTERVAL_S // SYNC_INTERVAL_S)
    asked = [slave.look(SYNC_INTERVAL_S) for _ in range(looks - 1)]
    assert asked[:-1] == [OFFSETS_ONLY] * (looks - 2) and asked[-1] == TABLES
    slave.stop()


def test_a_replicated_topic_or_an_offset_of_an_unknown_group_brings_its_table_at_the_next_look():
    clock = task.Clock()
    slave = Master(clock)
    slave.set_master_addr("127.0.0.1:10911")
    slave.topics["Fresh"] = TopicConfig(topic_name="Fresh")
    slave.changed()
    slave.replicated("Fresh", 0, 1, None, 0)
    assert slave.look(SYNC_INTERVAL_S) == [*OFFSETS_ONLY[:1], RequestCode.GET_ALL_TOPIC_CONFIG, *OFFSETS_ONLY[1:]]
    assert "Fresh" in slave.ctx.topics.table
    slave.replicated("Fresh", 0, 2, None, 0)  # known now: nothing more to ask
    assert slave.look(SYNC_INTERVAL_S) == OFFSETS_ONLY

    slave.groups["late-group"] = SubscriptionGroupConfig(group_name="late-group")
    slave.offsets = {"Fresh@late-group": {"0": 7}}
    slave.changed()
    assert slave.look(SYNC_INTERVAL_S) == [*OFFSETS_ONLY[:1], RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG,
                                           *OFFSETS_ONLY[1:]]
    assert "late-group" in slave.ctx.groups.table
    # a name the master does not know either is asked about once, not at every look
    slave.replicated("Nowhere", 0, 1, None, 0)
    assert RequestCode.GET_ALL_TOPIC_CONFIG in slave.look(SYNC_INTERVAL_S)
    slave.replicated("Nowhere", 0, 2, None, 0)
    assert slave.look(SYNC_INTERVAL_S) == OFFSETS_ONLY
    slave.stop()
