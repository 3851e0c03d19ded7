"""The gateway's RocketMQ side: one client identity holding the publishing producer, the HTTP consumer
groups, the transactional producers (:mod:`.transactions`) and an admin client, all on
:mod:`ferrymq.sdk.aio`, on the event loop that serves HTTP."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from ferrymq.remoting import Processor
from ferrymq.remoting.local import LocalPeer
from ferrymq.sdk import reactor_thread
from ferrymq.sdk.aio import MQAdmin, Producer
from ferrymq.sdk.client_config import ClientConfig
from ferrymq.sdk.client_instance import ClientInstance
from ferrymq.sdk.consumer.rebalance import MessageModel
from ferrymq.sdk.aio.bridge import call
from ferrymq.sdk.message import Message
from ferrymq.sdk.producer import LocalTransactionState
from ferrymq.wire.message import DEFAULT_MAX_MESSAGE_SIZE, MessageConst

from ..access import Access
from ..store_send import StoreSend
from .consumers import IDLE_SECONDS, GroupConsumer, unknown_handle
from .problems import Problem
from .transactions import TRANSACTIONS_KEPT, State, Transaction, TransactionFile, Transactions

log = logging.getLogger("ferrymq.gateway.http")

#: the producer group of plain (not transactional) publishes; it shows in the brokers' producer lists
PRODUCER_GROUP = "FERRYMQ_HTTP_PRODUCER"
#: how often idle consumer groups are looked for
_IDLE_CHECK_SECONDS = 10.0
#: how often, and how many times, the route of a restored transaction's topic is asked for
_RESTORE_ROUTE_PAUSE = 0.5
_RESTORE_ROUTE_TRIES = 120


class Gateway:
    """What the HTTP routes call. Start and stop it on the loop that serves them."""

    def __init__(self, namesrv_addr: str, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 client_config: dict[str, Any] | None = None, local_offset_dir: str | None = None,
                 idle_seconds: float = IDLE_SECONDS, check_back_secret: str = "", check_back_timeout: float = 3.0,
                 transaction_file: str | os.PathLike | None = None, console_sample_interval: float | None = None):
        self.namesrv_addr = namesrv_addr
        #: where broadcasting clients' offsets are kept (None: the SDK's default, ~/.rocketmq_offsets)
        self.local_offset_dir = local_offset_dir
        self.idle_seconds = idle_seconds
        self.max_message_size = max_message_size
        self._config_kwargs = dict(client_config or {})
        self._config_kwargs.setdefault("instance_name", f"ferrymq-http-{os.getpid()}")
        self._instance: ClientInstance | None = None
        self.producer: Producer | None = None
        self.admin: MQAdmin | None = None
        self.groups: dict[str, GroupConsumer] = {}
        #: BROADCASTING consumers by (group, client)
        self.broadcasts: dict[tuple[str, str], GroupConsumer] = {}
        self._idle_task: asyncio.Task | None = None
        self._announcing: asyncio.Task | None = None
        #: transactional producers by group, and the transactions published through them (the open ones
        #: kept in ``transaction_file`` too, when one is named, and taken back by :meth:`start`)
        self.transactions = Transactions(check_back_secret, check_back_timeout,
                                         TransactionFile(transaction_file) if transaction_file else None)
        self.transactional: dict[str, Producer] = {}
        self._transactional_lock = asyncio.Lock()
        self._announced: set[tuple[str, str]] = set()  # (group, broker name) a heartbeat has named the group to
        #: the broker of this process, if any: (its address, its request table, the sends' BORNHOST)
        self._local_broker: tuple[str, Processor, str] | None = None
        #: that broker's send processor, if publishes to it are stored through it
        self._local_sends: Any = None
        #: the figures of the broker of this process, if any (a :class:`~ferrymq.server.broker.metrics.BrokerMetrics`),
        #: served on /metrics beside the process's own
        self.broker_metrics: Any = None
        #: the users and ACLs of the broker of this process when it checks them (docs/http.md); None:
        #: requests are served unchecked
        self.access: Access | None = None
        #: seconds between the web console's TPS samples; None: no console (docs/console.md)
        self.console_sample_interval = console_sample_interval

    def send_in_process(self, addr: str, processor: Processor, born_host: str) -> None:
        """Hand the sends to the broker at ``addr`` straight to its request table (call before
        :meth:`start`): the gateway served by a broker process publishes to it without a socket. Queue
        selection, retries and the broker's answers stay the client's, as for any other broker."""
        self._local_broker = (addr, processor, born_host)

    def store_in_process(self, sends: Any) -> None:
        """Store the publishes to the broker that :meth:`send_in_process` names through ``sends``, its send
        processor, without a send request (call before :meth:`start`; :mod:`ferrymq.gateways.store_send`):
        the producer still picks each publish's queue, retries it and answers it."""
        self._local_sends = sends

    def _client_kwargs(self) -> dict[str, Any]:
        return {"config": self._instance.config, "instance": self._instance}

    async def start(self) -> None:
        config = ClientConfig(self.namesrv_addr, **self._config_kwargs)
        reactor_thread.ensure_running()
        self._instance = reactor_thread.call(lambda: self._client_instance(config))
        self.producer = Producer(PRODUCER_GROUP, max_message_size=self.max_message_size, **self._client_kwargs())
        if self._local_sends is not None and self._local_broker is not None:
            addr, processor, born_host = self._local_broker
            core = self.producer.core
            core.store_in_process = StoreSend(self._local_sends, processor, addr, born_host, core)
        await self.producer.start()
        # the instance's connections: the admin requests go with its TLS and are signed with its credentials
        self.admin = MQAdmin(self.namesrv_addr, client=self._instance.remoting)
        await self._restore_transactions()
        self._idle_task = asyncio.get_running_loop().create_task(self._stop_idle_groups())
        log.info("HTTP gateway in front of name server(s) %s as client %s", self.namesrv_addr, config.client_id)

    async def _restore_transactions(self) -> None:
        """Take back the open transactions of an earlier run and start their groups' producers; their
        brokers learn of the groups in the background (:meth:`_announce_restored`)."""
        restored = self.transactions.load()
        if not restored:
            return
        for group in {tx.producer_group for tx in restored}:
            await self.transactional_producer(group)
        self._announcing = asyncio.get_running_loop().create_task(self._announce_restored(restored))
        log.info("HTTP transactions: %d open ones of an earlier run taken back (%s)", len(restored),
                 self.transactions.file.path)

    async def _announce_restored(self, restored: list[Transaction]) -> None:
        """Heartbeat the restored groups to the brokers holding their half messages, so that the checks
        of those come here again, once the routes of their topics name the brokers: a broker of this
        process registers with the name servers while its gateway starts."""
        waiting = {tx.topic for tx in restored}
        for _ in range(_RESTORE_ROUTE_TRIES):
            for topic in sorted(waiting):
                try:
                    if await call(self._instance.update_route, topic) is not None:
                        waiting.discard(topic)
                except Exception as exc:  # noqa: BLE001 - asked again below
                    log.debug("route of %s: %s", topic, exc)
            if not waiting:
                break
            await asyncio.sleep(_RESTORE_ROUTE_PAUSE)
        else:
            log.warning("open HTTP transactions of topics %s: no route names their brokers; their checks "
                        "come here once a publish or a commit finds the route", sorted(waiting))
        await call(self._instance.send_heartbeat_to_all)
        self._announced.update((tx.producer_group, tx.broker_name) for tx in restored if tx.topic not in waiting)

    def _client_instance(self, config: ClientConfig) -> ClientInstance:
        instance = ClientInstance(config)
        if self._local_broker is not None:
            addr, processor, born_host = self._local_broker
            instance.api.local_brokers[addr] = LocalPeer(processor, born_host)
        return instance

    async def stop(self) -> None:
        for task in (self._idle_task, self._announcing):
            if task is not None:
                task.cancel()
        for group in [*self.groups.values(), *self.broadcasts.values()]:
            await group.stop()
        self.groups.clear()
        self.broadcasts.clear()
        for producer in self.transactional.values():
            await producer.stop()
        self.transactional.clear()
        await self.transactions.close()
        if self.producer is not None:
            producer, self.producer = self.producer, None
            await producer.stop()
        if self.admin is not None:
            await self.admin.close()
        if self._instance is not None:
            await call(self._instance.shutdown)

    def require_started(self) -> None:
        if self.producer is None:
            raise Problem(503, "the gateway is starting (or stopping); try again in a moment")

    def group(self, name: str, max_reconsume_times: int) -> GroupConsumer:
        consumer = self.groups.get(name)
        if consumer is None:
            consumer = self.groups[name] = GroupConsumer(name, self._client_kwargs(), max_reconsume_times,
                                                         idle_seconds=self.idle_seconds)
        elif consumer.max_reconsume_times != max_reconsume_times:
            raise Problem(409, f"group {name} consumes with maxReconsumeTimes={consumer.max_reconsume_times} at "
                               f"this gateway; all its requests must ask for the same", "query.maxReconsumeTimes")
        return consumer

    def consumer(self, name: str, max_reconsume_times: int, model: str, client: str | None) -> GroupConsumer:
        """The group's consumer for a consume or stream request: the group's clustering consumer, or the
        broadcasting consumer of ``client``; a group is consumed one way or the other at this gateway."""
        if model == MessageModel.CLUSTERING:
            if client is not None:
                raise Problem(400, "client names a BROADCASTING consumer; a CLUSTERING group's requests "
                                   "share its messages whoever sends them", "query.client")
            if any(group == name and c.consuming for (group, _), c in self.broadcasts.items()):
                raise Problem(409, f"group {name} is consumed with model=BROADCASTING at this gateway; a "
                                   f"group is consumed one way at a time", "query.model")
            return self.group(name, max_reconsume_times)
        if client is None:
            raise Problem(400, "a BROADCASTING consumer names itself with client (each client gets every "
                               "message and has its own offsets)", "query.client")
        if name in self.groups and self.groups[name].consuming:
            raise Problem(409, f"group {name} is consumed with model=CLUSTERING at this gateway; a group is "
                               f"consumed one way at a time", "query.model")
        consumer = self.broadcasts.get((name, client))
        if consumer is None:
            config = ClientConfig(self.namesrv_addr, **{**self._config_kwargs, "instance_name": f"http-{client}"})
            consumer = self.broadcasts[name, client] = GroupConsumer(
                name, {"config": config, "local_offset_dir": self.local_offset_dir}, max_reconsume_times,
                MessageModel.BROADCASTING, self.idle_seconds)
        return consumer

    def settle(self, name: str, handles: list[str], consumed: bool, delay_level: int) -> int:
        """Ack or nack ``handles`` of group ``name``, whichever of its consumers here handed each out: all
        of them, or none when one is not handed out here."""
        consumers = [c for (group, _), c in self.broadcasts.items() if group == name]
        if name in self.groups:
            consumers.append(self.groups[name])
        if not consumers:
            raise Problem(404, f"no message of group {name} is handed out at this gateway", "/group")
        owners: dict[GroupConsumer, list[str]] = {}
        for i, handle in enumerate(handles):
            owner = next((c for c in consumers if c.holds(handle)), None)
            if owner is None:
                raise unknown_handle(name, handle, i)
            owners.setdefault(owner, []).append(handle)
        return sum(owner.settle(mine, consumed, delay_level) for owner, mine in owners.items())

    async def _stop_idle_groups(self) -> None:
        while True:
            await asyncio.sleep(min(_IDLE_CHECK_SECONDS, self.idle_seconds))
            for table in (self.groups, self.broadcasts):
                for key, group in list(table.items()):
                    if group.idle:
                        log.info("HTTP consumers of group %s (%s): no request for a while; stopping (a "
                                 "clustering group's queues go to its other consumers, a broadcasting client "
                                 "keeps its offsets)", group.group, group.model.value)
                        del table[key]
                        await group.stop()

    # ------------------------------------------------------------------ transactions (docs/http.md)

    async def transactional_producer(self, group: str) -> Producer:
        """The group's transactional producer, registered with the brokers so that their check-backs of
        the group's half messages come to this gateway."""
        producer = self.transactional.get(group)
        if producer is not None:
            return producer
        async with self._transactional_lock:
            if group not in self.transactional:
                producer = Producer(group, max_message_size=self.max_message_size,
                                    transaction_checker=self.transactions.check, **self._client_kwargs())
                await producer.start()
                self.transactional[group] = producer
                log.info("HTTP transactions of producer group %s: check-backs come to this gateway", group)
        return self.transactional[group]

    async def publish_half(self, group: str, check_back_url: str, msg: Message) -> Transaction:
        if not self.transactions.secret:
            raise Problem(403, "this gateway signs no check-back calls (httpCheckBackSecret is not set), so it "
                               "publishes no transactions; set httpCheckBackSecret in its config file")
        if group == PRODUCER_GROUP:
            raise Problem(400, f"{PRODUCER_GROUP} is the gateway's own group of plain publishes; name another",
                          "/producerGroup")
        producer = await self.transactional_producer(group)
        result, _ = await producer.send_message_in_transaction(msg, lambda m, a: LocalTransactionState.UNKNOW)
        broker_name = result.message_queue.broker_name
        if (group, broker_name) not in self._announced:
            # the group's first half message on this broker: name the group to it now, not at the next
            # periodic heartbeat, or the broker's first checks find no producer of the group and are lost
            await call(self._instance.send_heartbeat_to_all)
            self._announced.add((group, broker_name))
        keys = msg.properties.get(MessageConst.KEYS)
        # the transaction id is the message's UNIQ_KEY, as the Java producer's and the broker's are
        tx = Transaction(msg.uniq_key, msg.uniq_key, msg.topic, msg.properties.get(MessageConst.TAGS),
                         keys.split(MessageConst.KEY_SEPARATOR) if keys else [], group, check_back_url,
                         broker_name, result.offset_msg_id, result.queue_offset)
        self.transactions.add(tx)
        return tx

    def transaction(self, tx_id: str) -> Transaction:
        tx = self.transactions.get(tx_id)
        if tx is None:
            raise Problem(404, f"no transaction {tx_id} at this gateway (it knows the latest {TRANSACTIONS_KEPT} "
                               f"transactions published through it)", "path.id")
        return tx

    async def end_transaction(self, tx_id: str, state: State) -> Transaction:
        tx = self.transaction(tx_id)
        if tx.state is not State.UNKNOWN:
            raise Problem(409, f"transaction {tx_id} is resolved already: {tx.state.name} by the "
                               f"{tx.resolved_by}", "/action")
        tx.resolve(state, "client")  # before the await: a second request meanwhile is refused
        try:
            producer = await self.transactional_producer(tx.producer_group)
            await producer.end_transaction(tx.topic, tx.broker_name, tx.msg_id, tx.id, tx.offset_msg_id,
                                           tx.queue_offset, state.value)
        except BaseException:
            tx.state, tx.resolved_by, tx.resolved_at = State.UNKNOWN, None, None
            raise
        self.transactions.save()
        log.info("transaction %s: %s by the client", tx.id, state.name)
        return tx
