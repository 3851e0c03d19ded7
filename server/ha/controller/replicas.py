"""A broker's side of Apache 5.x controller mode (Apache's ReplicasManager).

The controllers are the ones controllerAddr lists or, with fetchControllerAddrByDnsLookup, the addresses
its name resolves to, looked up before the first start-up attempt and every two minutes after
(:mod:`.lookup`).

Start-up, retried every :data:`RETRY_S` until it succeeds:

1. ask each controller address who leads (CONTROLLER_GET_METADATA_INFO);
2. get a brokerId: the one in the identity file, else GET_NEXT_BROKER_ID, claimed with APPLY_BROKER_ID
   (see :mod:`.identity`);
3. REGISTER_BROKER_TO_CONTROLLER, which answers the group's master if it has one;
4. a first heartbeat, and ELECT_MASTER when the group has no master yet.

Then heartbeats go to every controller each brokerHeartbeatInterval, the controller's view of the group
is polled each syncBrokerMetadataPeriod (GET_REPLICA_INFO; the controller also pushes
NOTIFY_BROKER_ROLE_CHANGED, which :meth:`ReplicasManager.change_role` takes), and a master reports its
sync state set when it changes (ALTER_SYNC_STATE_SET). A role only moves forward: a change whose master
epoch is not above the one held is ignored, so the push and the poll may arrive in any order.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from typing import Any, Protocol

from ferrymq.remoting.errors import ResponseCodeError
from ferrymq.server.config import BrokerConfig
from ferrymq.wire import headers as h
from ferrymq.wire.codes import ResponseCode
from twisted.internet import defer, task, threads

from ..autoswitch.epoch import EpochFile
from .client import ControllerClient, ReplicaState
from .identity import BrokerIdentity, IdentityFiles
from .lookup import LOOKUP_PERIOD_MS, ControllerLookupError, listed, resolve

log = logging.getLogger("ferrymq.ha.controller")

#: seconds between two start-up attempts (Apache: 5)
RETRY_S = 5.0
#: registration attempts within one start-up attempt (Apache: 5, a random pause under 1 s between them)
REGISTER_TRIES = 5


class RoleChanges(Protocol):
    """What the broker does when the controller gives it a role."""

    def become_master(self) -> None: ...

    def become_slave(self, master_addr: str, broker_id: int) -> None: ...

    def role_refreshed(self) -> None:
        """Same role under a new master epoch: register with the name servers again."""

    def sync_state_set_changed(self) -> None:
        """The group's sync state set, :attr:`ReplicasManager.sync_state_set`, changed."""


class ReplicasManager:
    def __init__(self, config: BrokerConfig, reactor: Any, broker_addr: str, roles: RoleChanges,
                 identity: IdentityFiles, epochs: EpochFile, max_offset: Callable[[], int], tls: Any = None,
                 in_sync_slaves: Callable[[], set[int]] = set):
        """``in_sync_slaves``: the controller ids of the slaves that hold everything this master wrote."""
        self.config = config
        self.reactor = reactor
        self.broker_addr = broker_addr
        self.roles = roles
        self.identity = identity
        self.epochs = epochs
        self.max_offset = max_offset
        self.in_sync_slaves = in_sync_slaves
        self.client = ControllerClient(reactor, tls)
        #: the controllers' addresses (with fetchControllerAddrByDnsLookup, none until the first lookup)
        self.controllers = [] if config.fetchControllerAddrByDnsLookup else listed(config.controllerAddr)
        self.leader = ""
        #: the brokerId the controller assigned (None until registered)
        self.broker_id: int | None = None
        self.master_id: int | None = None
        self.master_addr = ""
        self.master_epoch = 0
        self.sync_state_set: frozenset[int] = frozenset()
        self.sync_state_set_epoch = 0
        self.running = False
        self.started: defer.Deferred = defer.Deferred()
        self._loops: list[task.LoopingCall] = []
        self._master_check: task.LoopingCall | None = None

    @property
    def is_master(self) -> bool:
        return self.broker_id is not None and self.master_id == self.broker_id

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> None:
        self.running = True
        self._every(self.config.brokerHeartbeatInterval, self.send_heartbeats)
        defer.ensureDeferred(self._boot()).addErrback(lambda f: log.error("controller mode stopped: %s",
                                                                          f.getTraceback()))

    def stop(self) -> defer.Deferred:
        self.running = False
        for loop in self._loops + ([self._master_check] if self._master_check else []):
            if loop.running:
                loop.stop()
        self._loops.clear()
        return self.client.close()

    def _every(self, period_ms: int, fn: Callable[[], Any], now: bool = True) -> task.LoopingCall:
        loop = task.LoopingCall(fn)
        loop.clock = self.reactor
        loop.start(period_ms / 1000, now=now).addErrback(lambda f: log.error("%s stopped: %s", fn, f.getTraceback()))
        self._loops.append(loop)
        return loop

    def _sleep(self, seconds: float) -> defer.Deferred:
        return task.deferLater(self.reactor, seconds, lambda: None)

    async def _boot(self) -> None:
        if self.config.fetchControllerAddrByDnsLookup:
            await self.lookup_controllers()
            self._every(LOOKUP_PERIOD_MS, self.lookup_controllers, now=False)
        attempt = 0
        while self.running:
            if await self._start_once():
                break
            attempt += 1
            log.warning("controller mode: start-up attempt %d failed; trying again in %.0f s", attempt, RETRY_S)
            await self._sleep(RETRY_S)
        if not self.running:
            return
        log.info("controller mode: registered as brokerId %s; master %s (%s) at epoch %d", self.broker_id,
                 self.master_id, self.master_addr, self.master_epoch)
        self._every(self.config.syncBrokerMetadataPeriod, self.sync_replica_info, now=False)
        self._every(self.config.syncControllerMetadataPeriod, self.update_leader, now=False)
        self.started.callback(None)

    async def _start_once(self) -> bool:
        if not await self.update_leader():
            return False
        for _ in range(REGISTER_TRIES):
            if await self._register():
                break
            await self._sleep(random.random())
        else:
            return False
        self.send_heartbeats()
        return self.master_id is not None or await self._elect()

    # ------------------------------------------------------------------ talking to the controller

    def lookup_controllers(self) -> defer.Deferred:
        """fetchControllerAddrByDnsLookup: the controllers are the addresses controllerAddr's name resolves to
        now; a lookup that fails keeps the ones known."""
        pool = self.reactor.getThreadPool()
        return threads.deferToThreadPool(self.reactor, pool, resolve, self.config.controllerAddr).addCallbacks(
            self._looked_up, self._lookup_failed)

    def _looked_up(self, found: list[str]) -> None:
        if found != self.controllers:
            log.info("controller mode: controllerAddr %s resolves to %s", self.config.controllerAddr,
                     ";".join(found))
        self.controllers = found

    def _lookup_failed(self, failure: Any) -> None:
        failure.trap(ControllerLookupError)
        log.error("controller mode: %s; %s", failure.getErrorMessage(),
                  f"keeping the controllers {';'.join(self.controllers)}" if self.controllers
                  else "no controller to register with until it does")

    async def update_leader(self) -> bool:
        for addr in self.controllers:
            try:
                leader = await self.client.leader(addr)
            except Exception as exc:  # noqa: BLE001 - any controller may be down; the next one may know
                log.debug("controller %s: no metadata (%s)", addr, exc)
                continue
            if leader:
                if leader != self.leader:
                    log.info("controller leader: %s", leader)
                self.leader = leader
                return True
        return False

    async def _register(self) -> bool:
        c = self.config
        try:
            self.broker_id = await self._broker_id()
            if self.broker_id is None:
                return False
            state = await self.client.register(self.leader, c.brokerClusterName, c.brokerName, self.broker_id,
                                               self.broker_addr)
        except Exception as exc:  # noqa: BLE001 - retried by the caller
            log.warning("controller mode: registration failed: %s", exc)
            return False
        self.apply(state)
        return True

    async def _broker_id(self) -> int | None:
        """This broker's controller-assigned id: the identity file's, else a new one claimed now."""
        c = self.config
        for found in (self.identity.read(), self.identity.read_temp()):
            if found is not None and (found.cluster, found.broker_name) != (c.brokerClusterName, c.brokerName):
                log.error("controller mode: %s belongs to broker %s of cluster %s, not %s of %s; fix the config "
                          "or remove the file", self.identity.path, found.broker_name, found.cluster, c.brokerName,
                          c.brokerClusterName)
                return None
        known = self.identity.read()
        if known is not None:
            return known.broker_id
        claim = self.identity.read_temp()
        if claim is None:
            next_id = await self.client.next_broker_id(self.leader, c.brokerClusterName, c.brokerName)
            claim = BrokerIdentity(c.brokerClusterName, c.brokerName, next_id,
                                   f"{self.broker_addr};{int(time.time() * 1000)}")
            self.identity.write_temp(claim)
        try:
            await self.client.apply_broker_id(self.leader, c.brokerClusterName, c.brokerName, claim.broker_id,
                                              claim.check_code)
        except Exception:
            self.identity.clear_temp()  # the id went to another broker: ask for the next one
            raise
        log.info("controller mode: the controller assigned brokerId %d", claim.broker_id)
        return self.identity.confirm(claim).broker_id

    async def _elect(self) -> bool:
        c = self.config
        try:
            state = await self.client.elect(self.leader, c.brokerClusterName, c.brokerName, self.broker_id)
        except Exception as exc:  # noqa: BLE001 - retried by the caller
            log.warning("controller mode: election failed: %s", exc)
            return False
        if state.master_id is None or not state.master_addr:
            log.warning("controller mode: the group has no master yet")
            return False
        self.apply(state)
        return True

    def send_heartbeats(self) -> None:
        if self.broker_id is None:
            return
        c = self.config
        offset = self.max_offset()
        header = h.BrokerHeartbeatRequestHeader(
            cluster_name=c.brokerClusterName, broker_addr=self.broker_addr, broker_name=c.brokerName,
            broker_id=self.broker_id, epoch=self.epochs.last_epoch, max_offset=offset, confirm_offset=offset,
            heartbeat_timeout_mills=c.controllerHeartBeatTimeoutMills, election_priority=c.brokerElectionPriority)
        for addr in self.controllers:
            self.client.heartbeat(addr, header).addErrback(
                lambda f, addr=addr: log.debug("heartbeat to controller %s failed: %s", addr, f.getErrorMessage()))

    async def _sync_replica_info(self) -> None:
        try:
            state = await self.client.replica_info(self.leader, self.config.brokerName)
        except ResponseCodeError as exc:
            log.warning("controller mode: replica info: %s", exc)
            if exc.code == ResponseCode.CONTROLLER_BROKER_METADATA_NOT_EXIST:
                await self._register()
            return
        except Exception as exc:  # noqa: BLE001 - the next poll tries again
            log.warning("controller mode: replica info: %s", exc)
            return
        if state.master_epoch > self.master_epoch:
            if state.master_id is not None and state.master_addr:
                self.apply(state)
            else:
                await self._elect()
        elif state.master_epoch == self.master_epoch and self.is_master:
            self._set_sync_state_set(state.sync_state_set, state.sync_state_set_epoch)

    def sync_replica_info(self) -> defer.Deferred:
        return defer.ensureDeferred(self._sync_replica_info())

    # ------------------------------------------------------------------ roles

    def apply(self, state: ReplicaState) -> None:
        """Take the role ``state`` gives this broker, if its master epoch is newer than the one held."""
        if state.master_id is None or state.master_epoch <= self.master_epoch:
            return
        if state.master_id == self.broker_id:
            self._to_master(state)
        else:
            self._to_slave(state)

    def change_role(self, role: h.ReplicaRoleHeader, members: list[int], members_epoch: int) -> None:
        """NOTIFY_BROKER_ROLE_CHANGED from the controller."""
        self.apply(ReplicaState.of(role, members, members_epoch))

    def _to_master(self, state: ReplicaState) -> None:
        was_master = self.is_master
        log.info("controller mode: %s becomes master of %s at epoch %d (was %s)", self.broker_addr,
                 self.config.brokerName, state.master_epoch, "master" if was_master else "slave")
        self.master_epoch = state.master_epoch
        self._set_sync_state_set(state.sync_state_set, state.sync_state_set_epoch)
        self.epochs.append(state.master_epoch, self.max_offset())
        self.master_id, self.master_addr = self.broker_id, self.broker_addr
        if was_master:
            self.roles.role_refreshed()
        else:
            self.roles.become_master()
            if self._master_check is None or not self._master_check.running:
                self._master_check = task.LoopingCall(self.check_sync_state_set)
                self._master_check.clock = self.reactor
                self._master_check.start(self.config.checkSyncStateSetPeriod / 1000, now=False)
        self.check_sync_state_set()

    def _to_slave(self, state: ReplicaState) -> None:
        log.info("controller mode: %s becomes slave (brokerId %s) of master %s (%s) at epoch %d", self.broker_addr,
                 self.broker_id, state.master_id, state.master_addr, state.master_epoch)
        self.master_epoch = state.master_epoch
        same_master = state.master_id == self.master_id
        self.master_id, self.master_addr = state.master_id, state.master_addr
        if same_master:
            self.roles.role_refreshed()
            return
        if self._master_check is not None and self._master_check.running:
            self._master_check.stop()
        self.roles.become_slave(state.master_addr, self.broker_id)

    def _set_sync_state_set(self, members: frozenset[int], epoch: int) -> None:
        if epoch > self.sync_state_set_epoch:
            log.info("sync state set %s -> %s (epoch %d)", sorted(self.sync_state_set), sorted(members), epoch)
            self.sync_state_set, self.sync_state_set_epoch = frozenset(members), epoch
            self.roles.sync_state_set_changed()

    def check_sync_state_set(self) -> defer.Deferred | None:
        """A master reports the brokers that hold everything it wrote, when that differs from the set the
        controller has."""
        if not self.is_master:
            return None
        wanted = {self.broker_id, *self.in_sync_slaves()}
        if wanted == set(self.sync_state_set):
            return None
        return defer.ensureDeferred(self._alter(wanted))

    async def _alter(self, wanted: set[int]) -> None:
        try:
            result = await self.client.alter_sync_state_set(self.leader, self.config.brokerName, self.broker_id,
                                                            self.master_epoch, wanted, self.sync_state_set_epoch)
        except Exception as exc:  # noqa: BLE001 - the next check tries again
            log.warning("controller mode: reporting sync state set %s failed: %s", sorted(wanted), exc)
            return
        self._set_sync_state_set(frozenset(result.sync_state_set), result.sync_state_set_epoch)
