"""Subscription group configs (subscriptionGroup.json), as Apache's SubscriptionGroupManager keeps them.

A group's config says whether it may consume, how many retry queues it has and how many times a
message is retried before the DLQ. Any valid unknown group gets Apache's defaults the first time it
shows up (``autoCreateSubscriptionGroup``), so clients never have to create groups by hand.
"""

from __future__ import annotations

import logging
from typing import Callable

from ferrymq.wire import topics as names
from ferrymq.wire.bodies import DataVersion, SubscriptionGroupConfig, SubscriptionGroupWrapper

log = logging.getLogger("ferrymq.broker.groups")


def is_sys_consumer_group(group: str) -> bool:
    return group.startswith(names.SYS_GROUP_PREFIX)


class SubscriptionGroupManager:
    """group name -> SubscriptionGroupConfig; ``on_change`` persists the table."""

    def __init__(self, auto_create: bool = True, on_change: Callable[[], None] | None = None):
        self.auto_create = auto_create
        self.on_change = on_change
        self.table: dict[str, SubscriptionGroupConfig] = {}
        self.data_version = DataVersion()
        for group in names.SYSTEM_GROUPS:
            config = SubscriptionGroupConfig(group_name=group)
            if group in (names.TOOLS_CONSUMER_GROUP, "FILTERSRV_CONSUMER", names.SELF_TEST_CONSUMER_GROUP):
                config.consume_broadcast_enable = True
            self.table[group] = config

    def _changed(self) -> None:
        self.data_version = DataVersion(self.data_version.counter + 1, self.data_version.state_version)
        if self.on_change is not None:
            self.on_change()

    def get(self, group: str) -> SubscriptionGroupConfig | None:
        """The config without auto-creation."""
        return self.table.get(group)

    def find(self, group: str) -> SubscriptionGroupConfig | None:
        """The config, auto-created with defaults when allowed and the name is legal (else None)."""
        config = self.table.get(group)
        if config is not None:
            return config
        if not (self.auto_create or is_sys_consumer_group(group)):
            return None
        if names.validate_group(group) is not None:
            return None
        config = SubscriptionGroupConfig(group_name=group)
        self.table[group] = config
        log.info("auto-created subscription group %s", group)
        self._changed()
        return config

    def update(self, config: SubscriptionGroupConfig) -> None:
        old = self.table.get(config.group_name)
        self.table[config.group_name] = config
        log.info("%s subscription group %s", "updated" if old else "created", config.group_name)
        self._changed()

    def replace_all(self, table: dict[str, SubscriptionGroupConfig], data_version: DataVersion) -> None:
        """A slave's copy of its master's table (SlaveSynchronize): the master's groups and data version."""
        self.table = dict(table)
        self.data_version = data_version
        if self.on_change is not None:
            self.on_change()

    def delete(self, group: str) -> SubscriptionGroupConfig | None:
        old = self.table.pop(group, None)
        if old is not None:
            log.info("deleted subscription group %s", group)
            self._changed()
        return old

    def wrapper(self) -> SubscriptionGroupWrapper:
        return SubscriptionGroupWrapper(subscription_group_table=dict(self.table), data_version=self.data_version)

    def to_json_obj(self) -> dict:
        return self.wrapper().to_json()

    def load_json_obj(self, obj: dict) -> None:
        wrapper = SubscriptionGroupWrapper.from_json(obj)
        self.table.update(wrapper.subscription_group_table)
        self.data_version = wrapper.data_version
