"""Producer and consumer tables fed by HEART_BEAT, as Apache's ProducerManager and ConsumerManager.

A client is known by its channel (one TCP connection). It stays registered while it heartbeats;
a channel silent for ``channelExpiredTimeout`` (120 s) or closed is dropped. Consumer groups notify
their members (NOTIFY_CONSUMER_IDS_CHANGED) when membership changes so they rebalance at once.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Hashable

#: Apache's ``channelExpiredTimeout``.
CHANNEL_EXPIRED_TIMEOUT_MS = 120_000


@dataclass(slots=True)
class ClientChannelInfo:
    channel: Hashable
    client_id: str
    language: Any
    version: int
    last_update_ms: int
    #: ``ip:port`` of the client as the broker sees it.
    client_addr: str = ""


@dataclass
class ConsumerGroupInfo:
    group: str
    consume_type: str
    message_model: str
    consume_from_where: str
    channels: dict[Hashable, ClientChannelInfo] = field(default_factory=dict)
    #: topic -> SubscriptionData (from the heartbeat body).
    subscriptions: dict[str, Any] = field(default_factory=dict)
    last_update_ms: int = 0

    def client_ids(self) -> list[str]:
        return [info.client_id for info in self.channels.values()]

    def update_subscriptions(self, subscriptions: list[Any]) -> bool:
        """Replace the table by what the last heartbeat says; True when anything changed.

        A subscription only replaces an existing one with a newer ``sub_version``, so a stale
        heartbeat from a second member cannot roll a subscription back.
        """
        changed = False
        seen = set()
        for sub in subscriptions:
            seen.add(sub.topic)
            old = self.subscriptions.get(sub.topic)
            if old is None or sub.sub_version > old.sub_version:
                changed = changed or old is None or old.sub_string != sub.sub_string
                self.subscriptions[sub.topic] = sub
        for topic in [t for t in self.subscriptions if t not in seen]:
            del self.subscriptions[topic]
            changed = True
        return changed


class ConsumerManager:
    def __init__(
        self,
        on_ids_changed: Callable[[str, list[Hashable]], None] | None = None,
        clock: Callable[[], float] = time.time,
        channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS,
        on_group_emptied: Callable[[str], None] | None = None,
    ):
        self.groups: dict[str, ConsumerGroupInfo] = {}
        self._on_ids_changed = on_ids_changed
        #: Called with a group's name when its last consumer leaves (its SQL92 filters die then).
        self.on_group_emptied = on_group_emptied
        self._clock = clock
        self.channel_expired_timeout_ms = channel_expired_timeout_ms

    def _now(self) -> int:
        return int(self._clock() * 1000)

    def register(
        self,
        group: str,
        info: ClientChannelInfo,
        consume_type: str,
        message_model: str,
        consume_from_where: str,
        subscriptions: list[Any],
        notify: bool = True,
    ) -> bool:
        """Record a consumer heartbeat; True when the group's members or subscribed topics changed.

        Members are notified (when ``notify``, the group config's notifyConsumerIdsChangedEnable) on
        either change, as Apache does, so they rebalance at once.
        """
        now = self._now()
        group_info = self.groups.get(group)
        if group_info is None:
            group_info = self.groups[group] = ConsumerGroupInfo(group, consume_type, message_model, consume_from_where)
        group_info.consume_type = consume_type
        group_info.message_model = message_model
        group_info.consume_from_where = consume_from_where
        group_info.last_update_ms = now
        info.last_update_ms = now
        old = group_info.channels.get(info.channel)
        group_info.channels[info.channel] = info
        members_changed = old is None or old.client_id != info.client_id
        subs_changed = group_info.update_subscriptions(subscriptions)
        if (members_changed or subs_changed) and notify:
            self._notify(group_info)
        return members_changed or subs_changed

    def unregister(self, group: str, channel: Hashable, notify: bool = True) -> None:
        group_info = self.groups.get(group)
        if group_info is None or group_info.channels.pop(channel, None) is None:
            return
        if not group_info.channels:
            del self.groups[group]
            if self.on_group_emptied is not None:
                self.on_group_emptied(group)
        elif notify:
            self._notify(group_info)

    def channel_closed(self, channel: Hashable) -> None:
        for group in [g for g, info in self.groups.items() if channel in info.channels]:
            self.unregister(group, channel)

    def scan_expired(self) -> list[ClientChannelInfo]:
        now = self._now()
        expired = []
        for group, info in list(self.groups.items()):
            for channel, client in list(info.channels.items()):
                if now - client.last_update_ms > self.channel_expired_timeout_ms:
                    expired.append(client)
                    self.unregister(group, channel)
        return expired

    def _notify(self, group_info: ConsumerGroupInfo) -> None:
        if self._on_ids_changed is not None and group_info.channels:
            self._on_ids_changed(group_info.group, list(group_info.channels))

    def find_subscription(self, group: str, topic: str) -> Any | None:
        info = self.groups.get(group)
        return None if info is None else info.subscriptions.get(topic)

    def get(self, group: str) -> ConsumerGroupInfo | None:
        return self.groups.get(group)

    def client_ids(self, group: str) -> list[str]:
        info = self.groups.get(group)
        return [] if info is None else info.client_ids()

    def groups_of_topic(self, topic: str) -> list[str]:
        return [g for g, info in self.groups.items() if topic in info.subscriptions]


class ProducerManager:
    def __init__(
        self,
        clock: Callable[[], float] = time.time,
        channel_expired_timeout_ms: int = CHANNEL_EXPIRED_TIMEOUT_MS,
    ):
        self.groups: dict[str, dict[Hashable, ClientChannelInfo]] = {}
        self._clock = clock
        self.channel_expired_timeout_ms = channel_expired_timeout_ms

    def register(self, group: str, info: ClientChannelInfo) -> None:
        info.last_update_ms = int(self._clock() * 1000)
        self.groups.setdefault(group, {})[info.channel] = info

    def unregister(self, group: str, channel: Hashable) -> None:
        channels = self.groups.get(group)
        if channels is not None:
            channels.pop(channel, None)
            if not channels:
                del self.groups[group]

    def channel_closed(self, channel: Hashable) -> None:
        for group in [g for g, chans in self.groups.items() if channel in chans]:
            self.unregister(group, channel)

    def scan_expired(self) -> list[ClientChannelInfo]:
        now = int(self._clock() * 1000)
        expired = []
        for group, channels in list(self.groups.items()):
            for channel, client in list(channels.items()):
                if now - client.last_update_ms > self.channel_expired_timeout_ms:
                    expired.append(client)
                    self.unregister(group, channel)
        return expired

    def connections(self, group: str) -> list[ClientChannelInfo]:
        return list(self.groups.get(group, {}).values())

    def any_channel(self, group: str) -> Hashable | None:
        """A live producer channel of ``group`` (used for transaction check-back)."""
        channels = self.groups.get(group)
        if not channels:
            return None
        return max(channels.values(), key=lambda c: c.last_update_ms).channel
