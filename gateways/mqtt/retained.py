"""Retained messages: the last message published with RETAIN on each MQTT topic (spec 3.3.1.3).

A retained PUBLISH is also an ordinary RocketMQ message on its topic (carrying the ``mqttRetain``
property): RocketMQ consumers and current subscribers get it as any other. The gateway keeps, besides,
the last one per MQTT topic as the RocketMQ message it stored (topic, properties, body), so a new
subscription receives it through the same :func:`~.mapping.to_delivery` as a live message (what is left
of its expiry interval included). An empty payload clears the topic's retained message.

Messages are kept by their RocketMQ topic (the MQTT topic's first level) first: a filter's first level is
never a wildcard here (:func:`~.mapping.subscription`), so a SUBSCRIBE looks only at its own topic's.
"""

from __future__ import annotations

from collections.abc import Iterator

from ferrymq.sdk.message import Message

from . import mapping, topics


class RetainedMessages:
    """The retained message of each MQTT topic, by RocketMQ topic then MQTT topic name."""

    def __init__(self) -> None:
        self._by_topic: dict[str, dict[str, Message]] = {}

    def __len__(self) -> int:
        return sum(len(names) for names in self._by_topic.values())

    def __iter__(self) -> Iterator[Message]:
        for names in self._by_topic.values():
            yield from names.values()

    def get(self, topic_name: str) -> Message | None:
        first = topic_name.partition("/")[0]
        return self._by_topic.get(first, {}).get(topic_name)

    def set(self, message: Message) -> str:
        """Keep ``message`` (a stored RocketMQ message a device published with RETAIN) as its MQTT topic's
        retained message, or clear that when its body is empty; the MQTT topic name."""
        topic_name = mapping.mqtt_topic(message.topic, message.properties)
        if message.body:
            self._by_topic.setdefault(message.topic, {})[topic_name] = message
        else:
            names = self._by_topic.get(message.topic, {})
            names.pop(topic_name, None)
            if not names:
                self._by_topic.pop(message.topic, None)
        return topic_name

    def matching(self, topic_filter: str) -> list[Message]:
        """The retained messages whose MQTT topic matches ``topic_filter`` (valid, not shared)."""
        names = self._by_topic.get(topic_filter.partition("/")[0], {})
        if not topics.has_wildcard(topic_filter):
            found = names.get(topic_filter)
            return [] if found is None else [found]
        return [message for name, message in names.items() if topics.matches(topic_filter, name)]


__all__ = ["RetainedMessages"]
