"""Topic commands: ``topicList``, ``topicRoute``, ``topicStatus``, ``updateTopic``, ``deleteTopic``."""

from __future__ import annotations

import argparse

import orjson
from twisted.internet import defer

from ferrymq.wire.bodies import ClusterInfo, TopicRouteData

from ferrymq.wire.topics import DLQ_GROUP_TOPIC_PREFIX, RETRY_GROUP_TOPIC_PREFIX

from .cluster import broker_name_of, cluster_addrs, master_addrs, select_addr
from .command import CommandError, Context, OneOf, Opt, bool_option, command, int_option
from .java_text import NO_CLUSTER, fastjson_pretty, front, human_time2, java_bool, java_double, java_map, perm_string

#: the name server's KV namespace of order topics' "brokerName:queueNums;..." settings
ORDER_TOPIC_NAMESPACE = "ORDER_TOPIC_CONFIG"
TOPIC_FLAG_UNIT = 0x1
TOPIC_FLAG_UNIT_SUB = 0x2


# ---------------------------------------------------------------- topicList


@command("topicList", "Fetch all topic list from name server.",
         Opt("c", "clusterModel", "clusterModel", arg=False))
@defer.inlineCallbacks
def topic_list(ctx: Context, opts: argparse.Namespace):
    if not opts.clusterModel:
        for topic in (yield ctx.admin.namesrv.get_all_topics()):
            ctx.printf("%s\n", topic)
        return
    info = yield ctx.admin.namesrv.get_cluster_info()
    ctx.printf("%-20s  %-48s  %-48s\n", "#Cluster Name", "#Topic", "#Consumer Group")
    for topic in (yield ctx.admin.namesrv.get_all_topics()):
        if topic.startswith((RETRY_GROUP_TOPIC_PREFIX, DLQ_GROUP_TOPIC_PREFIX)):
            continue
        cluster, groups = "", []
        try:
            route = yield ctx.admin.namesrv.get_route_info(topic)
            cluster = cluster_of(route, info)
            groups = yield consumer_groups(ctx, route, topic)
        except Exception:  # mqadmin lists the topic without cluster or groups then
            pass
        for group in groups or [""]:
            ctx.printf("%-20s  %-64s  %-64s\n", front(cluster, 20), front(topic, 64), front(group, 64))


def cluster_of(route: TopicRouteData, info: ClusterInfo) -> str | None:
    """The cluster holding the route's first broker (what mqadmin shows for a topic)."""
    name = route.broker_datas[0].broker_name
    return next((c for c, names in info.cluster_addr_table.items() if name in names), None)


@defer.inlineCallbacks
def consumer_groups(ctx: Context, route: TopicRouteData, topic: str):
    """QUERY_TOPIC_CONSUME_BY_WHO of the first broker with an address (as mqadmin asks one broker)."""
    for broker in route.broker_datas:
        addr = select_addr(broker)
        if addr:
            return (yield ctx.admin.api.query_topic_consume_by_who(addr, topic))
    return []


# ---------------------------------------------------------------- topicRoute

ROUTE_LIST = "%-45s %-32s %-50s %-10s %-11s %-5s\n"


@command("topicRoute", "Examine topic route info.",
         Opt("t", "topic", "topic name", required=True),
         Opt("l", "list", "Use list format to print data", arg=False))
@defer.inlineCallbacks
def topic_route(ctx: Context, opts: argparse.Namespace):
    route = yield ctx.admin.namesrv.get_route_info(opts.topic)
    ctx.printf("%s", route_list(route) if opts.list else route_json(route) + "\n")


def route_json(route: TopicRouteData) -> str:
    """The route as mqadmin prints it: fastjson's pretty form of TopicRouteData (fields sorted by name)."""
    data = orjson.loads(route.encode())
    for broker in data.get("brokerDatas", ()):
        broker["brokerAddrs"] = {int(k): v for k, v in sorted(broker["brokerAddrs"].items(), key=lambda kv: int(kv[0]))}
    return fastjson_pretty(data)


def route_list(route: TopicRouteData) -> str:
    queues = {q.broker_name: q for q in route.queue_datas}
    lines = [ROUTE_LIST % ("#ClusterName", "#BrokerName", "#BrokerAddrs", "#ReadQueue", "#WriteQueue", "#Perm")]
    total_read = total_write = 0
    for broker in sorted(route.broker_datas, key=lambda b: b.broker_name or ""):
        q = queues[broker.broker_name]
        total_read += q.read_queue_nums
        total_write += q.write_queue_nums
        lines.append(ROUTE_LIST % (broker.cluster, broker.broker_name, java_map(dict(sorted(broker.broker_addrs.items()))),
                                   q.read_queue_nums, q.write_queue_nums, q.perm))
    lines.append("-" * 158 + "\n")
    lines.append(ROUTE_LIST % ("Total:", len(queues), "", total_read, total_write, ""))
    return "".join(lines)


# ---------------------------------------------------------------- topicStatus


@command("topicStatus", "Examine topic Status info.",
         Opt("t", "topic", "topic name", required=True),
         Opt("c", "cluster", "cluster name or lmq parent topic, lmq is used to find the route."))
@defer.inlineCallbacks
def topic_status(ctx: Context, opts: argparse.Namespace):
    route = yield ctx.admin.namesrv.get_route_info(opts.cluster or opts.topic)
    offsets = {}
    put_tps = 0.0
    for broker in route.broker_datas:
        addr = select_addr(broker)
        if addr:
            stats = yield ctx.admin.api.get_topic_stats(addr, opts.topic)
            offsets.update(stats.offset_table)
            put_tps += stats.topic_put_tps
    if not offsets and not opts.cluster:
        raise CommandError(f"Not found the topic stats info of {opts.topic}")
    ctx.printf("%-32s  %-4s  %-20s  %-20s    %s\n", "#Broker Name", "#QID", "#Min Offset", "#Max Offset",
               "#Last Updated")
    for mq in sorted(offsets, key=lambda q: (q.topic, q.broker_name or "", q.queue_id)):
        off = offsets[mq]
        updated = human_time2(off.last_update_timestamp) if off.last_update_timestamp > 0 else ""
        ctx.printf("%-32s  %-4d  %-20d  %-20d    %s\n", front(mq.broker_name, 32), mq.queue_id, off.min_offset,
                   off.max_offset, updated)
    ctx.printf("\nTopic Put TPS: %s\n", java_double(put_tps))


# ---------------------------------------------------------------- updateTopic


@command("updateTopic", "Update or create topic.",
         OneOf((Opt("b", "brokerAddr", "create topic to which broker"),
                Opt("c", "clusterName", "create topic to which cluster"))),
         Opt("a", "attributes", "attribute(+a=b,+c=d,-e)"),
         Opt("t", "topic", "topic name", required=True),
         Opt("r", "readQueueNums", "set read queue nums"),
         Opt("w", "writeQueueNums", "set write queue nums"),
         Opt("p", "perm", "set topic's permission(2|4|6), intro[2:W 4:R; 6:RW]"),
         Opt("o", "order", "set topic's order(true|false)"),
         Opt("u", "unit", "is unit topic (true|false)"),
         Opt("s", "hasUnitSub", "has unit sub (true|false)"))
@defer.inlineCallbacks
def update_topic(ctx: Context, opts: argparse.Namespace):
    attributes = parse_attributes(opts.attributes or "")
    read, write = int_option(opts, "readQueueNums", 8), int_option(opts, "writeQueueNums", 8)
    perm = int_option(opts, "perm", 6)
    sys_flag = (TOPIC_FLAG_UNIT if bool_option(opts, "unit") else 0) | \
        (TOPIC_FLAG_UNIT_SUB if bool_option(opts, "hasUnitSub") else 0)
    order = bool_option(opts, "order")

    def create(addr: str) -> defer.Deferred:
        return ctx.admin.api.create_topic(addr, opts.topic, read, write, perm, order=order, topic_sys_flag=sys_flag,
                                          attributes=",".join(k if not v else f"{k}={v}" for k, v in attributes.items()))

    if opts.brokerAddr:
        yield create(opts.brokerAddr)
        if order:
            info = yield ctx.admin.namesrv.get_cluster_info()
            conf = f"{broker_name_of(info, opts.brokerAddr)}:{write}"
            yield _merge_order_conf(ctx, opts.topic, conf)
            ctx.printf("set broker orderConf. isOrder=%s, orderConf=[%s]\n", java_bool(order), conf)
        ctx.printf("create topic to %s success.\n", opts.brokerAddr)
    else:
        info = yield ctx.admin.namesrv.get_cluster_info()
        masters = master_addrs(info, opts.clusterName)
        if masters is None:
            ctx.printf("%s", NO_CLUSTER)
        for addr in masters or ():
            yield create(addr)
            ctx.printf("create topic to %s success.\n", addr)
        if order:
            names = sorted(info.cluster_addr_table.get(opts.clusterName, ()))
            conf = ";".join(f"{name}:{write}" for name in names)
            yield ctx.admin.namesrv.put_kv(ORDER_TOPIC_NAMESPACE, opts.topic, conf)
            ctx.printf("set cluster orderConf. isOrder=%s, orderConf=[%s]\n", java_bool(order), conf)
    ctx.printf("%s\n", topic_config_text(opts.topic, read, write, perm, sys_flag, order, attributes))


def parse_attributes(text: str) -> dict[str, str]:
    """mqadmin's ``-a``: ``+key=value`` sets an attribute, ``-key`` removes it."""
    attributes: dict[str, str] = {}
    for item in filter(None, text.split(",")):
        if "=" in item:
            key, _, value = item.partition("=")
            if "+" not in key:
                raise CommandError(f"add/alter attribute format is wrong: {key}")
        else:
            key, value = item, ""
            if "-" not in key:
                raise CommandError(f"delete attribute format is wrong: {key}")
        if key in attributes:
            raise CommandError(f"key duplication: {key}")
        attributes[key] = value
    return attributes


def topic_config_text(topic: str, read: int, write: int, perm: int, sys_flag: int, order: bool,
                      attributes: dict[str, str]) -> str:
    """``TopicConfig.toString()``, which updateTopic echoes."""
    return (f"TopicConfig [topicName={topic}, readQueueNums={read}, writeQueueNums={write}, "
            f"perm={perm_string(perm)}, topicFilterType=SINGLE_TAG, topicSysFlag={sys_flag}, "
            f"order={java_bool(order)}, attributes={java_map(attributes)}]")


@defer.inlineCallbacks
def _merge_order_conf(ctx: Context, topic: str, conf: str):
    """Replace this broker's entry in the topic's order conf, keeping the other brokers' entries."""
    old = yield ctx.admin.namesrv.get_kv(ORDER_TOPIC_NAMESPACE, topic)
    entries = {item.split(":")[0]: item for item in (old or "").split(";") if item.strip()}
    entries[conf.split(":")[0]] = conf
    yield ctx.admin.namesrv.put_kv(ORDER_TOPIC_NAMESPACE, topic, ";".join(entries.values()))


# ---------------------------------------------------------------- deleteTopic


@command("deleteTopic", "Delete topic from broker and NameServer.",
         Opt("t", "topic", "topic name", required=True),
         Opt("c", "clusterName", "delete topic from which cluster", required=True))
@defer.inlineCallbacks
def delete_topic(ctx: Context, opts: argparse.Namespace):
    for addr in (yield cluster_addrs(ctx, opts.clusterName)):
        yield ctx.admin.api.delete_topic(addr, opts.topic)
    ctx.printf("delete topic [%s] from cluster [%s] success.\n", opts.topic, opts.clusterName)
    for namesrv in ctx.namesrv_addrs:
        yield ctx.namesrv_at(namesrv).delete_topic(opts.topic, opts.clusterName)
    ctx.printf("delete topic [%s] from NameServer success.\n", opts.topic)
