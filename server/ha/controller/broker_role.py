"""A broker in controller mode: the :class:`~.replicas.ReplicasManager` and what a role change does to the
running broker, without a restart.

Until the controller names a role the broker is fenced: it refuses sends as a slave does, runs no
deliveries and does not register with the name servers. Becoming master (Apache's brokers take
SYNC_MASTER) lifts the slave's refusals, starts the services only a master runs (transaction check-back,
scheduled and timer delivery, POP revival) and registers as brokerId 0; becoming slave does the reverse,
registers under the controller-assigned brokerId and copies the master's metadata (SlaveSynchronize).
Each change registers with the name servers at once, so clients route to the new master quickly.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Any

from ferrymq.remoting.dispatch import handles
from ferrymq.wire import headers as h
from ferrymq.wire.bodies import EpochEntry, EpochEntryCache, SyncStateSet
from ferrymq.wire.codes import RequestCode, ResponseCode
from twisted.internet import defer

from ..autoswitch.epoch import EpochFile
from ..autoswitch.master import ALL_IN_SYNC_STATE_SET, AutoSwitchMaster
from ..autoswitch.slave import AutoSwitchSlave
from ..roles import with_rejections, with_replicas_short
from ..slave_sync import SlaveSynchronize
from .identity import IdentityFiles
from .replicas import ReplicasManager

if TYPE_CHECKING:
    from ferrymq.server.broker.service import Broker

log = logging.getLogger("ferrymq.ha.controller")

#: the role Apache's controller-mode master takes
MASTER_ROLE = "SYNC_MASTER"
#: seconds between a slave's registrations while no name server names the HA address of the master the
#: controller elected (the master registers with them a moment after its election)
HA_ADDRESS_RETRY_S = 1.0


class ControllerModeProcessor:
    """The broker's answers to the controller's push and to mqadmin getBrokerEpoch."""

    def __init__(self, mode: ControllerMode):
        self.mode = mode

    @handles(RequestCode.NOTIFY_BROKER_ROLE_CHANGED)
    def notify_role_changed(self, cmd: Any, _channel: Any, header: h.ReplicaRoleHeader) -> Any:
        members = SyncStateSet.decode(cmd.body) if cmd.body else SyncStateSet()
        log.info("controller: master %s (%s) at epoch %s", header.master_broker_id, header.master_address,
                 header.master_epoch)
        if self.mode.replicas is not None:
            self.mode.replicas.change_role(header, members.sync_state_set,
                                           header.sync_state_set_epoch or members.sync_state_set_epoch)
        return cmd.response(ResponseCode.SUCCESS)

    @handles(RequestCode.GET_BROKER_EPOCH_CACHE)
    def epoch_cache(self, cmd: Any, _channel: Any, _header: None) -> Any:
        broker = self.mode.broker
        c = broker.config
        entries = [EpochEntry(e.epoch, e.start_offset, e.end_offset) for e in self.mode.epochs.entries]
        body = EpochEntryCache(c.brokerClusterName, c.brokerName, c.brokerId, entries,
                               broker.store.get_max_phy_offset())
        return cmd.response(ResponseCode.SUCCESS, body=body.encode())


class ControllerMode:
    """Role changes of one :class:`~ferrymq.server.broker.service.Broker` under Apache's controller."""

    def __init__(self, broker: Broker):
        self.broker = broker
        c = broker.config
        root = c.storePathRootDir
        self.epochs = EpochFile(c.storePathEpochFile or os.path.join(root, "epochFileCheckpoint")).load()
        self.identity = IdentityFiles(c.storePathBrokerIdentity or os.path.join(root, "brokerIdentity"))
        self.processor = ControllerModeProcessor(self)
        self.replicas: ReplicasManager | None = None
        self.ha_master: AutoSwitchMaster | None = None
        self.ha_slave: AutoSwitchSlave | None = None
        #: the master whose HA address the slave replicates from, as the name servers named it
        self._ha_master_of = ""
        self._ha_retry: Any = None
        self.role = ""

    def start(self, broker_addr: str) -> None:
        b = self.broker
        self.replicas = ReplicasManager(b.config, b.reactor, broker_addr, self, self.identity, self.epochs,
                                        b.store.get_max_phy_offset, tls=b._client_tls,
                                        in_sync_slaves=self._in_sync_slaves)
        b.registration.on_reply = self._registered
        self.replicas.start()

    def _in_sync_slaves(self) -> set[int]:
        return self.ha_master.in_sync_slaves() if self.ha_master is not None else set()

    def _registered(self, reply: Any) -> None:
        """A slave replicates from the HA address the name server gives for its group's master, once that
        master is the one the controller elected: a name server that names none yet, or the master before
        the election, is asked again after :data:`HA_ADDRESS_RETRY_S` rather than at the next periodic
        registration (registerNameServerPeriod, 30 s), which the slave's return to the sync state set,
        and so the group's all-ack sends, would wait for."""
        if self.ha_slave is None or self.replicas is None:
            return
        master_addr = self.replicas.master_addr
        if reply.ha_server_addr and reply.master_addr == master_addr:
            self._ha_master_of = master_addr
            self.ha_slave.set_master_address(reply.ha_server_addr)
        elif self._ha_master_of != master_addr and not (self._ha_retry is not None and self._ha_retry.active()):
            log.log(logging.DEBUG if self._ha_retry is not None else logging.INFO,
                    "the name servers do not name the HA address of master %s yet; registering again each %.0f s",
                    master_addr, HA_ADDRESS_RETRY_S)
            self._ha_retry = self.broker.reactor.callLater(HA_ADDRESS_RETRY_S, self._register_for_ha_address)

    def _register_for_ha_address(self) -> None:
        if self.ha_slave is not None and self.replicas is not None and self._ha_master_of != self.replicas.master_addr:
            self.broker.register_again()

    def _cancel_ha_retry(self) -> None:
        if self._ha_retry is not None and self._ha_retry.active():
            self._ha_retry.cancel()
        self._ha_retry = None

    def stop(self) -> defer.Deferred:
        self._cancel_ha_retry()
        waits = [self.replicas.stop()] if self.replicas is not None else []
        self._stop_replication()
        if self.broker.slave_sync is not None:
            waits.append(self.broker.slave_sync.stop())
            self.broker.slave_sync = None
        return defer.DeferredList(waits)

    # ------------------------------------------------------------------ RoleChanges

    def _stop_replication(self) -> None:
        self.broker.ctx.store.replicas = None
        if self.ha_slave is not None:
            self.ha_slave.stop()
            self.ha_slave = None
        if self.ha_master is not None:
            self.ha_master.stop()
            self.ha_master = None

    def become_master(self) -> None:
        b = self.broker
        c = b.config
        self._stop_replication()
        master = AutoSwitchMaster(b.store, self.epochs, b.reactor, batch_size=c.haTransferBatchSize,
                                  heartbeat_ms=c.haSendHeartbeatInterval, housekeeping_ms=c.haHousekeepingInterval,
                                  on_caught_up=self.replicas.check_sync_state_set,
                                  members=lambda: self.replicas.sync_state_set - {self.replicas.broker_id})
        try:
            master.listen(b.ha_port, b.netty.bindAddress)
            self.ha_master = master
        except Exception as exc:  # noqa: BLE001 - a master without its HA port still serves clients
            log.error("HA port %d unavailable (%s): no slave can replicate from this master", b.ha_port, exc)
        else:
            # a SYNC_MASTER's send waits for every slave of the sync state set, or for inSyncReplicas copies
            acks = ALL_IN_SYNC_STATE_SET if c.allAckInSyncStateSet else c.inSyncReplicas - 1
            if acks:
                b.ctx.store.replicas = (master, acks, c.slaveTimeout)
        self._take(MASTER_ROLE, 0)
        if b.slave_sync is not None:
            b.slave_sync.stop()
            b.slave_sync = None
        b.start_master_services()
        b.start_registration()

    def become_slave(self, master_addr: str, broker_id: int) -> None:
        b = self.broker
        was_master = self.role == MASTER_ROLE
        self._take("SLAVE", broker_id)
        if was_master:
            b.stop_master_services()
        c = b.config
        self._stop_replication()
        self._ha_master_of = ""
        self._cancel_ha_retry()
        self.ha_slave = AutoSwitchSlave(b.store, self.epochs, b.reactor, broker_id,
                                        heartbeat_ms=c.haSendHeartbeatInterval,
                                        housekeeping_ms=c.haHousekeepingInterval, max_frame=c.haTransferBatchSize)
        self.ha_slave.start()
        if b.slave_sync is None:
            b.slave_sync = SlaveSynchronize(b.ctx, b.reactor, lambda: b.persist_offsets(force=True), b._client_tls,
                                            b.auth_config.inner_credentials)
        b.slave_sync.set_master_addr(master_addr)
        b.start_registration()

    def role_refreshed(self) -> None:
        self._stamp_epoch()
        self.broker.start_registration()

    def sync_state_set_changed(self) -> None:
        self.refresh_table()

    def refresh_table(self) -> None:
        """The request table for the role held, the sync state set and minInSyncReplicas."""
        b = self.broker
        table = with_rejections(b.routes, b.config)
        replicas = self.replicas
        if (self.role == MASTER_ROLE and replicas is not None
                and len(replicas.sync_state_set) < b.config.minInSyncReplicas):
            table = with_replicas_short(table)
        if table is not b.table:
            b.table = table
            b.server.processor = b.access.guard(table)

    def _take(self, role: str, broker_id: int) -> None:
        """Set the role and brokerId everywhere the broker reads them, and swap the request table."""
        b = self.broker
        self.role = role
        b.config.brokerRole = role
        b.config.brokerId = broker_id
        b.store.config.brokerRole = role
        cluster, addr, name, _old_id, ha_addr = b.registration.identity
        b.registration.identity = (cluster, addr, name, broker_id, ha_addr)
        self._stamp_epoch()
        self.refresh_table()
        log.info("broker %s is now %s (brokerId %d)", addr, role, broker_id)

    def _stamp_epoch(self) -> None:
        """The topic table's data version carries the master epoch of the role held, as Apache's broker's
        (its state version): a name server keeps a brokerId's address from the registration with the
        higher one, so a late registration of a broker that lost its role does not take its id back."""
        if self.replicas is not None:
            self.broker.ctx.topics.next_version(self.replicas.master_epoch)
