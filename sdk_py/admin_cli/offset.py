"""Offset commands: ``resetOffsetByTime``."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass

from twisted.internet import defer

from ferrymq.remoting.errors import ResponseCodeError
from ferrymq.wire.bodies import MessageQueue, OffsetWrapper, TopicRouteData
from ferrymq.wire.codes import ResponseCode

from .cluster import select_addr
from .command import CommandError, Context, Opt, bool_option, command, int_option
from .java_text import (
    capacity_after_puts,
    capacity_of_put_all,
    front,
    hashmap_order,
    java_bool,
    mq_hash,
)
from .message import route_topic

#: mqadmin's date form for -s (local time)
DATE_FORMAT = "%Y-%m-%d#%H:%M:%S"
#: what a reset to "the end of each queue" sends as its time
END_OF_QUEUE = -1


@dataclass(frozen=True)
class Rollback:
    """One queue of a reset done by the admin itself (mqadmin's ``RollbackStats``)."""

    broker_name: str
    queue_id: int
    broker_offset: int
    consumer_offset: int
    timestamp_offset: int
    rollback_offset: int


def parse_timestamp(text: str, now_ms: int) -> int:
    """-s: ``now``, milliseconds, or ``yyyy-MM-dd#HH:mm:ss:SSS`` in local time."""
    if text == "now":
        return now_ms
    try:
        return int(text)
    except ValueError:
        pass
    stamp, _, millis = text.rpartition(":")
    try:
        seconds = time.mktime(time.strptime(stamp, DATE_FORMAT))
        if len(millis) != 3 or not millis.isdigit():
            raise ValueError
    except ValueError:
        raise CommandError(f"-s must be now, milliseconds or yyyy-MM-dd#HH:mm:ss:SSS, not {text!r}") from None
    return int(seconds) * 1000 + int(millis)


@command("resetOffsetByTime", "Reset consumer offset by timestamp(without client restart).",
         Opt("g", "group", "set the consumer group", required=True),
         Opt("t", "topic", "set the topic", required=True),
         Opt("s", "timestamp", "set the timestamp[now|currentTimeMillis|yyyy-MM-dd#HH:mm:ss:SSS]", required=True),
         Opt("f", "force", "set the force rollback by timestamp switch[true|false]. Deprecated."),
         Opt("b", "broker", "broker addr"),
         Opt("q", "queue", "queue id"),
         Opt("o", "offset", "Expect queue offset, not support old version broker"),
         Opt("c", "cluster", "Cluster name or lmq parent topic, lmq is used to find the route."))
@defer.inlineCallbacks
def reset_offset_by_time(ctx: Context, opts: argparse.Namespace):
    timestamp = parse_timestamp(opts.timestamp, int(time.time() * 1000))
    force = opts.force is None or bool_option(opts, "force")
    queue_id = int_option(opts, "queue", -1)
    if opts.broker and queue_id >= 0:
        yield _reset_one_queue(ctx, opts, queue_id, timestamp)
        return
    try:
        offsets = yield reset_on_brokers(ctx, opts.topic, opts.group, timestamp, force, opts.cluster)
    except ResponseCodeError as exc:
        if exc.code != ResponseCode.CONSUMER_NOT_ONLINE:
            raise
        # the brokers reset through online consumers and there are none: set the offsets directly
        rollbacks = yield reset_by_admin(ctx, opts.topic, opts.group, timestamp, force, opts.cluster)
        ctx.printf("%s", rollback_text(opts.group, opts.topic, force, opts.timestamp, timestamp, rollbacks))
        return
    ctx.printf("start reset consumer offset by specified, group[%s], topic[%s], force[%s], "
               "timestamp(string)[%s], timestamp(long)[%s]\n", opts.group, opts.topic, java_bool(force),
               opts.timestamp, timestamp)
    ctx.printf("%s", reset_table(offsets))


@defer.inlineCallbacks
def _reset_one_queue(ctx: Context, opts: argparse.Namespace, queue_id: int, timestamp: int):
    """-b and -q: one queue, to -o's offset or the first message stored at or after the time."""
    ctx.printf("start reset consumer offset by specified, group[%s], topic[%s], queueId[%s], broker[%s], "
               "timestamp(string)[%s], timestamp(long)[%s]\n", opts.group, opts.topic, queue_id, opts.broker,
               opts.timestamp, timestamp)
    mq = MessageQueue(opts.topic, None, queue_id)
    if opts.offset is not None:
        offset = int_option(opts, "offset", 0)
    else:
        offset = yield ctx.admin.api.search_offset(opts.broker, mq, timestamp)
    ctx.printf("reset consumer offset to %d\n", offset)
    if offset > 0:
        yield ctx.admin.api.update_consumer_offset(opts.broker, opts.group, mq, offset, oneway=False)
        yield ctx.admin.api.reset_offset(opts.broker, opts.topic, opts.group, 0, queue_id=queue_id, offset=offset)


@defer.inlineCallbacks
def reset_on_brokers(ctx: Context, topic: str, group: str, timestamp: int, force: bool, cluster: str | None):
    """Each broker of the topic's route resets the group (INVOKE_BROKER_TO_RESET_OFFSET); the new offsets
    in the order mqadmin's HashMap walks them."""
    route: TopicRouteData = yield ctx.admin.namesrv.get_route_info(route_topic(topic, cluster))
    merged: list[tuple[MessageQueue, int]] = []
    capacity = 0
    for broker in route.broker_datas:
        addr = select_addr(broker)
        if not addr:
            continue
        table = yield ctx.admin.api.reset_offset(addr, topic, group, timestamp, force)
        if not table:
            continue
        # the broker's table as fastjson reads it into a HashMap, then put into the admin's own map
        merged.extend((mq, table[mq]) for mq in hashmap_order(table, mq_hash, capacity_after_puts(len(table))))
        capacity = capacity_after_puts(len(merged), capacity) if capacity else capacity_of_put_all(len(table))
    offsets = dict(merged)
    return [(mq, offsets[mq]) for mq in hashmap_order(offsets, mq_hash, capacity or 1)]


def reset_table(offsets: list[tuple[MessageQueue, int]]) -> str:
    lines = ["%-40s  %-40s  %-40s\n" % ("#brokerName", "#queueId", "#offset")]
    lines += ["%-40s  %-40d  %-40d\n" % (front(mq.broker_name, 32), mq.queue_id, offset) for mq, offset in offsets]
    return "".join(lines)


@defer.inlineCallbacks
def reset_by_admin(ctx: Context, topic: str, group: str, timestamp: int, force: bool, cluster: str | None):
    """mqadmin's fallback: on each broker, every queue of the topic the group has an offset on (else every
    read queue) goes to the time's offset (forced, or when that is not ahead of the group)."""
    route: TopicRouteData = yield ctx.admin.namesrv.get_route_info(route_topic(topic, cluster))
    read_queues = {q.broker_name: q.read_queue_nums for q in route.queue_datas}
    rollbacks: list[Rollback] = []
    for broker in route.broker_datas:
        addr = select_addr(broker)
        if not addr:
            continue
        stats = yield ctx.admin.api.get_consume_stats(addr, group)
        queues = [mq for mq in hashmap_order(stats.offset_table, mq_hash, capacity_after_puts(len(stats.offset_table)))
                  if mq.topic == topic]
        offsets = {mq: stats.offset_table[mq] for mq in queues}
        if not queues:
            topic_stats = yield ctx.admin.api.get_topic_stats(addr, topic)
            for qid in range(read_queues.get(broker.broker_name, 0)):
                mq = MessageQueue(topic, broker.broker_name, qid)
                status = topic_stats.offset_table[mq]
                offsets[mq] = OffsetWrapper(broker_offset=status.max_offset, consumer_offset=status.min_offset)
                queues.append(mq)
        for mq in queues:
            rollbacks.append((yield _roll_back(ctx, addr, group, mq, offsets[mq], timestamp, force)))
    return rollbacks


@defer.inlineCallbacks
def _roll_back(ctx: Context, addr: str, group: str, mq: MessageQueue, offsets: OffsetWrapper, timestamp: int,
               force: bool):
    if timestamp == END_OF_QUEUE:
        target = yield ctx.admin.api.get_max_offset(addr, mq)
    else:
        target = yield ctx.admin.api.search_offset(addr, mq, timestamp)
    rollback = offsets.consumer_offset
    if force or target <= offsets.consumer_offset:
        rollback = target
        yield ctx.admin.api.update_consumer_offset(addr, group, mq, target, oneway=False)
    return Rollback(mq.broker_name, mq.queue_id, offsets.broker_offset, offsets.consumer_offset, target, rollback)


def rollback_text(group: str, topic: str, force: bool, text: str, timestamp: int, rollbacks: list[Rollback]) -> str:
    lines = ["reset consumer offset by specified consumerGroup[%s], topic[%s], force[%s], timestamp(string)[%s], "
             "timestamp(long)[%s]\n" % (group, topic, java_bool(force), text, timestamp)]
    lines.append("%-20s  %-20s  %-20s  %-20s  %-20s  %-20s\n" % ("#brokerName", "#queueId", "#brokerOffset",
                                                              "#consumerOffset", "#timestampOffset", "#resetOffset"))
    lines += ["%-20s  %-20d  %-20d  %-20d  %-20d  %-20d\n" % (front(r.broker_name, 32), r.queue_id, r.broker_offset,
                                                            r.consumer_offset, r.timestamp_offset, r.rollback_offset)
              for r in rollbacks]
    return "".join(lines)
