"""``apache.rocketmq.v2.MessagingService`` answered from the broker of this process.

The service runs on the gRPC server's asyncio loop, the reactor's own or one in a thread of its own
(:mod:`.server`); what it asks of the broker runs in the reactor thread (:mod:`.reactor`). A send is stored by the broker's send processor with a send's checks and outcome but no request
to encode, dispatch and decode again (:meth:`~ferrymq.server.broker.processors.send.SendProcessor.store`,
as the MQTT gateway stores); an END_TRANSACTION (and a send to a retry topic, which the broker's send may
rewrite to its DLQ) goes through the broker's own request table (:class:`ferrymq.remoting.local.LocalPeer`),
as the remoting clients' requests do, so the broker's checks and answers are the ones a remoting producer
gets. Topic configs are read directly: a dict lookup.

Every unary method answers with gRPC status OK and the outcome in the response's ``status``, as the
proxy does; the consumer methods are :class:`.consumer.ConsumerMethods`. PullMessage and the offset
methods answer gRPC UNIMPLEMENTED, the servicer's default, as Apache 5.5.0's proxy answers them.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import itertools
import logging
import time
import zlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

import grpc
from twisted.internet import defer

from ferrymq.remoting.errors import RemotingTimeoutError
from ferrymq.server.ha.roles import refuses_sends
from ferrymq.remoting.local import LocalChannel, LocalPeer, within
from ferrymq.server.broker.clients import CHANNEL_EXPIRED_TIMEOUT_MS, ClientChannelInfo
from ferrymq.server.broker.processors.common import peer_host
from ferrymq.server.broker.tag_subscriptions import build_subscription
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.errors import Refusal
from ferrymq.wire.command import request as new_request
from ferrymq.wire.headers import (
    CheckTransactionStateRequestHeader,
    EndTransactionRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
)
from ferrymq.wire.message import (
    MessageConst,
    MessageExt,
    MessageSysFlag,
    decode_record,
    encode_properties,
)
from ferrymq.wire.msgid import parse_offset_msg_id
from ferrymq.wire.requests import encode_request_header
from ferrymq.wire.topics import AUTO_CREATE_TOPIC, RETRY_GROUP_TOPIC_PREFIX

from . import admin_relay, recall, route
from .calls import CLIENT_ID, LANGUAGE, check_topic, metadata, peer
from .consumer import ConsumerMethods, _now_ms, check_group
from .messages import Limits, Outgoing, to_message, to_outgoing
from .protocol import Code, pb, service, service_grpc
from .reactor import in_reactor, to_reactor
from .policies import ConsumerPolicy, ProducerPolicy, RenewalPolicy
from .renewals import Renewals
from .settings import answer
from .status import OK, SEND_STATUS, STORED_STATUS, Refused, from_remoting, status

log = logging.getLogger("ferrymq.grpc")

#: half messages whose END_TRANSACTION data is kept (the oldest forgotten first)
TRANSACTIONS_KEPT = 100_000
#: seconds a broker call may take before the client is answered PROXY_TIMEOUT
BROKER_TIMEOUT = 3.0
#: the topic a send names for the broker to create a topic from, and its queues (the producer's defaults)
DEFAULT_TOPIC_QUEUE_NUMS = 4
#: seconds between two looks for clients without a Telemetry stream gone silent (the proxy's cleaner's period)
SILENT_CHECK_PERIOD = 5.0


@dataclass(frozen=True, slots=True)
class BrokerSide:
    """What the service needs of the broker: its name, topic, producer and request (``processor``) tables,
    its consumer groups, its POP, its name servers (``namesrvs()``: NamesrvPeer's, read in the reactor
    thread) and its send processor (``sends``: without it, sends go through the request table)."""

    name: str
    topics: Any  # TopicConfigManager
    producers: Any  # ProducerManager
    processor: Any
    groups: Any = None  # SubscriptionGroupManager
    pop: Any = None  # PopService
    namesrvs: Callable[[], Sequence[Any]] = tuple
    consumers: Any = None  # ConsumerManager
    sends: Any = None  # SendProcessor

    def call(self, cmd: RemotingCommand, remote: str):
        """``cmd`` answered by the broker's request table; call in the reactor thread."""
        return LocalPeer(self.processor, remote).invoke(cmd, BROKER_TIMEOUT)

    def store(self, msg: MessageExt, remote: str):
        """``msg`` stored on its queue with a send's checks, as if ``remote`` had sent it: the
        PutMessageResult, or a Deferred of it; a refusal raises (or fails the Deferred with) a Refusal.
        Call in the reactor thread."""
        channel = LocalChannel(remote)
        msg.born_host = peer_host(channel)
        queue_id = msg.queue_id
        return within(self.sends.store(msg, lambda _writable: queue_id, AUTO_CREATE_TOPIC, DEFAULT_TOPIC_QUEUE_NUMS,
                                       channel),
                      BROKER_TIMEOUT, _reactor(),
                      lambda: RemotingTimeoutError(remote, RequestCode.SEND_MESSAGE_V2, 0, BROKER_TIMEOUT))


class TelemetryChannel:
    """A gRPC client as the broker's producer and consumer tables hold it: a producer under each topic it
    publishes to (the producer group of its messages), a consumer under its group. What the broker writes
    to it, in the reactor thread, reaches the client on its Telemetry stream: a CHECK_TRANSACTION_STATE
    as a RecoverOrphanedTransactionCommand (``deliver``), an admin's question (:meth:`invoke`) as
    :mod:`.admin_relay` words it (``ask``)."""

    __slots__ = ("client_id", "remote_address", "_deliver", "_ask", "_open")

    def __init__(self, client_id: str, remote_address: str, deliver: Callable[[RemotingCommand], None],
                 ask: Callable[[RemotingCommand, defer.Deferred], None], is_open: Callable[[], bool]):
        self.client_id = client_id
        self.remote_address = remote_address
        self._deliver = deliver
        self._ask = ask
        self._open = is_open

    @property
    def is_active(self) -> bool:
        return self._open()

    def invoke_oneway(self, cmd: RemotingCommand) -> None:
        if cmd.code == RequestCode.CHECK_TRANSACTION_STATE:  # the rest (rebalance notices) is for remoting clients
            self._deliver(cmd)

    def invoke(self, cmd: RemotingCommand, timeout: float) -> defer.Deferred:
        """The client's answer to ``cmd`` as the broker's reply; fails after ``timeout`` s without one."""
        answered: defer.Deferred = defer.Deferred()
        answered.addTimeout(timeout, _reactor())
        self._ask(cmd, answered)
        return answered

    def __repr__(self) -> str:
        return f"<TelemetryChannel {self.client_id} {self.remote_address}>"


@dataclass(slots=True)
class _Client:
    settings: pb.Settings | None = None
    #: commands for the client's Telemetry stream (check-backs), None while no stream is open
    outbox: asyncio.Queue | None = None
    #: the client in the broker's producer table, once its settings name the topics it publishes to
    channel: TelemetryChannel | None = None
    language: str = ""
    #: the admin questions sent to the client, by nonce: (the broker's request, its answer to fire)
    asked: dict[str, tuple[RemotingCommand, defer.Deferred]] = field(default_factory=dict)
    #: when its settings or heartbeat last came (ms)
    seen_ms: int = 0


@dataclass(frozen=True, slots=True)
class _HalfMessage:
    commit_log_offset: int
    queue_offset: int


def _reactor():
    from twisted.internet import reactor

    return reactor


def _fire(answered: defer.Deferred, reply: RemotingCommand) -> None:
    if not answered.called:  # not timed out meanwhile
        answered.callback(reply)


def _answers(response_type: type) -> Callable:
    """A unary method answered ``response_type(status=...)`` when it is refused or fails."""

    def wrap(method: Callable) -> Callable:
        @functools.wraps(method)
        async def unary(self, request, context):
            try:
                return await method(self, request, context)
            except Refused as refused:
                return response_type(status=refused.status())
            except RemotingTimeoutError as exc:
                return response_type(status=status(Code.PROXY_TIMEOUT, str(exc)))
            except Exception as exc:  # noqa: BLE001 - answered, as the proxy answers its own failures
                log.exception("gRPC %s failed", method.__name__)
                return response_type(status=status(Code.INTERNAL_SERVER_ERROR, repr(exc)))

        return unary

    return wrap


class MessagingService(ConsumerMethods, service_grpc.MessagingServiceServicer):
    """The v2 service of one broker; ``limits`` and ``producer`` are the proxy keys' values. The server
    may listen before the broker has started (:attr:`broker` None until then): its calls are refused
    meanwhile."""

    def __init__(self, broker: BrokerSide | None = None, limits: Limits | None = None,
                 producer: ProducerPolicy | None = None, consumer: ConsumerPolicy | None = None,
                 renewal: RenewalPolicy | None = None):
        self._broker = broker
        self.renewals = Renewals(renewal or RenewalPolicy())
        self.consumer = consumer or ConsumerPolicy()
        self.limits = limits or Limits()
        self.producer = producer or ProducerPolicy()
        self.clients: dict[str, _Client] = {}
        self._transactions: collections.OrderedDict[tuple[str, str], _HalfMessage] = collections.OrderedDict()
        self._round_robin = itertools.count()
        #: the task forgetting clients gone silent, while some client has no Telemetry stream
        self._watching: asyncio.Task | None = None

    @property
    def broker(self) -> BrokerSide:
        if self._broker is None:
            raise Refused(Code.INTERNAL_SERVER_ERROR, "the broker is starting")
        return self._broker

    @broker.setter
    def broker(self, broker: BrokerSide) -> None:
        self._broker = broker

    # ------------------------------------------------------------------ clients

    def _client_id(self, context: grpc.aio.ServicerContext) -> str:
        client_id = metadata(context, CLIENT_ID)
        if not client_id.strip():
            raise Refused(Code.CLIENT_ID_REQUIRED, "client id cannot be empty")
        return client_id

    @_answers(service.HeartbeatResponse)
    async def Heartbeat(self, request, context):
        client = self.clients.get(self._client_id(context))
        if client is None or client.settings is None:
            raise Refused(Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
        client.seen_ms = _now_ms()
        self._register(client)  # a client stays in the broker's tables while it heartbeats
        return service.HeartbeatResponse(status=OK)

    @_answers(service.NotifyClientTerminationResponse)
    async def NotifyClientTermination(self, request, context):
        """The client is gone: out of the broker's tables, and the messages it was receiving with auto_renew
        visible again shortly (invisibleTimeMillisWhenClear)."""
        client_id = self._client_id(context)
        client = self.clients.get(client_id)
        if client is None or client.settings is None:
            raise Refused(Code.UNRECOGNIZED_CLIENT_TYPE, "cannot find client settings for this client")
        if client.settings.HasField("subscription"):
            check_group(request.group)
        del self.clients[client_id]
        self._unregister(client)
        await self._renew(self.renewals.clear(client_id))
        return service.NotifyClientTerminationResponse(status=OK)

    async def Telemetry(self, request_iterator, context):
        """Each Settings the client sends is answered with the server's; the stream stays open for the
        commands the server sends the client later (``_Client.outbox``)."""
        try:
            client_id = self._client_id(context)
        except Refused as refused:
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, refused.message)
        client = self.clients.setdefault(client_id, _Client())
        client.language = metadata(context, LANGUAGE) or client.language
        if client.channel is None:
            loop = asyncio.get_running_loop()
            client.channel = TelemetryChannel(
                client_id, peer(context), lambda cmd: loop.call_soon_threadsafe(self._recover, client, cmd),
                lambda cmd, answered: loop.call_soon_threadsafe(self._ask, client, cmd, answered),
                lambda: client.outbox is not None)
        outbox: asyncio.Queue = asyncio.Queue()
        client.outbox = outbox
        reader = asyncio.ensure_future(self._read_telemetry(client, request_iterator, outbox))
        try:
            while True:
                command = await outbox.get()
                if command is None:
                    return
                if isinstance(command, BaseException):
                    code = grpc.StatusCode.INVALID_ARGUMENT if isinstance(command, Refused) else grpc.StatusCode.INTERNAL
                    await context.abort(code, f"process client telemetryCommand failed. {command}")
                yield command
        finally:
            reader.cancel()
            if client.outbox is outbox:  # the client's stream, not a newer one
                # kept, as the proxy keeps it, until it says it terminates or its heartbeats stop
                client.outbox = None
                if self._watching is None:
                    self._watching = asyncio.ensure_future(self._forget_silent())

    async def _forget_silent(self) -> None:
        """Every :data:`SILENT_CHECK_PERIOD` while some client has no Telemetry stream: forget those whose
        settings and heartbeats stopped ``channelExpiredTimeout`` ago (the broker's tables drop them then),
        handing back the messages they were receiving with auto_renew."""
        try:
            while any(client.outbox is None for client in self.clients.values()):
                await asyncio.sleep(SILENT_CHECK_PERIOD)
                silent_since = _now_ms() - CHANNEL_EXPIRED_TIMEOUT_MS
                for client_id, client in list(self.clients.items()):
                    if client.outbox is None and client.seen_ms < silent_since:
                        del self.clients[client_id]
                        self._unregister(client)
                        await self._renew(self.renewals.clear(client_id))
        except Exception:  # noqa: BLE001 - the next stream to end starts it again
            log.exception("gRPC: forgetting silent clients failed")
        finally:
            self._watching = None

    async def _read_telemetry(self, client: _Client, request_iterator, outbox: asyncio.Queue) -> None:
        try:
            async for command in request_iterator:
                if command.WhichOneof("command") == "settings":
                    outbox.put_nowait(await self._settings(client, command.settings))
                elif (nonce := admin_relay.nonce_of(command)) is not None and nonce in client.asked:
                    cmd, answered = client.asked.pop(nonce)
                    to_reactor(_fire, answered, admin_relay.reply(cmd, command))
            outbox.put_nowait(None)
        except asyncio.CancelledError:
            raise
        except Exception as exc:  # noqa: BLE001 - the stream ends with it
            outbox.put_nowait(exc)

    async def _settings(self, client: _Client, settings: pb.Settings) -> pb.TelemetryCommand:
        kind = settings.WhichOneof("pub_sub")
        if kind is None:
            raise Refused(Code.BAD_REQUEST, "there is no publishing or subscription data in settings")
        group = None
        if kind == "publishing":
            for topic in settings.publishing.topics:
                check_topic(topic)
        else:
            check_group(settings.subscription.group)
            group = await in_reactor(self._consumer_group, settings.subscription.group.name)
        client.settings = settings
        client.seen_ms = _now_ms()
        self._register(client)
        answered = answer(settings, self.producer, self.limits.maxMessageSize, self.consumer, group)
        return service.TelemetryCommand(status=OK, settings=answered)

    def _consumer_group(self, name: str):
        """A consumer's group: one the broker has, as the proxy takes no consumer of an unknown group (its
        Telemetry stream ends INVALID_ARGUMENT), whatever autoCreateSubscriptionGroup says."""
        groups = self.broker.groups
        config = groups.table.get(name) if groups is not None else None
        if config is None:
            raise Refused(Code.CONSUMER_GROUP_NOT_FOUND, f"group not found: {name}")
        return config

    def _register(self, client: _Client) -> None:
        """Put (or refresh) a client in the broker's tables: a publishing one in the producer table under
        its topics, a consumer in the consumer table under its group (as the proxy registers them: mqadmin
        lists them, and reaches them with its questions)."""
        if client.channel is None or client.settings is None:
            return
        info = ClientChannelInfo(client.channel, client.channel.client_id, client.language, 0, int(time.time() * 1000),
                                 client.channel.remote_address)
        if client.settings.HasField("publishing"):
            topics = [topic.name for topic in client.settings.publishing.topics]
            producers = self.broker.producers
            to_reactor(lambda: [producers.register(topic, info) for topic in topics])
        elif self.broker.consumers is not None:
            subscription = client.settings.subscription
            consume_type = "CONSUME_PASSIVELY" if client.settings.client_type == pb.PUSH_CONSUMER else "CONSUME_ACTIVELY"
            subscriptions = [build_subscription(entry.topic.name, entry.expression.expression or "*",
                                                "SQL92" if entry.expression.type == pb.SQL else "TAG")
                             for entry in subscription.subscriptions]
            to_reactor(self.broker.consumers.register, subscription.group.name, info, consume_type,
                                      "CLUSTERING", "CONSUME_FROM_LAST_OFFSET", subscriptions)

    def _unregister(self, client: _Client) -> None:
        broker = self._broker
        if client.channel is not None and broker is not None:
            to_reactor(broker.producers.channel_closed, client.channel)
            if broker.consumers is not None:
                to_reactor(broker.consumers.channel_closed, client.channel)

    def _ask(self, client: _Client, cmd: RemotingCommand, answered: defer.Deferred) -> None:
        """An admin's question (:mod:`.admin_relay`) to ``client`` over its Telemetry stream."""
        try:
            if client.outbox is None:
                raise admin_relay.Unanswerable("its Telemetry stream is closed")
            nonce, command = admin_relay.question(cmd)
        except admin_relay.Unanswerable as exc:
            to_reactor(_fire, answered, cmd.response(ResponseCode.SYSTEM_ERROR, str(exc), {}))
            return
        client.asked[nonce] = (cmd, answered)
        client.outbox.put_nowait(command)

    def _recover(self, client: _Client, cmd: RemotingCommand) -> None:
        """The broker asks ``client`` about a half message: remember the half (its copy is the open one)
        for the EndTransaction the answer brings, and pass the question on over Telemetry."""
        if client.outbox is None:
            log.info("check-back for %s dropped: its Telemetry stream is closed", client.channel)
            return
        header = CheckTransactionStateRequestHeader.from_ext(cmd.ext_fields or {})
        half, _size = decode_record(cmd.body)
        transaction_id = header.transaction_id or half.properties.get(MessageConst.UNIQ_KEY, "")
        self._transactions[(half.topic, transaction_id)] = _HalfMessage(header.commit_log_offset,
                                                                         header.tran_state_table_offset)
        client.outbox.put_nowait(service.TelemetryCommand(
            recover_orphaned_transaction_command=service.RecoverOrphanedTransactionCommand(
                message=to_message(half), transaction_id=transaction_id)))

    # ------------------------------------------------------------------ routes

    @_answers(service.QueryRouteResponse)
    async def QueryRoute(self, request, context):
        check_topic(request.topic)
        config = self._topic(request.topic.name)
        brokers = await self._cluster_queues(request.topic.name, config)
        queues = route.message_queues(brokers, request.topic, request.endpoints, route.topic_message_type(config))
        return service.QueryRouteResponse(status=OK, message_queues=queues)

    async def _cluster_queues(self, topic: str, config) -> list[route.BrokerQueues]:
        broker = self.broker
        found = await in_reactor(lambda: route.ask_route(broker.namesrvs(), topic))
        return route.cluster_queues(broker.name, config, found)

    def _topic(self, name: str):
        config = self.broker.topics.get(name)
        if config is None:
            raise Refused(Code.TOPIC_NOT_FOUND, f"No topic route info in name server for the topic: {name}")
        return config

    # ------------------------------------------------------------------ sends

    @_answers(service.SendMessageResponse)
    async def SendMessage(self, request, context):
        self._client_id(context)
        if not request.messages:
            raise Refused(Code.MESSAGE_CORRUPTED, "no message to send")
        topic = request.messages[0].topic
        check_topic(topic)
        remote = peer(context)
        outgoing = []
        for message in request.messages:
            if message.topic != topic:
                raise Refused(Code.MESSAGE_CORRUPTED, "topic in message is not same")
            # the producer group is the topic's name: a check-back asks the topic's gRPC producers
            outgoing.append(to_outgoing(message, topic.name, remote, self.limits))
        # the type check comes first, as the proxy's: a topic this broker lacks is of type UNSPECIFIED
        _check_message_type(self.broker.topics.get(topic.name), _message_type(outgoing[0]))
        config = self._topic(topic.name)
        queue_id = self._queue(config, outgoing[0].message_group if len(outgoing) == 1 else "")
        entries = [await self._send(topic.name, queue_id, message, remote) for message in outgoing]
        codes = {entry.status.code for entry in entries}
        code = codes.pop() if len(codes) == 1 else Code.MULTIPLE_RESULTS
        return service.SendMessageResponse(status=status(code), entries=entries)

    def _queue(self, config, message_group: str) -> int:
        """A writable queue: the message group's own (a FIFO group stays on one queue), else the next."""
        writable = route.writable_queues(config)
        if not writable:
            raise Refused(Code.FORBIDDEN, "no writable queue")
        if message_group:
            return zlib.crc32(message_group.encode()) % writable
        return next(self._round_robin) % writable

    async def _send(self, topic: str, queue_id: int, message: Outgoing, remote: str) -> service.SendResultEntry:
        broker = self.broker
        if broker.sends is None or topic.startswith(RETRY_GROUP_TOPIC_PREFIX) or refuses_sends(broker.processor):
            return await self._send_request(topic, queue_id, message, remote)
        msg = MessageExt(topic=topic, body=message.body, properties=message.properties, queue_id=queue_id,
                         sys_flag=message.sys_flag, born_timestamp=message.born_timestamp)
        try:
            stored = await in_reactor(broker.store, msg, remote)
        except Refusal as refusal:
            raise Refused(from_remoting(refusal.code), refusal.remark or str(refusal.code)) from None
        code = STORED_STATUS[stored.status]
        uniq_key = message.properties[MessageConst.UNIQ_KEY]
        # the flag first: few sends are transactional, and a protobuf enum's attribute is a slow lookup
        if MessageSysFlag.transaction_type(message.sys_flag) == MessageSysFlag.TRANSACTION_PREPARED_TYPE and code == Code.OK:
            self._remember_half(topic, uniq_key, stored.msg_id, stored.queue_offset)
        return service.SendResultEntry(status=status(code), message_id=uniq_key, transaction_id=uniq_key,
                                       offset=stored.queue_offset, recall_handle=recall.handle_of(msg.properties,
                                                                                                  broker.name))

    async def _send_request(self, topic: str, queue_id: int, message: Outgoing,
                            remote: str) -> service.SendResultEntry:
        """:meth:`_send` as a SEND_MESSAGE_V2 through the broker's request table."""
        header = SendMessageRequestHeader(
            producer_group=message.properties[MessageConst.PRODUCER_GROUP], topic=topic, default_topic=AUTO_CREATE_TOPIC,
            default_topic_queue_nums=4, queue_id=queue_id, sys_flag=message.sys_flag,
            born_timestamp=message.born_timestamp, flag=0, properties=encode_properties(message.properties),
            reconsume_times=0, unit_mode=False, batch=False, broker_name=self.broker.name)
        cmd = new_request(RequestCode.SEND_MESSAGE_V2, encode_request_header(RequestCode.SEND_MESSAGE_V2, header),
                          message.body)
        reply = await in_reactor(self.broker.call, cmd, remote)
        code = SEND_STATUS.get(reply.code)
        if code is None:
            raise Refused(from_remoting(reply.code), reply.remark or str(reply.code))
        sent = SendMessageResponseHeader.from_ext(reply.ext_fields or {})
        uniq_key = message.properties[MessageConst.UNIQ_KEY]
        if code == Code.OK and MessageSysFlag.transaction_type(message.sys_flag) == MessageSysFlag.TRANSACTION_PREPARED_TYPE:
            self._remember_half(topic, sent.transaction_id or uniq_key, sent.msg_id, sent.queue_offset)
        return service.SendResultEntry(status=status(code), message_id=uniq_key,
                                       transaction_id=sent.transaction_id or "", offset=sent.queue_offset)

    # ------------------------------------------------------------------ transactions

    def _remember_half(self, topic: str, transaction_id: str, msg_id: str, queue_offset: int) -> None:
        _host, commit_log_offset = parse_offset_msg_id(msg_id)
        self._transactions[(topic, transaction_id)] = _HalfMessage(commit_log_offset, queue_offset)
        while len(self._transactions) > TRANSACTIONS_KEPT:
            self._transactions.popitem(last=False)

    @_answers(service.EndTransactionResponse)
    async def EndTransaction(self, request, context):
        self._client_id(context)
        check_topic(request.topic)
        half = self._transactions.pop((request.topic.name, request.transaction_id), None)
        if half is None:
            # the proxy's TRANSACTION_DATA_NOT_FOUND, which it reports as an internal error
            raise Refused(Code.INTERNAL_SERVER_ERROR, "cannot found transaction data")
        header = EndTransactionRequestHeader(
            producer_group=request.topic.name, tran_state_table_offset=half.queue_offset,
            commit_log_offset=half.commit_log_offset, commit_or_rollback=_RESOLUTION.get(request.resolution, 0),
            msg_id=request.message_id, from_transaction_check=request.source == pb.SOURCE_SERVER_CHECK,
            transaction_id=request.transaction_id, topic=request.topic.name, broker_name=self.broker.name)
        cmd = new_request(RequestCode.END_TRANSACTION, encode_request_header(RequestCode.END_TRANSACTION, header))
        answered = await in_reactor(self.broker.call, cmd, peer(context))
        if answered is not None and answered.code != ResponseCode.SUCCESS:
            raise Refused(from_remoting(answered.code), answered.remark or str(answered.code))
        return service.EndTransactionResponse(status=OK)


    # ------------------------------------------------------------------ recall

    @_answers(service.RecallMessageResponse)
    async def RecallMessage(self, request, context):
        """Refused after the proxy's checks, as Apache's proxy refuses it without recallMessageEnable
        (:mod:`.recall`)."""
        self._client_id(context)
        check_topic(request.topic)
        if self.producer.enableTopicMessageTypeCheck:
            _check_message_type(self.broker.topics.get(request.topic.name), "DELAY")
        recall.parse(request.recall_handle)
        raise Refused(Code.INTERNAL_SERVER_ERROR, recall.FORBIDDEN)


_RESOLUTION = {pb.COMMIT: MessageSysFlag.TRANSACTION_COMMIT_TYPE, pb.ROLLBACK: MessageSysFlag.TRANSACTION_ROLLBACK_TYPE}


_DELAY_KEYS = (MessageConst.DELAY_TIME_LEVEL, MessageConst.TIMER_DELIVER_MS, MessageConst.TIMER_DELAY_SEC,
               MessageConst.TIMER_DELAY_MS)


def _message_type(message: Outgoing) -> str:
    """The type the proxy reads off a message's properties (TopicMessageType.parseFromMessageProperty)."""
    props = message.properties
    if props.get(MessageConst.TRANSACTION_PREPARED) == "true":
        return "TRANSACTION"
    if any(key in props for key in _DELAY_KEYS):
        return "DELAY"
    if MessageConst.SHARDING_KEY in props:
        return "FIFO"
    return "NORMAL"


def _check_message_type(config, actual: str) -> None:
    """A message of type ``actual`` refused on a topic (``config``: None when the broker lacks it) of another."""
    expected = route.topic_message_type(config)
    if actual != expected and expected != "MIXED":
        raise Refused(Code.MESSAGE_PROPERTY_CONFLICT_WITH_TYPE,
                      f"TopicMessageType validate failed, the expected type is {expected}, but actual type is {actual}")
