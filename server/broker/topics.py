"""The broker's topic table (topics.json), with Apache's system topics and auto-creation rules."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Callable

from ferrymq.wire import topics as names
from ferrymq.wire.bodies import DataVersion, TopicConfig, TopicConfigSerializeWrapper
from ferrymq.wire.codes import Perm

log = logging.getLogger("ferrymq.broker.topics")


@dataclass(slots=True)
class TopicDefaults:
    """The BrokerConfig keys that shape the initial table (Apache names and defaults)."""

    brokerName: str = "broker-a"
    brokerClusterName: str = "DefaultCluster"
    autoCreateTopicEnable: bool = True
    defaultTopicQueueNums: int = 8
    clusterTopicEnable: bool = True
    brokerTopicEnable: bool = True
    traceTopicEnable: bool = False
    msgTraceTopicName: str = names.TRACE_TOPIC
    reviveQueueNum: int = 8
    timerWheelEnable: bool = True


def _config(name: str, queues: int = 16, perm: int = Perm.READ | Perm.WRITE) -> TopicConfig:
    return TopicConfig(topic_name=name, read_queue_nums=queues, write_queue_nums=queues, perm=int(perm))


class TopicConfigManager:
    """Topic name -> TopicConfig, plus the data version the name server uses to skip unchanged tables.

    ``on_change`` is called with the created or updated config so that the broker can persist the
    table and register the topic with the name servers at once (as Apache does for auto-created topics).
    """

    def __init__(self, defaults: TopicDefaults | None = None, on_change: Callable[[TopicConfig | None], None] | None = None):
        self.defaults = defaults or TopicDefaults()
        self.table: dict[str, TopicConfig] = {}
        self.data_version = DataVersion()
        self.on_change = on_change
        self._init_system_topics()

    def _init_system_topics(self) -> None:
        d = self.defaults
        rw = Perm.READ | Perm.WRITE
        system = [_config(names.SELF_TEST_TOPIC, 1)]
        if d.autoCreateTopicEnable:
            system.append(_config(names.AUTO_CREATE_TOPIC, d.defaultTopicQueueNums, Perm.INHERIT | rw))
        system.append(_config(names.BENCHMARK_TOPIC, 1024))
        system.append(_config(d.brokerClusterName, 16, Perm.INHERIT | (rw if d.clusterTopicEnable else 0)))
        system.append(_config(d.brokerName, 1, Perm.INHERIT | (rw if d.brokerTopicEnable else 0)))
        system.append(_config(names.OFFSET_MOVED_EVENT, 1))
        system.append(_config(names.SCHEDULE_TOPIC, names.SCHEDULE_TOPIC_QUEUE_NUM))
        if d.traceTopicEnable:
            system.append(_config(d.msgTraceTopicName, 1))
        system.append(_config(f"{d.brokerClusterName}_{names.REPLY_TOPIC_POSTFIX}", 1))
        system.append(_config(names.REVIVE_TOPIC_PREFIX + d.brokerClusterName, d.reviveQueueNum))
        system.append(_config(names.SYNC_BROKER_MEMBER_PREFIX + d.brokerName, 1, Perm.INHERIT))
        system.append(_config(names.TRANS_HALF_TOPIC, 1))
        system.append(_config(names.TRANS_OP_HALF_TOPIC, 1))
        if d.timerWheelEnable:
            system.append(_config(names.TIMER_TOPIC, 1))
        for config in system:
            self.table[config.topic_name] = config

    # ------------------------------------------------------------------ queries

    def get(self, topic: str) -> TopicConfig | None:
        return self.table.get(topic)

    def __contains__(self, topic: str) -> bool:
        return topic in self.table

    def wrapper(self) -> TopicConfigSerializeWrapper:
        return TopicConfigSerializeWrapper(topic_config_table=dict(self.table), data_version=self.data_version)

    # ------------------------------------------------------------------ changes

    def _changed(self, config: TopicConfig | None) -> None:
        self.data_version = DataVersion(
            counter=self.data_version.counter + 1, state_version=self.data_version.state_version
        )
        if self.on_change is not None:
            self.on_change(config)

    def update(self, config: TopicConfig) -> None:
        """Create or replace a topic (UPDATE_AND_CREATE_TOPIC)."""
        old = self.table.get(config.topic_name)
        self.table[config.topic_name] = config
        log.info("%s topic %s: %s", "updated" if old else "created", config.topic_name, config)
        self._changed(config)

    def next_version(self, state_version: int) -> None:
        """A new data version stamped ``state_version`` (Apache's nextVersion(stateVersion)), with the table
        unchanged: a controller-mode broker's master epoch, which the name server compares."""
        self.data_version = DataVersion(counter=self.data_version.counter + 1, state_version=state_version)

    def replace_all(self, table: dict[str, TopicConfig], data_version: DataVersion) -> None:
        """A slave's copy of its master's table (SlaveSynchronize): the master's topics and data version."""
        self.table = dict(table)
        self.data_version = data_version
        if self.on_change is not None:
            self.on_change(None)

    def delete(self, topic: str) -> TopicConfig | None:
        old = self.table.pop(topic, None)
        if old is not None:
            log.info("deleted topic %s", topic)
            self._changed(None)
        return old

    def create_in_send(self, topic: str, default_topic: str, client_queue_nums: int, topic_sys_flag: int = 0, remote: str = "") -> TopicConfig | None:
        """Auto-create ``topic`` from its template on first send, or None when the template forbids it."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        template = self.table.get(default_topic)
        if template is None:
            log.warning("cannot create topic %s for %s: default topic %s does not exist", topic, remote, default_topic)
            return None
        perm = template.perm
        if default_topic == names.AUTO_CREATE_TOPIC and not self.defaults.autoCreateTopicEnable:
            perm = Perm.READ | Perm.WRITE
        if not perm & Perm.INHERIT:
            log.warning(
                "cannot create topic %s for %s: default topic %s lacks the inherit permission (perm %d)",
                topic, remote, default_topic, perm,
            )
            return None
        queues = max(0, min(client_queue_nums, template.write_queue_nums))
        config = TopicConfig(
            topic_name=topic,
            read_queue_nums=queues,
            write_queue_nums=queues,
            perm=int(perm & ~Perm.INHERIT),
            topic_filter_type=template.topic_filter_type,
            topic_sys_flag=topic_sys_flag,
        )
        self.table[topic] = config
        log.info("auto-created topic %s from %s for %s: %d queues", topic, default_topic, remote, queues)
        self._changed(config)
        return config

    def create_if_absent(self, topic: str, queue_nums: int, perm: int = Perm.READ | Perm.WRITE, topic_sys_flag: int = 0) -> TopicConfig:
        """Create a broker-owned topic (retry, DLQ, transaction check) the first time it is needed."""
        existing = self.table.get(topic)
        if existing is not None:
            return existing
        config = TopicConfig(
            topic_name=topic, read_queue_nums=queue_nums, write_queue_nums=queue_nums, perm=int(perm), topic_sys_flag=topic_sys_flag
        )
        self.table[topic] = config
        log.info("created topic %s with %d queues", topic, queue_nums)
        self._changed(config)
        return config

    # ------------------------------------------------------------------ persistence

    def to_json_obj(self) -> dict:
        return self.wrapper().to_json()

    def load_json_obj(self, obj: dict) -> None:
        """Merge a persisted topics.json over the system topics (user changes to them win)."""
        wrapper = TopicConfigSerializeWrapper.from_json(obj)
        self.table.update(wrapper.topic_config_table)
        self.data_version = wrapper.data_version
