"""Retained messages with paho devices over TCP: each scenario on mosquitto first, then FerryMQ."""

from __future__ import annotations

import uuid

import pytest

from .devices import V5, V311, Device

pytestmark = pytest.mark.timeout(120)


def _topic() -> str:
    return f"Mqtt_{uuid.uuid4().hex[:10]}"


def _received(device: Device, n: int) -> list[tuple[str, bytes, int, bool]]:
    return sorted((m.topic, m.payload, m.qos, bool(m.retain)) for m in device.receive(n))


@pytest.mark.parametrize("version", [V311, V5])
def test_retained_messages_are_set_replaced_cleared_and_matched_by_wildcards(brokers, version):
    for name, port in brokers:
        topic = _topic()
        publisher, live = Device(port, version), Device(port, version)
        late = exact = None
        try:
            live.subscribe(f"{topic}/#")
            for leaf, payload in (("a", b"first"), ("a", b"second"), ("b/x", b"b"), ("c", b"c"), ("c", b"")):
                publisher.publish(f"{topic}/{leaf}", payload, 1, retain=True)
            # subscribers already there get them as ordinary messages: RETAIN 0 (the empty one, which
            # only clears, reaches them on mosquitto; RocketMQ stores no empty message)
            assert {m[3] for m in _received(live, 4)} == {False}, name
            late = Device(port, version)
            late.subscribe(f"{topic}/#", qos=2)
            assert _received(late, 2) == [(f"{topic}/a", b"second", 1, True), (f"{topic}/b/x", b"b", 1, True)], name
            exact = Device(port, version)
            exact.subscribe(f"{topic}/+", qos=0)
            assert _received(exact, 1) == [(f"{topic}/a", b"second", 0, True)], name
            for device in (late, exact):
                device.nothing_more(0.3)
        finally:
            for device in filter(None, (publisher, live, late, exact)):
                device.close()


def test_retain_handling_and_retain_as_published(brokers):
    for name, port in brokers:
        topic = _topic()
        publisher = Device(port, V5)
        always, if_new, never, as_published = (Device(port, V5) for _ in range(4))
        try:
            publisher.publish(f"{topic}/a", b"kept", 1, retain=True)
            always.subscribe(f"{topic}/#", retain_handling=0)
            always.subscribe(f"{topic}/#", retain_handling=0)  # again: sent again
            assert _received(always, 2) == [(f"{topic}/a", b"kept", 1, True)] * 2, name
            if_new.subscribe(f"{topic}/+", retain_handling=1)
            if_new.subscribe(f"{topic}/+", retain_handling=1)  # not new: not sent again
            assert _received(if_new, 1) == [(f"{topic}/a", b"kept", 1, True)], name
            never.subscribe(f"{topic}/#", retain_handling=2)
            as_published.subscribe(f"{topic}/#", retain_as_published=True, retain_handling=2)
            for device in (if_new, never, as_published):
                device.nothing_more(0.3)
            publisher.publish(f"{topic}/a", b"live", 1, retain=True)
            publisher.publish(f"{topic}/b", b"plain", 1)
            assert _received(as_published, 2) == [(f"{topic}/a", b"live", 1, True),
                                                  (f"{topic}/b", b"plain", 1, False)], name
            assert _received(never, 2) == [(f"{topic}/a", b"live", 1, False), (f"{topic}/b", b"plain", 1, False)], name
        finally:
            for device in (publisher, always, if_new, never, as_published):
                device.close()
