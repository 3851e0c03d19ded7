"""Processors over a real MessageStore in a temp dir, wired by the broker's own ``build_broker``, driven
without sockets.

``bk.call(code, ext, body)`` runs the request through the same dispatch the transport uses and
returns the response (or the still-pending Deferred of a held pull); time is a ``task.Clock``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from twisted.internet import task

from ferrymq.server.broker.wiring import build_broker
from ferrymq.server.config import BrokerConfig
from ferrymq.remoting import dispatch
from ferrymq.remoting.pending import PROMISES
from ferrymq.server.store.config import MessageStoreConfig
from ferrymq.server.store.message_store import MessageStore
from ferrymq.wire.bodies import ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from ferrymq.wire.codes import CURRENT_VERSION, LanguageCode, RequestCode
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.headers import SendMessageRequestHeader
from ferrymq.wire.message import encode_properties, java_string_hash


@dataclass(eq=False)
class FakeChannel:
    """What processors see of a connection: an address, oneway sends, close hooks."""

    remote_address: str = "127.0.0.1:50001"
    sent: list = field(default_factory=list)
    closers: list = field(default_factory=list)
    is_active: bool = True

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        self.sent.append(cmd)

    def on_close(self, cb) -> None:
        self.closers.append(cb)

    def close(self) -> None:
        self.is_active = False
        for cb in self.closers:
            cb(self)


class Bk:
    def __init__(self, tmp_path, **config):
        self.clock = task.Clock()
        self.config = BrokerConfig(brokerName="broker-a", brokerClusterName="DefaultCluster",
                                   storePathRootDir=str(tmp_path), brokerIP1="127.0.0.1", **config)
        self.store = MessageStore(MessageStoreConfig(
            storePathRootDir=str(tmp_path), mappedFileSizeCommitLog=1 << 20, mappedFileSizeConsumeQueue=20 * 64,
            storeHost="127.0.0.1:10911", maxHashSlotNum=64, maxIndexNum=256,
        ))
        self.store.start()
        self.notified: list[tuple[str, int]] = []
        #: shifts the wall clock of the delay, timer and transaction services (they go by store/born time)
        self.later_ms = 0
        parts = build_broker(self.config, self.store, self.clock, store_host=("127.0.0.1", 10911), wall=self.wall,
                             on_ids_changed=self._ids_changed)
        self.ctx, self.table = parts.ctx, parts.table
        self.channel = FakeChannel()

    def wall(self) -> float:
        return time.time() + self.later_ms / 1000

    def _ids_changed(self, group, channels):
        self.notified.append((group, len(channels)))

    def call(self, code: int, ext: dict | None = None, body: bytes = b"", channel: Any = None,
             version: int = CURRENT_VERSION, language=LanguageCode.JAVA) -> Any:
        cmd = request(code, {k: str(v) for k, v in (ext or {}).items()}, body, language=language)
        cmd.version = version
        d = dispatch(self.table, cmd, channel or self.channel)
        if not isinstance(d, PROMISES):
            return d
        results = []

        def keep(r):
            results.append(r)
            return r

        d.addCallback(keep)
        return results[0] if results else d

    def send(self, topic: str, body: bytes = b"hello", tags: str | None = None, queue_id: int = 0,
             keys: str | None = None, code: int = RequestCode.SEND_MESSAGE_V2, extra_props: dict | None = None,
             **header) -> RemotingCommand:
        props = {}
        if tags:
            props["TAGS"] = tags
        if keys:
            props["KEYS"] = keys
        props.update(extra_props or {})
        h = SendMessageRequestHeader(
            producer_group="pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
            sys_flag=0, born_timestamp=int(time.time() * 1000), flag=0, properties=encode_properties(props), **header,
        )
        ext = h.to_ext_v2() if code != RequestCode.SEND_MESSAGE else h.to_ext()
        return self.call(code, ext, body)

    def heartbeat(self, group: str, topic: str, sub: str = "*", channel: Any = None, client_id: str = "c1",
                  model: str = "CLUSTERING", sub_version: int = 1) -> RemotingCommand:
        tags = [t.strip() for t in sub.split("||")] if sub != "*" else []
        data = HeartbeatData(
            client_id=client_id,
            consumer_data_set=[ConsumerData(
                group_name=group, consume_type="CONSUME_PASSIVELY", message_model=model,
                consume_from_where="CONSUME_FROM_LAST_OFFSET",
                subscription_data_set=[SubscriptionData(topic=topic, sub_string=sub, tags_set=tags,
                                                        code_set=[java_string_hash(t) for t in tags],
                                                        sub_version=sub_version)],
            )],
            producer_data_set=[ProducerData(group_name="pg")],
        )
        return self.call(RequestCode.HEART_BEAT, None, data.encode(), channel=channel)

    def pull(self, group: str, topic: str, queue_id: int = 0, offset: int = 0, max_nums: int = 32,
             sys_flag: int = 0, suspend_ms: int = 15000, subscription: str | None = None, commit_offset: int = 0,
             sub_version: int = 0, channel: Any = None, **extra):
        ext = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
               "maxMsgNums": max_nums, "sysFlag": sys_flag, "commitOffset": commit_offset,
               "suspendTimeoutMillis": suspend_ms, "subVersion": sub_version, **extra}
        if subscription is not None:
            ext["subscription"] = subscription
        return self.call(RequestCode.PULL_MESSAGE, ext, channel=channel)

    def close(self):
        self.store.shutdown()


@pytest.fixture
def bk(tmp_path):
    b = Bk(tmp_path)
    yield b
    b.close()


@pytest.fixture
def make_bk(tmp_path):
    made = []

    def make(**config):
        b = Bk(tmp_path / f"b{len(made)}", **config)
        made.append(b)
        return b

    yield make
    for b in made:
        b.close()
