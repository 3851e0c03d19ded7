"""Every public method of every blocking facade, and of the parts reached through one (``admin.namesrv``,
``admin.api``), called against a running name server and broker: each returns a plain value or raises,
never hands back a Deferred. The methods are found by introspection, so a new one is called too (and
fails here until its arguments can be made from its parameter names)."""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from ferrymq.sdk import (
    BlockingMQAdmin,
    BlockingProducer,
    BlockingPullConsumer,
    BlockingPushConsumer,
)
from ferrymq.sdk.access_admin import acl_info
from ferrymq.sdk.blocking import BlockingAdmin
from ferrymq.sdk.blocking_clients import BlockingView
from ferrymq.sdk.errors import MQResponseError
from ferrymq.sdk.message import Message, PullStatus
from ferrymq.sdk.producer import LocalTransactionState
from ferrymq.wire.bodies import (
    HeartbeatData,
    MessageQueue,
    QueueData,
    SubscriptionData,
    SubscriptionGroupConfig,
)
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import request
from ferrymq.wire.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    PullMessageRequestHeader,
    QueryMessageRequestHeader,
    SendMessageRequestHeader,
)
from twisted.internet import defer

GROUP = "blocking_facades_group"
SCRATCH_TOPIC = "blocking_facades_scratch"  # what the delete calls delete

FACADES: dict[str, Callable[[str], BlockingView]] = {
    "BlockingProducer": lambda addr: BlockingProducer("blocking_facades_pg", addr),
    "BlockingPushConsumer": lambda addr: BlockingPushConsumer(GROUP, addr),
    "BlockingPullConsumer": lambda addr: BlockingPullConsumer("blocking_facades_pull", addr),
    "BlockingMQAdmin": lambda addr: BlockingMQAdmin(addr),
    "BlockingAdmin": lambda addr: BlockingAdmin(addr),
}
#: the parts a script calls, whose methods are called one by one here
PUBLIC_PARTS = {"BlockingMQAdmin": {"namesrv", "api", "access"}}
#: the clients' plumbing (route refresh, rebalancing, connections): views like any part, methods not called here
INTERNAL_PARTS = {"instance", "rebalancer", "offset_store", "reactor", "client"}
#: called first (a consumer subscribes and has a listener before it starts) and last
FIRST = ("subscribe", "register_listener", "start")
LAST = ("unsubscribe", "shutdown", "close")


def test_every_facade_is_covered():
    from ferrymq import sdk

    assert {name for name in sdk.__all__ if name.startswith("Blocking")} | {"BlockingAdmin"} == set(FACADES)


def test_a_part_of_the_admin_blocks(cluster):
    """``BlockingMQAdmin(...).namesrv.get_cluster_info()`` answers with the cluster, not a Deferred."""
    with BlockingMQAdmin(cluster.namesrv_addr) as admin:
        info = admin.namesrv.get_cluster_info()
        assert "broker-sdk" in info.broker_addr_table
        with pytest.raises(MQResponseError) as failure:
            admin.namesrv.get_route_info("no_such_topic_anywhere")
        assert failure.value.code == ResponseCode.TOPIC_NOT_EXIST
        assert isinstance(admin.api, BlockingView) and isinstance(admin.client, BlockingView)
        assert admin.namesrv.addr == cluster.namesrv_addr  # data is handed back as it is


class Arguments:
    """Values for the parameters without defaults, chosen by the parameter's annotation or name."""

    def __init__(self, cluster, topic: str):
        self.broker_addr = cluster.broker.addr
        self.topic = topic
        self.mq = MessageQueue(topic, "broker-sdk", 0)
        with BlockingProducer("blocking_facades_setup", cluster.namesrv_addr) as producer:
            producer.send(Message(topic, b"first"))
        with BlockingPullConsumer("blocking_facades_setup", cluster.namesrv_addr) as consumer:
            pulled = consumer.pull(self.mq, offset=0)
        assert pulled.status == PullStatus.FOUND
        self.received = pulled.messages[0]
        with BlockingMQAdmin(cluster.namesrv_addr) as admin:
            self.route = admin.fetch_route(topic)
        now_ms = int(time.time() * 1000)
        self.by_annotation: dict[str, Any] = {
            "MessageExt": self.received,
            "Message": Message(topic, b"blocking"),
            "Sequence[Message]": [Message(topic, b"one"), Message(topic, b"two")],
            "TopicRouteData": self.route,
            "QueueSelector": lambda mqs, msg, arg: mqs[0],
            "SubscriptionGroupConfig": SubscriptionGroupConfig(group_name=GROUP),
            "HeartbeatData": HeartbeatData(client_id="127.0.0.1@blocking"),
            "SendMessageRequestHeader": SendMessageRequestHeader(
                producer_group="blocking_facades_pg", topic=topic, default_topic="TBW102", default_topic_queue_nums=4,
                queue_id=0, sys_flag=0, born_timestamp=now_ms, flag=0),
            "PullMessageRequestHeader": PullMessageRequestHeader(GROUP, topic, 0, 0, 1, 0, 0, 0, 0),
            "QueryMessageRequestHeader": QueryMessageRequestHeader(topic, "k", 32, 0, now_ms + 60_000),
            "EndTransactionRequestHeader": EndTransactionRequestHeader(
                "blocking_facades_pg", 0, self.received.commitlog_offset, 0, self.received.msg_id),
        }
        self.by_name: dict[str, Any] = {
            "addr": self.broker_addr, "topic": topic, "mq": self.mq, "mqs": [self.mq], "group": GROUP,
            "broker_name": "broker-sdk", "cluster": "DefaultCluster", "client_id": "127.0.0.1@blocking",
            "offset": 0, "offsets": {self.mq: 0}, "delay_level": 1, "timestamp_ms": now_ms,
            "namespace": "blocking_facades", "key": "k", "value": "v", "settings": {},
            "queue_datas": [QueueData("broker-sdk", 1, 1, 6)], "sub": SubscriptionData(topic, "*"),
            "commitlog_offset": self.received.commitlog_offset, "origin_msg_id": self.received.msg_id,
            "offset_msg_id": self.received.msg_id, "msg_id": self.received.msg_id, "msg": self.received,
            "origin_topic": topic, "max_reconsume_times": 16, "timeout": 3.0, "body": b"raw",
            "execute": lambda msg, arg: LocalTransactionState.COMMIT_MESSAGE, "listener": lambda msgs, context: None,
            "username": "blocking_user", "password": "blocking-pw", "subject": "User:blocking_user",
            "acl": acl_info("User:blocking_user", [f"Topic:{topic}"], ["Pub"], None, "Allow"),
        }
        self.by_method: dict[tuple[str, str], tuple] = {
            ("NamesrvAdmin", "call"): (request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER),),
            ("BrokerAPI", "call"): (self.broker_addr, request(RequestCode.GET_BROKER_RUNTIME_INFO)),
            ("NamesrvAdmin", "delete_topic"): (SCRATCH_TOPIC,),
            ("BrokerAPI", "delete_topic"): (self.broker_addr, SCRATCH_TOPIC),
            ("NamesrvAdmin", "wipe_write_perm"): ("no-such-broker",),  # the test cluster's broker keeps writing
            ("NamesrvAdmin", "add_write_perm"): ("no-such-broker",),
            ("Producer", "end_transaction"): (
                topic, "broker-sdk", self.received.msg_id, None, self.received.msg_id, self.received.queue_offset,
                LocalTransactionState.ROLLBACK_MESSAGE),
            ("Producer", "check_transaction_state"): (
                self.broker_addr, CheckTransactionStateRequestHeader(0, self.received.commitlog_offset),
                self.received),
        }

    def for_call(self, owner: str, method: Callable[..., Any]) -> tuple:
        if (owner, method.__name__) in self.by_method:
            return self.by_method[owner, method.__name__]
        args = []
        for param in inspect.signature(method).parameters.values():
            if param.default is not param.empty or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if param.annotation in self.by_annotation:
                args.append(self.by_annotation[param.annotation])
            elif param.name in self.by_name:
                args.append(self.by_name[param.name])
            else:
                pytest.fail(f"{owner}.{method.__name__}: no value for parameter {param.name!r} ({param.annotation}); "
                            "add one to Arguments")
        return tuple(args)


def _public(view: BlockingView) -> list[str]:
    return [name for name in dir(view) if not name.startswith("_") and name != "wrapped"]


def _call_order(names: list[str]) -> list[str]:
    rank = {name: i for i, name in enumerate(FIRST)} | {name: 100 + i for i, name in enumerate(LAST)}
    return sorted(names, key=lambda name: (rank.get(name, 50), name))


@pytest.mark.parametrize("facade", FACADES)
def test_every_method_blocks(facade, cluster, topic):
    arguments = Arguments(cluster, topic)
    view = FACADES[facade](cluster.namesrv_addr)
    parts = {name for name in _public(view) if isinstance(getattr(view, name), BlockingView)}
    assert parts <= PUBLIC_PARTS.get(facade, set()) | INTERNAL_PARTS, "a new part: add it to one of the two sets"
    calls = [(part, getattr(view, part)) for part in sorted(PUBLIC_PARTS.get(facade, ()))] + [("", view)]
    outcomes = {}
    for path, owner in calls:
        methods = [name for name in _public(owner) if callable(getattr(owner, name))]
        for name in _call_order(methods):
            method = getattr(owner, name)
            label = f"{facade}.{path + '.' if path else ''}{name}"
            args = arguments.for_call(type(owner.wrapped).__name__, method)
            try:
                result = method(*args)
            except TypeError as exc:  # the arguments made here are wrong: the call proves nothing
                pytest.fail(f"{label}{args}: {exc}")
            except Exception as exc:  # noqa: BLE001 - an error raised is a blocking answer too
                outcomes[label] = exc
                continue
            assert not isinstance(result, (defer.Deferred, Coroutine)), f"{label} returned {result!r}"
            outcomes[label] = result
    assert len(outcomes) >= 10 and sum(not isinstance(o, Exception) for o in outcomes.values()) > len(outcomes) // 2
