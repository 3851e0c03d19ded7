"""Consumer-group commands: ``updateSubGroup``, ``consumerConnection``."""

from __future__ import annotations

import argparse
from typing import Any

import orjson
from twisted.internet import defer

from ferrymq.wire.bodies import ConsumerConnection, SubscriptionGroupConfig
from ferrymq.wire.versions import version_desc

from .cluster import master_addrs
from .command import CommandError, Context, OneOf, Opt, bool_option, command, int_option
from .java_text import NO_CLUSTER, java_bool, java_map
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
        info = yield ctx.admin.namesrv.get_cluster_info()
        masters = master_addrs(info, opts.clusterName)
        if masters is None:
            ctx.printf("%s", NO_CLUSTER)
        for addr in masters or ():
            try:
                yield ctx.admin.api.create_subscription_group(addr, config)
            except Exception as exc:  # one broker refusing must not stop the others
                ctx.err.write(f"{addr}: {exc}\n")
                continue
            ctx.printf("create subscription group to %s success.\n", addr)
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

RETRY_PREFIX = "%RETRY%"


@command("consumerConnection", "Query consumer's socket connection, client version and subscription.",
         Opt("g", "consumerGroup", "consumer group name", required=True),
         Opt("b", "brokerAddr", "broker address"))
@defer.inlineCallbacks
def consumer_connection(ctx: Context, opts: argparse.Namespace):
    addr = opts.brokerAddr
    if not addr:
        # every broker holding the group's retry topic sees its consumers; mqadmin asks one
        route = yield ctx.admin.namesrv.get_route_info(RETRY_PREFIX + opts.consumerGroup)
        broker = route.broker_datas[0] if route.broker_datas else None
        addr = broker and (broker.broker_addrs.get(0) or next(iter(broker.broker_addrs.values()), None))
    conn: ConsumerConnection = (yield ctx.admin.api.get_consumer_connections(addr, opts.consumerGroup)) \
        if addr else ConsumerConnection()
    if not conn.connection_set:
        raise CommandError(f"Not found the consumer group connection of {opts.consumerGroup} (CONSUMER_NOT_ONLINE)")
    ctx.printf("%s", consumer_connection_text(conn))


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
