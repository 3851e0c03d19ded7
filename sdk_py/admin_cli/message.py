"""Message commands: ``queryMsgById``, ``queryMsgByKey``."""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

from twisted.internet import defer

from ferrymq.remoting.errors import ResponseCodeError
from ferrymq.wire.bodies import ConsumeMessageDirectlyResult, TopicRouteData
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.headers import QueryMessageRequestHeader
from ferrymq.wire.message import MessageConst, MessageExt
from ferrymq.wire.msgid import parse_offset_msg_id
from ferrymq.wire.topics import RETRY_GROUP_TOPIC_PREFIX as RETRY_PREFIX
from ferrymq.wire.topics import TIMER_TOPIC

from ..message import Message, SendResult
from ..producer import Producer
from .cluster import MASTER_ID, select_addr
from .command import CommandError, Context, Opt, command, int_option
from .consumer import Broadcasting, connections_of, consume_stats
from .java_text import human_time2, java_bool, java_hashmap
from .topic import consumer_groups

#: the producer group queryMsgById -s resends from
RESEND_GROUP = "ReSendMsgById"
#: where mqadmin writes each message's body (the path it prints)
BODY_DIR = "/tmp/rocketmq/msgbodys"
#: MessageDecoder reads properties into ``new HashMap<>(128)``: the size their printed order depends on
PROPERTIES_CAPACITY = 128
LMQ_PREFIX = "%LMQ%"
JAVA_LONG_MAX = 2**63 - 1
HOUR_MS = 3_600_000
#: a unique-key lookup searches the last three days, for at most 32 messages (MQAdminImpl)
UNIQUE_KEY_SPAN_MS = 3 * 24 * HOUR_MS
UNIQUE_KEY_MAX = 32
#: DefaultMQAdminExt's request timeout (s); a key query may take three times that
ADMIN_TIMEOUT_S = 5.0

KEY_TYPE_KEYS = "K"
KEY_TYPE_TAGS = "T"
NO_MESSAGE = "query message by key finished, but no message. (NO_MESSAGE)"


# ---------------------------------------------------------------- finding messages


def route_topic(topic: str, cluster: str | None) -> str:
    """The topic whose route a query follows: for light message queues and the timer topic, the cluster's."""
    if cluster and (topic.startswith(LMQ_PREFIX) or topic == TIMER_TOPIC):
        return cluster
    return topic


@defer.inlineCallbacks
def query_messages(ctx: Context, topic: str, key: str, *, cluster: str | None = None, max_num: int = 64,
                   begin: int = 0, end: int = JAVA_LONG_MAX, key_type: str | None = None,
                   last_key: str | None = None, unique: bool = False):
    """The messages of ``topic`` every broker of its route indexes under ``key`` (a unique key with
    ``unique``; its tags with key type ``T``), as mqadmin's admin client gathers them; fails as it does
    when there are none."""
    lmq = topic.startswith(LMQ_PREFIX)
    route: TopicRouteData = yield ctx.admin.namesrv.get_route_info(route_topic(topic, cluster))
    addrs = [select_addr(b) for b in route.broker_datas if lmq or not cluster or b.cluster == cluster]
    header = QueryMessageRequestHeader(cluster if lmq else topic, key, max_num, begin, end, key_type, last_key)
    found: list[MessageExt] = []
    for addr in filter(None, addrs):
        try:
            _, msgs = yield ctx.admin.api.query_message(addr, header, unique_key=unique, timeout=ADMIN_TIMEOUT_S * 3)
        except Exception as exc:  # mqadmin skips a broker that fails
            ctx.err.write(f"{addr}: {exc}\n")
            continue
        found.extend(m for m in msgs if _matches(m, topic, key, key_type, unique, lmq))
    if not found:
        raise CommandError(NO_MESSAGE)
    return found


def _matches(msg: MessageExt, topic: str, key: str, key_type: str | None, unique: bool, lmq: bool) -> bool:
    """The index holds hashes: keep what really carries the key (as the Java client filters)."""
    if unique:
        return msg.msg_id == key
    if not lmq and msg.topic != topic:
        return False
    if key_type == KEY_TYPE_TAGS:
        return msg.tags == key
    return key in msg.keys


@defer.inlineCallbacks
def message_by_id(ctx: Context, topic: str, msg_id: str, cluster: str | None = None):
    """The message an id names: an offset message id is read where it points; anything else (or an offset
    id that cannot be read) is looked up as a unique key, as mqadmin does."""
    try:
        (host, port), offset = parse_offset_msg_id(msg_id)
        return (yield ctx.admin.api.view_message(f"{host}:{port}", offset, topic))
    except Exception:  # a unique key also parses as an offset id, of a host that holds no such message
        pass
    now = int(time.time() * 1000)
    found = yield query_messages(ctx, topic, msg_id, cluster=cluster, max_num=UNIQUE_KEY_MAX,
                                 begin=now - UNIQUE_KEY_SPAN_MS, unique=True)
    return found[0]


# ---------------------------------------------------------------- queryMsgByKey

KEY_HEADER = "%-50s %4s %40s %-200s\n"
KEY_ROW = "%-50s %4d %40d %-200s\n"


@command("queryMsgByKey", "Query Message by Key.",
         Opt("t", "topic", "Topic name", required=True),
         Opt("k", "msgKey", "Message Key", required=True),
         Opt("b", "beginTimestamp", "Begin timestamp(ms). default:0, eg:1676730526212"),
         Opt("e", "endTimestamp", "End timestamp(ms). default:Long.MAX_VALUE, eg:1676730526212"),
         Opt("m", "maxNum", "The maximum number of messages returned by the query, default:64"),
         Opt("c", "cluster", "Cluster name or lmq parent topic, lmq is used to find the route."),
         Opt("p", "keyType", "Index key type, default index key type is K, you can use K for keys OR T for tags"),
         Opt("l", "lastKey", "Last Key"))
@defer.inlineCallbacks
def query_msg_by_key(ctx: Context, opts: argparse.Namespace):
    key_type = KEY_TYPE_KEYS if opts.keyType is None else opts.keyType
    if key_type not in (KEY_TYPE_KEYS, KEY_TYPE_TAGS):
        ctx.printf("index type error, just support K for keys or T for tags")
        return
    msgs = yield query_messages(ctx, opts.topic, opts.msgKey, cluster=opts.cluster,
                                max_num=int_option(opts, "maxNum", 64), begin=int_option(opts, "beginTimestamp", 0),
                                end=int_option(opts, "endTimestamp", JAVA_LONG_MAX), key_type=key_type,
                                last_key=opts.lastKey)
    ctx.printf("%s", key_table(msgs, opts.topic, key_type, opts.msgKey))


def key_table(msgs: list[MessageExt], topic: str, key_type: str, key: str) -> str:
    """queryMsgByKey's table: id, queue, queue offset, and the index entry (hour@topic@type@key@id@offset)."""
    lines = [KEY_HEADER % ("#Message ID", "#QID", "#Offset", "#IndexKey")]
    for m in msgs:
        hour = m.store_timestamp // HOUR_MS * HOUR_MS if m.store_timestamp > 0 else m.store_timestamp
        index_key = f"{hour}@{topic}@{key_type}@{key}@{m.msg_id}@{m.commitlog_offset}"
        lines.append(KEY_ROW % (m.msg_id, m.queue_id, m.queue_offset, index_key))
    return "".join(lines)


# ---------------------------------------------------------------- queryMsgById


@command("queryMsgById", "Query Message by Id.",
         Opt("t", "topic", "topic name", required=True),
         Opt("i", "msgId", "Message Id", required=True),
         Opt("g", "consumerGroup", "consumer group name"),
         Opt("d", "clientId", "The consumer's client id"),
         Opt("s", "sendMessage", "resend message"),
         Opt("u", "unitName", "unit name"),
         Opt("f", "bodyFormat", "print message body by the specified format"),
         Opt("c", "cluster", "Cluster name or lmq parent topic, lmq is used to find the route."))
@defer.inlineCallbacks
def query_msg_by_id(ctx: Context, opts: argparse.Namespace):
    msg_ids = [i.strip() for i in opts.msgId.split(",") if i.strip()]
    if opts.consumerGroup and opts.clientId:
        for msg_id in msg_ids:
            try:
                yield push_to_consumer(ctx, opts, msg_id)
            except Exception as exc:  # mqadmin reports it and goes on with the next id
                ctx.err.write(f"{msg_id}: {exc}\n")
        return
    if opts.sendMessage is not None:
        if opts.sendMessage.lower() == "true":
            yield resend(ctx, opts, msg_ids)
        return
    charset = opts.bodyFormat
    if charset is not None:
        try:
            "".encode(charset)
        except LookupError:
            raise CommandError(f"unknown body format (charset) {charset!r}") from None
    for msg_id in msg_ids:
        msg = yield message_by_id(ctx, opts.topic, msg_id, opts.cluster)
        path = save_body(msg)
        tracks = yield message_tracks(ctx, msg)
        ctx.printf("%s", message_text(msg, path, charset, tracks))


@defer.inlineCallbacks
def push_to_consumer(ctx: Context, opts: argparse.Namespace, msg_id: str):
    """-g and -d: have that push consumer's listener take the message now, and print how it went."""
    group, client_id = opts.consumerGroup, opts.clientId
    route: TopicRouteData = yield ctx.admin.namesrv.get_route_info(RETRY_PREFIX + group)
    addr = next(filter(None, map(select_addr, route.broker_datas)), None)
    if addr is None:
        raise CommandError(f"no broker serves the consumer group {group}")
    info = yield ctx.admin.api.get_consumer_running_info(addr, group, client_id)
    if info.properties.get("PROP_CONSUME_TYPE") != "CONSUME_PASSIVELY":
        ctx.printf("this %s client is not push consumer ,not support direct push \n", client_id)
        return
    msg = yield message_by_id(ctx, opts.topic, msg_id, opts.cluster)
    target = msg_id if msg.uniq_key is None else msg.offset_msg_id
    result = yield ctx.admin.api.consume_message_directly("%s:%d" % msg.store_host, group, client_id, opts.topic,
                                                          target)
    ctx.printf("%s", direct_result_text(result))


@defer.inlineCallbacks
def resend(ctx: Context, opts: argparse.Namespace, msg_ids: list[str]):
    """-s true: send each message again as stored (its properties, unique key included), from mqadmin's
    producer group, and print where it went."""
    producer = Producer(RESEND_GROUP, ";".join(ctx.namesrv_addrs))
    yield producer.start()
    try:
        for msg_id in msg_ids:
            try:
                msg = yield message_by_id(ctx, opts.topic, msg_id, opts.cluster)
                ctx.printf("prepare resend msg. originalMsgId=%s", msg_id)
                result = yield producer.send(Message(msg.topic, msg.body, flag=msg.flag,
                                                     properties=dict(msg.properties)))
            except Exception as exc:  # mqadmin reports it and goes on with the next id
                ctx.err.write(f"{msg_id}: {exc}\n")
                continue
            ctx.printf("%s", send_result_text(result))
    finally:
        yield producer.shutdown()


def send_result_text(result: SendResult) -> str:
    """``SendResult.toString()``."""
    mq = result.message_queue
    return (f"SendResult [sendStatus={result.status.value}, msgId={_java_str(result.msg_id)}, "
            f"offsetMsgId={result.offset_msg_id}, messageQueue=MessageQueue [topic={mq.topic}, "
            f"brokerName={mq.broker_name}, queueId={mq.queue_id}], queueOffset={result.queue_offset}, "
            f"recallHandle=null]")


def direct_result_text(result: ConsumeMessageDirectlyResult) -> str:
    """``ConsumeMessageDirectlyResult.toString()``."""
    return (f"ConsumeMessageDirectlyResult [order={java_bool(result.order)}, autoCommit={java_bool(result.auto_commit)}, "
            f"consumeResult={_java_str(result.consume_result)}, remark={_java_str(result.remark)}, "
            f"spentTimeMills={result.spent_time_mills}]")


def save_body(msg: MessageExt, directory: str = BODY_DIR) -> str:
    """Write the body where mqadmin writes it (the detail block names the file)."""
    os.makedirs(directory, exist_ok=True)
    path = f"{directory}/{msg.msg_id}"
    with open(path, "wb") as f:
        f.write(msg.body)
    return path


def message_text(msg: MessageExt, body_path: str, charset: str | None, tracks: list[str]) -> str:
    """The detail block mqadmin prints for one message, then its consumer groups' progress on it."""
    rows = [
        ("OffsetID:", msg.offset_msg_id), ("Topic:", msg.topic), ("Tags:", f"[{_java_str(msg.tags)}]"),
        ("Keys:", f"[{_java_str(msg.properties.get(MessageConst.KEYS))}]"), ("Queue ID:", msg.queue_id),
        ("Queue Offset:", msg.queue_offset), ("CommitLog Offset:", msg.commitlog_offset),
        ("Reconsume Times:", msg.reconsume_times), ("Born Timestamp:", human_time2(msg.born_timestamp)),
        ("Store Timestamp:", human_time2(msg.store_timestamp)), ("Born Host:", "%s:%d" % msg.born_host),
        ("Store Host:", "%s:%d" % msg.store_host), ("System Flag:", msg.sys_flag),
        ("Properties:", java_hashmap(msg.properties, PROPERTIES_CAPACITY)), ("Message Body Path:", body_path),
    ]
    if charset is not None:
        rows.append(("Message Body:", msg.body.decode(charset, errors="replace")))
    text = "".join("%-20s %s\n" % row for row in rows)
    if not tracks:
        return text + "\n\nWARN: No Consumer"
    return text + "\n\n" + "".join(f"{track}\n" for track in tracks)


def _java_str(value: str | None) -> str:
    return "null" if value is None else value


# ---------------------------------------------------------------- what each consumer group did with a message


@dataclass(frozen=True)
class MessageTrack:
    """One consumer group's state for a message (mqadmin's ``MessageTrack``)."""

    group: str
    track_type: str
    exception: str | None = None

    def __str__(self) -> str:
        return (f"MessageTrack [consumerGroup={self.group}, trackType={self.track_type}, "
                f"exceptionDesc={_java_str(self.exception)}]")


@defer.inlineCallbacks
def message_tracks(ctx: Context, msg: MessageExt):
    """For each group consuming the message's topic: consumed, not yet, filtered out, pulling, offline
    (the lines mqadmin prints)."""
    return [str(track) for track in (yield tracks_of(ctx, msg))]


@defer.inlineCallbacks
def tracks_of(ctx: Context, msg: MessageExt):
    """The :class:`MessageTrack` of each group consuming the message's topic."""
    route = yield ctx.admin.namesrv.get_route_info(msg.topic)
    tracks = []
    for group in (yield consumer_groups(ctx, route, msg.topic)):
        tracks.append((yield _track(ctx, msg, group)))
    return tracks


@defer.inlineCallbacks
def _track(ctx: Context, msg: MessageExt, group: str):
    try:
        conn = yield connections_of(ctx, group)
    except ResponseCodeError as exc:  # the broker's refusal: offline, or something else
        kind = "NOT_ONLINE" if exc.code == ResponseCode.CONSUMER_NOT_ONLINE else "UNKNOWN"
        return MessageTrack(group, kind, f"CODE:{exc.code} DESC:{exc.remark}")
    except Exception as exc:  # no route, no connection listed: mqadmin cannot tell either
        return MessageTrack(group, "UNKNOWN", str(exc))
    if conn.consume_type == "CONSUME_ACTIVELY":
        return MessageTrack(group, "PULL")
    if conn.consume_type != "CONSUME_PASSIVELY":
        return MessageTrack(group, "UNKNOWN")
    try:
        consumed = yield _consumed(ctx, msg, group)
    except Broadcasting:
        return MessageTrack(group, "CONSUME_BROADCASTING")
    except CommandError as exc:  # no offsets on any broker yet
        return MessageTrack(group, "NOT_ONLINE", f"CODE:{ResponseCode.CONSUMER_NOT_ONLINE} DESC:{exc}")
    except Exception as exc:
        return MessageTrack(group, "UNKNOWN", str(exc))
    if not consumed:
        return MessageTrack(group, "NOT_CONSUME_YET")
    sub = next((s for t, s in conn.subscription_table.items() if t == msg.topic), None)
    tags = set(sub.tags_set or ()) if sub is not None else set()
    if sub is not None and tags and msg.tags not in tags and "*" not in tags:
        return MessageTrack(group, "CONSUMED_BUT_FILTERED")
    return MessageTrack(group, "CONSUMED")


@defer.inlineCallbacks
def _consumed(ctx: Context, msg: MessageExt, group: str):
    """Whether the group's committed offset on the message's queue (at the broker that stored it) is past it."""
    stats = yield consume_stats(ctx, group)
    info = yield ctx.admin.namesrv.get_cluster_info()
    store_host = "%s:%d" % msg.store_host
    for mq, off in stats.offset_table.items():
        if mq.topic != msg.topic or mq.queue_id != msg.queue_id:
            continue
        broker = info.broker_addr_table.get(mq.broker_name)
        if broker is not None and broker.broker_addrs.get(MASTER_ID) == store_host \
                and off.consumer_offset > msg.queue_offset:
            return True
    return False
