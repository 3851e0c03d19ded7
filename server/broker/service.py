"""The running broker: store + tables + processors behind two RemotingServers (listenPort and the VIP
channel listenPort-2), name-server registration and the periodic tasks.

``Broker(config).start()`` then ``stop()`` (a Deferred): stop answers held pulls, unregisters from the
name servers, drains the servers, persists offsets and configs, and shuts the store down cleanly.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from twisted.internet import defer, task
from twisted.internet.error import CannotListenError

from ferrymq.server.auth.control import AccessControl
from ferrymq.server.config import AuthConfig, BrokerConfig, ConfigError, NettyServerConfig, TlsConfig
from ferrymq.server.ha import HAMaster, HASlave
from ferrymq.server.ha.controller.broker_role import ControllerMode
from ferrymq.server.ha.roles import with_rejections
from ferrymq.server.ha.slave_sync import SlaveSynchronize
from ferrymq.remoting.local_address import local_ip
from ferrymq.remoting import Channel, RemotingServer
from ferrymq.remoting.dispatch import Route, routes
from ferrymq.server.store.config import MessageStoreConfig
from ferrymq.server.store.config_files import CONSUMER_OFFSETS, SUBSCRIPTION_GROUPS, TOPICS, config_file
from ferrymq.server.store.message_store import MessageStore
from ferrymq.server.write_queue import WriteQueue
from ferrymq.wire.codes import RequestCode
from ferrymq.wire.command import request
from ferrymq.wire.headers import NotifyConsumerIdsChangedRequestHeader

from .context import BrokerContext
from .pop.service import POP_STATE
from .processors.access import AccessAdminProcessor
from .registration import MAX_PERIOD_MS, MIN_PERIOD_MS, NameServerRegistration, perm_limited
from .request_modes import MESSAGE_REQUEST_MODE
from .wiring import build_broker

log = logging.getLogger("ferrymq.broker")

#: Apache's client housekeeping period (ClientHousekeepingService), ms.
CLIENT_SCAN_INTERVAL_MS = 10_000


def store_config_for(config: BrokerConfig, store_props: dict[str, str] | None = None, host: str = "") -> MessageStoreConfig:
    """MessageStoreConfig from the broker's keys of the same name, plus store-only keys of the file."""
    props = dict(store_props or {})
    store_fields = {f.name for f in dataclasses.fields(MessageStoreConfig)}
    for f in dataclasses.fields(config):
        if f.name in store_fields and f.name not in props:
            props[f.name] = str(getattr(config, f.name)).lower() if isinstance(getattr(config, f.name), bool) \
                else str(getattr(config, f.name))
    props["storeHost"] = f"{host}:{config.listenPort}"
    if not config.storePathCommitLog:
        props.pop("storePathCommitLog", None)  # derived from storePathRootDir
    return MessageStoreConfig.from_properties(props)


class LiveTable(Mapping):
    """A broker's request table as it is at each lookup, for callers in its process (the gateways, the gRPC
    service): a role the controller gives, or a sync state set short of minInSyncReplicas, swaps
    :attr:`Broker.table`, and an in-process send must be answered as a client's on the socket would."""

    __slots__ = ("_broker",)

    def __init__(self, broker: Broker):
        self._broker = broker

    def get(self, code: int, default: Route | None = None) -> Route | None:
        return self._broker.table.get(code, default)

    def __getitem__(self, code: int) -> Route:
        return self._broker.table[code]

    def __iter__(self) -> Iterator[int]:
        return iter(self._broker.table)

    def __len__(self) -> int:
        return len(self._broker.table)


class Broker:
    def __init__(self, config: BrokerConfig, netty: NettyServerConfig | None = None,
                 store_props: dict[str, str] | None = None, reactor: Any = None, auth: AuthConfig | None = None,
                 tls: TlsConfig | None = None):
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        self.config = config
        self.netty = netty or NettyServerConfig(listenPort=config.listenPort)
        #: None: plain listener and connections (what a Broker built in code gets; the CLI reads the tls.* keys)
        self.tls = tls
        self._client_tls = tls.client_tls() if tls is not None else None
        self.reactor = reactor
        self.ip = config.brokerIP1 or local_ip()
        self._store_props = store_props
        self.auth_config = auth or AuthConfig()
        self.access: AccessControl | None = None  # users and ACLs, built with the store
        self._writes = WriteQueue(self.reactor, f"{config.brokerName}-files")
        self._loops: list[task.LoopingCall] = []
        self.server: RemotingServer | None = None
        self.vip = False
        self.registration: NameServerRegistration | None = None
        self.store: MessageStore | None = None
        self.ctx: BrokerContext | None = None
        self.ha_master: HAMaster | None = None
        self.ha_slave: HASlave | None = None
        self.slave_sync: SlaveSynchronize | None = None
        self.controller_mode: ControllerMode | None = None
        self._registering: task.LoopingCall | None = None
        self._checks: task.LoopingCall | None = None
        self.ha_port = 0
        self.started = False

    # ------------------------------------------------------------------ wiring

    def _build(self, port: int) -> None:
        c = self.config
        store_config = store_config_for(c, self._store_props, self.ip)
        store_config.storeHost = f"{self.ip}:{port}"
        self.store = MessageStore(store_config)
        self.store.start()
        self._files = {name: config_file(store_config.config_dir, name)
                       for name in (TOPICS, SUBSCRIPTION_GROUPS, CONSUMER_OFFSETS, POP_STATE, MESSAGE_REQUEST_MODE)}
        parts = build_broker(c, self.store, self.reactor, store_host=(self.ip, port),
                             on_ids_changed=self._notify_ids_changed, on_config_change=self._config_changed)
        self.ctx = ctx = parts.ctx
        self.access = AccessControl(self.auth_config, store_config.config_dir, c.brokerClusterName)
        self.routes = {**parts.table, **routes([AccessAdminProcessor(self.access)])}
        if c.enableControllerMode:
            self.controller_mode = ControllerMode(self)
            self.routes.update(routes([self.controller_mode.processor]))
        self.table = with_rejections(self.routes, c)
        for name, target in ((TOPICS, ctx.topics), (SUBSCRIPTION_GROUPS, ctx.groups), (CONSUMER_OFFSETS, ctx.offsets),
                             (POP_STATE, ctx.pop), (MESSAGE_REQUEST_MODE, ctx.request_modes)):
            obj = self._files[name].load()
            if obj:
                target.load_json_obj(obj)
        ctx.topics.on_change = self._topics_changed
        ctx.groups.on_change = lambda: self._persist(SUBSCRIPTION_GROUPS, ctx.groups)
        ctx.request_modes.on_change = lambda: self._persist(MESSAGE_REQUEST_MODE, ctx.request_modes)

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        c = self.config
        if c.enableControllerMode:
            c.brokerRole = "SLAVE"  # fenced (no writes, no deliveries) until the controller gives a role
        options = self.netty.transport_options()
        server_tls = self.tls.server_tls() if self.tls is not None else None
        self.server = RemotingServer(None, options, self.reactor, name="broker", tls=server_tls)
        self.server.listen(c.listenPort, self.netty.bindAddress, backlog=self.netty.serverSocketBacklog)
        port = self.server.port
        try:
            self._build(port)
            self._start_replication(port)
        except BaseException:
            self.server.stop(0)
            if self.store is not None and self.store.running:
                self.store.shutdown()  # release the store lock so a fixed config can start again
            raise
        self.server.processor = self.access.guard(self.table)
        vip_port = port - 2
        self.vip = False
        if c.listenPort > 0 and vip_port > 0:
            try:
                self.server.listen(vip_port, self.netty.bindAddress, backlog=self.netty.serverSocketBacklog)
                self.vip = True
            except Exception as exc:  # noqa: BLE001 - the VIP channel is optional for modern clients
                log.warning("VIP channel port %d unavailable (%s); clients with vipChannelEnabled will fail",
                            vip_port, exc)
        self.server.add_close_listener(self._channel_closed)
        broker_addr = f"{self.ip}:{port}"
        ha_addr = f"{c.brokerIP2 or self.ip}:{self.ha_port}"
        self.registration = NameServerRegistration(
            c.namesrvAddr, (c.brokerClusterName, broker_addr, c.brokerName, c.brokerId, ha_addr),
            lambda: perm_limited(self.ctx.topics.wrapper(), c.brokerPermission), self.reactor,
            timeout_ms=c.registerBrokerTimeoutMills, compressed=c.compressedRegister,
            on_reply=self._registered if c.is_slave else None, tls=self._client_tls,
            credentials=self.auth_config.inner_credentials,
        )
        if self.registration.peers:
            self.ctx.registration_pending = self.registration.pending
        if self.controller_mode is None:
            self.start_registration()
        self._every(c.flushConsumerOffsetInterval / 1000.0, self.persist_offsets, "consumer offset persistence", now=False)
        self._every(CLIENT_SCAN_INTERVAL_MS / 1000.0, self.scan_clients, "client channel expiry", now=False)
        self._every(1.0, self.sample_stats, "stats sampling")
        if c.brokerRole != "SLAVE":  # a slave holds copies: only the master delivers and checks (as Apache)
            self.start_master_services()
        if self.controller_mode is not None:
            self.controller_mode.start(broker_addr)
        self.started = True
        log.info("broker %s (cluster %s) listening on %s:%d%s, name servers: %s", c.brokerName, c.brokerClusterName,
                 self.netty.bindAddress, port, f" and VIP {vip_port}" if self.vip else "",
                 c.namesrvAddr or "(none)")

    def start_registration(self) -> None:
        """Register with the name servers now and every registerNameServerPeriod (once only)."""
        if self._registering is not None:
            self.registration.register_soon()
            return
        period = min(max(self.config.registerNameServerPeriod, MIN_PERIOD_MS), MAX_PERIOD_MS) / 1000.0
        self._registering = self._every(period, self.registration.register_all, "name server registration")

    def start_master_services(self) -> None:
        """What only a master runs: transaction check-back, scheduled and timer delivery, POP revival."""
        self._checks = self._every(self.config.transactionCheckInterval / 1000.0, self.check_transactions,
                                   "transaction check-back", now=False)
        self.ctx.scheduler.start()
        self.ctx.timer.start()
        self.ctx.pop.start()

    def stop_master_services(self) -> None:
        checks, self._checks = self._checks, None
        if checks is not None and checks.running:
            checks.stop()
            self._loops.remove(checks)
        for service in (self.ctx.scheduler, self.ctx.timer, self.ctx.pop):
            if service.running:
                service.stop()

    def _start_replication(self, port: int) -> None:
        """A master serves slaves on its HA port; a slave replicates from its master's."""
        c = self.config
        self.ha_port = c.ha_port(port)
        if c.enableControllerMode:
            return  # controller mode replicates with Apache's AutoSwitch protocol, not the classic one
        if c.is_slave:
            self.ha_slave = HASlave(self.store, self.reactor, heartbeat_ms=c.haSendHeartbeatInterval,
                                    housekeeping_ms=c.haHousekeepingInterval, max_frame=c.haTransferBatchSize)
            self.ha_slave.start(c.haMasterAddress)
            self.ctx.ha_runtime_info = self.ha_slave.runtime_info
            replicated = self.ctx.stats.replicated
            self.store.add_arriving_listener(lambda *_arrival: replicated.add(1))
            self.slave_sync = SlaveSynchronize(self.ctx, self.reactor, lambda: self.persist_offsets(force=True),
                                               self._client_tls, self.auth_config.inner_credentials)
            self.store.add_arriving_listener(self.slave_sync.replicated)
            return
        master = HAMaster(self.store, self.reactor, batch_size=c.haTransferBatchSize,
                          heartbeat_ms=c.haSendHeartbeatInterval, housekeeping_ms=c.haHousekeepingInterval,
                          max_gap_not_in_sync=c.haMaxGapNotInSync)
        try:
            self.ha_port = master.listen(self.ha_port, self.netty.bindAddress)
        except CannotListenError as exc:
            if c.haListenPort:
                raise ConfigError(f"haListenPort={c.haListenPort}: cannot listen there ({exc.socketError}); "
                                  "set another haListenPort") from None
            # listenPort + 1 was only derived: a master without slaves runs the same without it
            log.warning("HA port %d (listenPort + 1) unavailable (%s): no slave can replicate from this broker; "
                        "set haListenPort", self.ha_port, exc)
            return
        self.ha_master = master
        self.ctx.ha_runtime_info = master.runtime_info
        if c.brokerRole == "SYNC_MASTER" and c.inSyncReplicas > 1:
            self.ctx.store.replicas = (master, c.inSyncReplicas - 1, c.slaveTimeout)
        log.info("HA service listening on %s:%d for slaves", self.netty.bindAddress, self.ha_port)

    def _registered(self, reply) -> None:
        """A slave copies the metadata of the master the name server names, and replicates from its HA
        address unless haMasterAddress says where."""
        if not self.config.haMasterAddress and reply.ha_server_addr and self.ha_slave is not None:
            self.ha_slave.set_master_address(reply.ha_server_addr)
        if reply.master_addr and self.slave_sync is not None:
            self.slave_sync.set_master_addr(reply.master_addr)

    def _every(self, seconds: float, fn, what: str, now: bool = True) -> task.LoopingCall:
        loop = task.LoopingCall(fn)
        loop.clock = self.reactor
        loop.start(seconds, now=now).addErrback(lambda f: log.error("%s stopped: %s", what, f.getTraceback()))
        self._loops.append(loop)
        return loop

    @property
    def port(self) -> int:
        return self.server.port

    @property
    def addr(self) -> str:
        return f"{self.ip}:{self.port}"

    @defer.inlineCallbacks
    def stop(self, grace: float | None = None):
        if not self.started:
            return
        self.started = False
        log.info("broker %s shutting down", self.config.brokerName)
        for loop in self._loops:
            if loop.running:
                loop.stop()
        self._loops.clear()
        self._registering = self._checks = None
        if self.ctx.scheduler.running:
            self.ctx.scheduler.stop()
        if self.ctx.timer.running:
            self.ctx.timer.stop()
        if self.ctx.pop.running:
            self.ctx.pop.stop()
        if self.ctx.holder is not None:
            self.ctx.holder.wake_all()
        if self.registration is not None:
            yield self.registration.unregister_all()
            yield self.registration.close()
        yield self.server.stop(grace)
        # replication stops after the last send is answered: a send taken without it would be acknowledged
        # with no slave holding it
        if self.controller_mode is not None:
            yield self.controller_mode.stop()
        if self.ha_slave is not None:
            self.ha_slave.stop()
        if self.slave_sync is not None:
            yield self.slave_sync.stop()
        if self.ha_master is not None:
            yield self.ha_master.stop()
        self.persist_offsets(force=True)
        self._persist(TOPICS, self.ctx.topics)
        self._persist(SUBSCRIPTION_GROUPS, self.ctx.groups)
        yield self._writes.close()
        self.store.shutdown()
        log.info("broker %s stopped", self.config.brokerName)

    # ------------------------------------------------------------------ periodic work and hooks

    def _persist(self, name: str, manager: Any) -> defer.Deferred:
        """Snapshot now (on the reactor), write on the broker's file thread; writes keep their order."""
        target = self._files[name]
        return self._writes.submit(target.path, target.save, manager.to_json_obj())

    def persist_offsets(self, force: bool = False) -> None:
        """Consumer offsets (the transaction check's progress and the POP state included), when they
        changed (or ``force``). The POP state is written first: a crash between the two leaves in-flight
        messages known to a file whose offsets still cover them."""
        table, pop = self.ctx.offsets, self.ctx.pop
        if table.changed or pop.changed or force:
            table.changed = pop.changed = False
            self._persist(POP_STATE, pop)
            self._persist(CONSUMER_OFFSETS, table)

    def sample_stats(self) -> None:
        stats, timer = self.ctx.stats, self.ctx.timer
        stats.timer_enqueue.total, stats.timer_dequeue.total = timer.enqueued, timer.delivered
        stats.sample()

    def check_transactions(self) -> None:
        """One check-back pass; its progress is saved at once so a crash does not ask the same again."""
        self.ctx.transactions.check()
        self.persist_offsets()

    def _topics_changed(self, _config: Any) -> None:
        self._persist(TOPICS, self.ctx.topics)
        self.register_again()

    def _config_changed(self) -> None:
        if self.controller_mode is not None:
            self.controller_mode.refresh_table()
        if self.registration is not None:
            self.registration.set_namesrv_addr(self.config.namesrvAddr)
        self.register_again()

    def register_again(self) -> None:
        """Register soon if registering at all: neither a broker shutting down nor a controller-mode broker
        without a role registers (its brokerId is not known yet; the name server would route clients to
        a fenced broker)."""
        if self._registering is not None:
            self.registration.register_soon()

    def scan_clients(self) -> None:
        self.ctx.locks.purge_expired()
        for info in self.ctx.consumers.scan_expired() + self.ctx.producers.scan_expired():
            log.info("client %s (%s) expired: no heartbeat for 120 s; closing its connection", info.client_id,
                     info.client_addr)
            if isinstance(info.channel, Channel):
                info.channel.close()

    def _channel_closed(self, channel: Channel) -> None:
        self.ctx.consumers.channel_closed(channel)
        self.ctx.producers.channel_closed(channel)

    def _notify_ids_changed(self, group: str, channels: list) -> None:
        ext = NotifyConsumerIdsChangedRequestHeader(consumer_group=group).to_ext()
        for channel in channels:
            if isinstance(channel, Channel) and channel.is_active:
                try:
                    channel.invoke_oneway(request(RequestCode.NOTIFY_CONSUMER_IDS_CHANGED, dict(ext)))
                except Exception as exc:  # noqa: BLE001 - a closing channel must not stop the others
                    log.debug("NOTIFY_CONSUMER_IDS_CHANGED to %s failed: %s", channel.remote_address, exc)


def start_broker(config: BrokerConfig, props: dict[str, str] | None = None, reactor: Any = None) -> Broker:
    """What ``ferrymq broker`` / ``standalone`` run: network keys (bindAddress, idle time, frame size...)
    and store-only keys (flush intervals, index sizes...) come from the same config file ``props``."""
    from ferrymq.server.config import from_properties, tls_config

    props = dict(props or {})
    netty_props = {k: v for k, v in props.items() if k != "listenPort"}
    netty = from_properties(NettyServerConfig, netty_props, listenPort=config.listenPort)
    auth = from_properties(AuthConfig, props)
    broker = Broker(config, netty, store_props=props, reactor=reactor, auth=auth, tls=tls_config(props))
    broker.start()
    return broker
