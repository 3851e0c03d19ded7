"""Consumer-group commands: ``updateSubGroup``, ``consumerConnection``, ``consumerProgress``."""

from __future__ import annotations

import argparse
import time
from typing import Any

import orjson
from twisted.internet import defer

from ferrymq.wire.bodies import ConsumerConnection, ConsumeStats, SubscriptionGroupConfig, TopicRouteData
from ferrymq.wire.versions import version_desc

from ferrymq.wire.topics import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX

from .cluster import cluster_addrs, on_each, select_addr
from .command import CommandError, Context, OneOf, Opt, bool_option, command, int_option
from .java_text import front, java_bool, java_map
from .topic import parse_attributes

#: CustomizedRetryPolicy's default delays (ms), which Java prints when a policy names none
DEFAULT_RETRY_DELAYS = (1000, 5000, 10000, 30000, 60000, 120000, 180000, 240000, 300000, 360000, 420000, 480000,
                        540000, 600000, 1200000, 1800000, 3600000, 7200000)


@command("updateSubGroup", "Update or create subscription group.",
         OneOf((Opt("b", "brokerAddr", "create subscription group to which broker"),
                Opt("c", "clusterName", "create subscription group to which cluster"))),
         Opt("g", "groupName", "consumer group name", required=True),
         Opt("s", "consumeEnable", "consume enable"),
         Opt("m", "consumeFromMinEnable", "from min offset"),
         Opt("d", "consumeBroadcastEnable", "broadcast"),
         Opt("o", "consumeMessageOrderly", "consume message orderly"),
         Opt("q", "retryQueueNums", "retry queue nums"),
         Opt("r", "retryMaxTimes", "retry max times"),
         Opt("p", "groupRetryPolicy", 'the json string of retry policy ( exp: '
             '{"type":"EXPONENTIAL","exponentialRetryPolicy":{"initial":5000,"max":7200000,"multiplier":2}} '
             '{"type":"CUSTOMIZED","customizedRetryPolicy":{"next":[1000,5000,10000]}} )'),
         Opt("i", "brokerId", "consumer from which broker id"),
         Opt("w", "whichBrokerWhenConsumeSlowly", "which broker id when consume slowly"),
         Opt("a", "notifyConsumerIdsChanged", "notify consumerId changed"),
         Opt("", "attributes", "attribute(+a=b,+c=d,-e)"))
@defer.inlineCallbacks
def update_sub_group(ctx: Context, opts: argparse.Namespace):
    config = subscription_group(opts)
    if opts.brokerAddr:
        yield ctx.admin.api.create_subscription_group(opts.brokerAddr, config)
        ctx.printf("create subscription group to %s success.\n", opts.brokerAddr)
    else:
        addrs = yield cluster_addrs(ctx, opts.clusterName)
        yield on_each(ctx, addrs, lambda addr: ctx.admin.api.create_subscription_group(addr, config),
                      "create subscription group to %s success.\n")
    ctx.printf("%s\n", subscription_group_text(config))


def subscription_group(opts: argparse.Namespace) -> SubscriptionGroupConfig:
    """The group updateSubGroup sends: Apache's defaults, but neither broadcast nor from-min unless asked."""
    config = SubscriptionGroupConfig(group_name=opts.groupName, consume_from_min_enable=False,
                                     consume_broadcast_enable=False)
    for option, attr in (("consumeEnable", "consume_enable"), ("consumeFromMinEnable", "consume_from_min_enable"),
                         ("consumeBroadcastEnable", "consume_broadcast_enable"),
                         ("consumeMessageOrderly", "consume_message_orderly"),
                         ("notifyConsumerIdsChanged", "notify_consumer_ids_changed_enable")):
        if getattr(opts, option) is not None:
            setattr(config, attr, bool_option(opts, option))
    for option, attr in (("retryQueueNums", "retry_queue_nums"), ("retryMaxTimes", "retry_max_times"),
                         ("brokerId", "broker_id"), ("whichBrokerWhenConsumeSlowly", "which_broker_when_consume_slowly")):
        setattr(config, attr, int_option(opts, option, getattr(config, attr)))
    if opts.groupRetryPolicy is not None:
        try:
            policy = orjson.loads(opts.groupRetryPolicy)
        except orjson.JSONDecodeError as exc:
            raise CommandError(f"--groupRetryPolicy is not JSON: {exc}") from None
        if not isinstance(policy, dict):
            raise CommandError("--groupRetryPolicy must be a JSON object")
        config.group_retry_policy = policy
    if opts.attributes is not None:
        config.attributes = parse_attributes(opts.attributes)
    return config


def subscription_group_text(config: SubscriptionGroupConfig) -> str:
    """``SubscriptionGroupConfig.toString()``, which updateSubGroup echoes."""
    fields = [
        ("groupName", config.group_name), ("consumeEnable", java_bool(config.consume_enable)),
        ("consumeFromMinEnable", java_bool(config.consume_from_min_enable)),
        ("consumeBroadcastEnable", java_bool(config.consume_broadcast_enable)),
        ("consumeMessageOrderly", java_bool(config.consume_message_orderly)),
        ("retryQueueNums", config.retry_queue_nums), ("retryMaxTimes", config.retry_max_times),
        ("groupRetryPolicy", retry_policy_text(config.group_retry_policy or {})),
        ("brokerId", config.broker_id), ("whichBrokerWhenConsumeSlowly", config.which_broker_when_consume_slowly),
        ("notifyConsumerIdsChangedEnable", java_bool(config.notify_consumer_ids_changed_enable)),
        ("groupSysFlag", config.group_sys_flag), ("consumeTimeoutMinute", config.consume_timeout_minute),
        ("subscriptionDataSet", "null" if config.subscription_data_set is None else config.subscription_data_set),
        ("attributes", java_map(config.attributes)),
    ]
    return "SubscriptionGroupConfig{" + ", ".join(f"{k}={v}" for k, v in fields) + "}"


def retry_policy_text(policy: dict[str, Any]) -> str:
    """``GroupRetryPolicy.toString()`` of the policy's JSON, with Java's defaults for what it leaves out."""
    exponential = policy.get("exponentialRetryPolicy")
    customized = policy.get("customizedRetryPolicy")
    if exponential is not None:
        exponential = (f"ExponentialRetryPolicy{{initial={exponential.get('initial', 5000)}, "
                       f"max={exponential.get('max', 7200000)}, multiplier={exponential.get('multiplier', 2)}}}")
    if customized is not None:
        delays = customized.get("next", DEFAULT_RETRY_DELAYS)
        customized = "CustomizedRetryPolicy{next=[" + ", ".join(map(str, delays)) + "]}"
    return (f"GroupRetryPolicy{{type={policy.get('type', 'CUSTOMIZED')}, "
            f"exponentialRetryPolicy={exponential or 'null'}, customizedRetryPolicy={customized or 'null'}}}")


# ---------------------------------------------------------------- consumerConnection

@command("consumerConnection", "Query consumer's socket connection, client version and subscription.",
         Opt("g", "consumerGroup", "consumer group name", required=True),
         Opt("b", "brokerAddr", "broker address"))
@defer.inlineCallbacks
def consumer_connection(ctx: Context, opts: argparse.Namespace):
    conn = yield connections_of(ctx, opts.consumerGroup, opts.brokerAddr)
    ctx.printf("%s", consumer_connection_text(conn))


@defer.inlineCallbacks
def connections_of(ctx: Context, group: str, addr: str | None = None):
    """The group's live connections as one broker sees them (by default a broker of its retry topic, which
    every broker the group consumes from holds); fails when none is connected."""
    if not addr:
        route: TopicRouteData = yield ctx.admin.namesrv.get_route_info(RETRY_PREFIX + group)
        addr = select_addr(route.broker_datas[0]) if route.broker_datas else None
    conn = (yield ctx.admin.api.get_consumer_connections(addr, group)) if addr else ConsumerConnection()
    if not conn.connection_set:
        raise CommandError(f"Not found the consumer group connection of {group} (CONSUMER_NOT_ONLINE)")
    return conn


def consumer_connection_text(conn: ConsumerConnection) -> str:
    lines = ["%-36s %-22s %-10s %s\n" % ("#ClientId", "#ClientAddr", "#Language", "#Version")]
    lines += ["%-36s %-22s %-10s %s\n" % (c.client_id, c.client_addr, c.language, version_desc(c.version))
              for c in conn.connection_set]
    lines.append("\nBelow is subscription:\n")
    lines.append("%-20s %s\n" % ("#Topic", "#SubExpression"))
    lines += ["%-20s %s\n" % (sub.topic, sub.sub_string) for sub in conn.subscription_table.values()]
    lines.append("\n")
    lines.append(f"ConsumeType: {conn.consume_type}\nMessageModel: {conn.message_model}\n"
                 f"ConsumeFromWhere: {conn.consume_from_where}\n")
    return "".join(lines)


# ---------------------------------------------------------------- consumerProgress

PROGRESS_HEADER = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s%s\n"
PROGRESS_ROW = "%-64s  %-32s  %-4d  %-20d  %-20d  %-20d %-20d %s\n"
#: with -s true: a #Client IP column after the consumer offset
PROGRESS_IP_HEADER = "%-64s  %-32s  %-4s  %-20s  %-20s  %-20s %-20s %-20s%s\n"
PROGRESS_IP_ROW = "%-64s  %-32s  %-4d  %-20d  %-20d  %-20s %-20d %-20d %s\n"
GROUPS_HEADER = "%-64s  %-6s  %-24s %-5s  %-14s  %-7s  %s\n"
GROUPS_ROW = "%-64s  %-6d  %-24s %-5s  %-14s  %-7d  %d\n"


@command("consumerProgress", "Query consumer's progress, speed.",
         Opt("g", "groupName", "consumer group name"),
         Opt("t", "topicName", "topic name"),
         Opt("s", "showClientIP", "Show Client IP per Queue"),
         Opt("c", "cluster", "Cluster name or lmq parent topic, lmq is used to find the route."))
@defer.inlineCallbacks
def consumer_progress(ctx: Context, opts: argparse.Namespace):
    if not opts.groupName:
        yield _all_groups(ctx)
        return
    stats = yield consume_stats(ctx, opts.groupName, opts.topicName)
    clients = None
    if (opts.showClientIP or "").lower() == "true":
        clients = yield queue_clients(ctx, opts.groupName)
    ctx.printf("%s", consume_stats_text(stats, time.localtime, clients))


@defer.inlineCallbacks
def queue_clients(ctx: Context, group: str):
    """The IP of the client each queue is assigned to, as each online consumer reports its queues (what
    mqadmin can learn; a consumer that does not answer leaves its queues without one)."""
    clients: dict = {}
    try:
        conn = yield connections_of(ctx, group)
        route: TopicRouteData = yield ctx.admin.namesrv.get_route_info(RETRY_PREFIX + group)
        addr = next(filter(None, map(select_addr, route.broker_datas)), None)
        for c in conn.connection_set if addr else ():
            info = yield ctx.admin.api.get_consumer_running_info(addr, group, c.client_id)
            clients.update(dict.fromkeys(info.mq_table, c.client_id.split("@")[0]))
    except Exception as exc:  # mqadmin prints the table without the clients then
        ctx.err.write(f"the clients of {group}'s queues: {exc}\n")
    return clients


class Broadcasting(CommandError):
    """The group keeps no offsets on the brokers: it consumes in broadcast mode."""


@defer.inlineCallbacks
def consume_stats(ctx: Context, group: str, topic: str | None = None):
    """The group's offsets on every broker of its route (its retry topic's, else the topic's), as mqadmin's
    ``examineConsumeStats``; fails when there are none and no consumer is online, or it broadcasts."""
    route = None
    candidates = [RETRY_PREFIX + group] + ([topic, f"{RETRY_PREFIX}{group}_{topic}"] if topic else [])
    for i, name in enumerate(candidates):
        try:
            route = yield ctx.admin.namesrv.get_route_info(name)
            break
        except Exception:
            if i == len(candidates) - 1:
                raise
    result = ConsumeStats()
    for broker in route.broker_datas:
        addr = select_addr(broker)
        if addr:
            stats = yield ctx.admin.api.get_consume_stats(addr, group, topic)
            result.offset_table.update(stats.offset_table)
            result.consume_tps += stats.consume_tps
    if not result.offset_table:
        try:
            conn = yield connections_of(ctx, group)
        except Exception:
            raise CommandError("Not found the consumer group consume stats, because return offset table is "
                               "empty, maybe the consumer not online") from None
        if conn.message_model == "BROADCASTING":
            raise Broadcasting("Not found the consumer group consume stats, because return offset table is "
                               "empty, the consumer is under the broadcast mode")
    return result


def consume_stats_text(stats: ConsumeStats, localtime=time.localtime, clients: dict | None = None) -> str:
    """consumerProgress -g: a row per queue (by topic, broker, queue id), then the totals; with ``clients``
    (-s true), each queue's client IP ("N/A" when unknown)."""
    if clients is None:
        lines = [PROGRESS_HEADER % ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset", "#Diff",
                                    "#Inflight", "#LastTime")]
    else:
        lines = [PROGRESS_IP_HEADER % ("#Topic", "#Broker Name", "#QID", "#Broker Offset", "#Consumer Offset",
                                       "#Client IP", "#Diff", "#Inflight", "#LastTime")]
    diff_total = inflight_total = 0
    for mq in sorted(stats.offset_table, key=lambda q: (q.topic, q.broker_name or "", q.queue_id)):
        off = stats.offset_table[mq]
        diff, inflight = off.broker_offset - off.consumer_offset, off.pull_offset - off.consumer_offset
        diff_total += diff
        inflight_total += inflight
        last = "N/A" if off.last_timestamp == 0 else time.strftime("%Y-%m-%d %H:%M:%S",
                                                                    localtime(off.last_timestamp / 1000))
        if clients is None:
            lines.append(PROGRESS_ROW % (front(mq.topic, 64), front(mq.broker_name, 32), mq.queue_id,
                                         off.broker_offset, off.consumer_offset, diff, inflight, last))
        else:
            lines.append(PROGRESS_IP_ROW % (front(mq.topic, 64), front(mq.broker_name, 32), mq.queue_id,
                                            off.broker_offset, off.consumer_offset, clients.get(mq) or "N/A", diff,
                                            inflight, last))
    lines.append("\nConsume TPS: %.2f\nConsume Diff Total: %d\nConsume Inflight Total: %d\n"
                 % (stats.consume_tps, diff_total, inflight_total))
    return "".join(lines)


@defer.inlineCallbacks
def _all_groups(ctx: Context):
    """consumerProgress without -g: one line per group that has a retry topic."""
    ctx.printf(GROUPS_HEADER, "#Group", "#Count", "#Version", "#Type", "#Model", "#TPS", "#Diff Total")
    for topic in (yield ctx.admin.namesrv.get_all_topics()):
        if not topic.startswith(RETRY_PREFIX):
            continue
        group = topic[len(RETRY_PREFIX):]
        stats = conn = None
        try:
            stats = yield consume_stats(ctx, group)
        except Exception:  # mqadmin shows the group with what it could learn
            stats = None
        try:
            conn = yield connections_of(ctx, group)
        except Exception:
            conn = None
        ctx.printf(GROUPS_ROW, *group_row(group, stats, conn))


def group_row(group: str, stats: ConsumeStats | None, conn: ConsumerConnection | None) -> tuple:
    count = len(conn.connection_set) if conn else 0
    version = version_desc(min(c.version for c in conn.connection_set)) if count else "OFFLINE"
    consume_type = ("PULL" if conn.consume_type == "CONSUME_ACTIVELY" else "PUSH") if count else ""
    model = conn.message_model if count and conn.consume_type == "CONSUME_PASSIVELY" else ""
    tps = int(stats.consume_tps) if stats else 0
    diff = sum(o.broker_offset - o.consumer_offset for o in stats.offset_table.values()) if stats else 0
    return front(group, 64), count, version, consume_type, model, tps, diff
