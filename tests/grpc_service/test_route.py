"""A topic's queues across the brokers of a cluster, as QueryRoute and QueryAssignment list them
(:mod:`ferrymq.server.grpc.route`), from this broker's topic table and the name server's route."""

from __future__ import annotations

import pytest

pytest.importorskip("rocketmq.grpc_protocol")

from rocketmq.grpc_protocol import definition_pb2 as pb  # noqa: E402

from ferrymq.server.grpc import route  # noqa: E402
from ferrymq.wire.bodies import BrokerData, QueueData, TopicConfig, TopicRouteData  # noqa: E402

TOPIC = pb.Resource(name="T")
ENDPOINTS = pb.Endpoints(scheme=pb.IPv4, addresses=[pb.Address(host="127.0.0.1", port=8081)])


def local(reads: int = 2, writes: int = 2, perm: int = 6) -> TopicConfig:
    return TopicConfig(topic_name="T", read_queue_nums=reads, write_queue_nums=writes, perm=perm)


def cluster_route(*queues: QueueData, brokers: dict[str, dict[int, str]]) -> TopicRouteData:
    return TopicRouteData(queue_datas=list(queues), broker_datas=[
        BrokerData(cluster="C", broker_name=name, broker_addrs=addrs) for name, addrs in brokers.items()])


def test_this_brokers_queues_come_from_its_own_table_and_the_others_from_the_name_server():
    found = cluster_route(QueueData("a", 1, 1, 6), QueueData("b", 3, 2, 6), QueueData("gone", 4, 4, 6),
                          brokers={"a": {0: "h:1"}, "b": {0: "h:2", 1: "h:3"}})
    brokers = route.cluster_queues("a", local(reads=2, writes=2), found)
    assert brokers == [route.BrokerQueues("a", (0,), 2, 2, 6), route.BrokerQueues("b", (0, 1), 3, 2, 6)]
    queues = route.message_queues(brokers, TOPIC, ENDPOINTS, "FIFO")
    assert [(q.broker.name, q.broker.id, q.id, q.permission) for q in queues] == [
        ("a", 0, 0, pb.READ_WRITE), ("a", 0, 1, pb.READ_WRITE),
        *(("b", broker_id, queue_id, permission) for broker_id in (0, 1)
          for queue_id, permission in ((0, pb.READ), (1, pb.READ_WRITE), (2, pb.READ_WRITE)))]
    assert all(q.broker.endpoints == ENDPOINTS and list(q.accept_message_types) == [pb.FIFO] for q in queues)


def test_without_the_name_servers_route_the_broker_lists_its_own_queues():
    assert route.cluster_queues("a", local(), None) == [route.BrokerQueues("a", (0,), 2, 2, 6)]


def test_assignments_are_one_queue_per_readable_master_or_each_queue_for_fifo():
    brokers = [route.BrokerQueues("a", (0,), 2, 2, 6), route.BrokerQueues("b", (0, 1), 3, 3, 4),
               route.BrokerQueues("w", (0,), 4, 4, 2), route.BrokerQueues("slave-only", (1,), 4, 4, 6)]
    plain = route.assignments(brokers, TOPIC, ENDPOINTS, fifo=False)
    assert [(a.message_queue.broker.name, a.message_queue.broker.id, a.message_queue.id, a.message_queue.permission)
            for a in plain] == [("a", 0, -1, pb.READ_WRITE), ("b", 0, -1, pb.READ)]
    fifo = route.assignments(brokers, TOPIC, ENDPOINTS, fifo=True)
    assert [(a.message_queue.broker.name, a.message_queue.id) for a in fifo] == [
        ("a", 0), ("a", 1), ("b", 0), ("b", 1), ("b", 2)]
    assert route.assignments([route.BrokerQueues("w", (0,), 4, 4, 2)], TOPIC, ENDPOINTS, fifo=False) == []
