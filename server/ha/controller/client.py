"""The requests a broker sends Apache's controller, as Apache's broker sends them (BrokerOuterAPI).

Each call goes to one controller address and answers a typed value or raises
:class:`~ferrymq.remoting.errors.ResponseCodeError` with the controller's code (CONTROLLER_NOT_LEADER,
CONTROLLER_BROKER_METADATA_NOT_EXIST...). Heartbeats are one-way.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from ferrymq.remoting import RemotingClient
from ferrymq.wire import headers as h
from ferrymq.wire.bodies import ElectMasterResponseBody, SyncStateSet
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand, request

#: Apache's broker gives every controller call 3 s
CALL_TIMEOUT_S = 3.0


@dataclass(frozen=True, slots=True)
class ReplicaState:
    """Who is master of a broker group at which epoch, and the group's sync state set, as the controller
    answers (``master_id`` None: the group has no master)."""

    master_id: int | None
    master_addr: str
    master_epoch: int
    sync_state_set: frozenset[int]
    sync_state_set_epoch: int

    @classmethod
    def of(cls, role: h.ReplicaRoleHeader, members: list[int], members_epoch: int | None = None) -> ReplicaState:
        return cls(role.master_broker_id, role.master_address or "", role.master_epoch or 0, frozenset(members),
                   members_epoch if members_epoch is not None else role.sync_state_set_epoch or 0)


def _ext(header: Any) -> dict[str, str]:
    return header.to_ext()


class ControllerClient:
    def __init__(self, reactor: Any, tls: Any = None):
        self.remoting = RemotingClient(reactor=reactor, tls=tls)

    async def _call(self, addr: str, cmd: RemotingCommand, accept: tuple[int, ...] = (ResponseCode.SUCCESS,)):
        return await self.remoting.call(addr, cmd, CALL_TIMEOUT_S, accept)

    async def leader(self, addr: str) -> str:
        """The address of the controller leader, as the controller at ``addr`` knows it ('' while none)."""
        resp = await self._call(addr, request(RequestCode.CONTROLLER_GET_METADATA_INFO))
        return h.GetMetaDataResponseHeader.from_ext(resp.ext_fields).controller_leader_address or ""

    async def next_broker_id(self, addr: str, cluster: str, broker_name: str) -> int:
        resp = await self._call(addr, request(RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
                                              _ext(h.GetNextBrokerIdRequestHeader(cluster, broker_name))))
        next_id = h.GetNextBrokerIdResponseHeader.from_ext(resp.ext_fields).next_broker_id
        if next_id is None:
            raise ValueError(f"controller {addr} answered GET_NEXT_BROKER_ID without an id")
        return next_id

    async def apply_broker_id(self, addr: str, cluster: str, broker_name: str, broker_id: int, check_code: str) -> None:
        await self._call(addr, request(RequestCode.CONTROLLER_APPLY_BROKER_ID, _ext(
            h.ApplyBrokerIdRequestHeader(cluster, broker_name, broker_id, check_code))))

    async def register(self, addr: str, cluster: str, broker_name: str, broker_id: int,
                       broker_addr: str) -> ReplicaState:
        resp = await self._call(addr, request(RequestCode.CONTROLLER_REGISTER_BROKER, _ext(
            h.RegisterBrokerToControllerRequestHeader(cluster, broker_name, broker_id, broker_addr,
                                                      int(time.time() * 1000)))))
        members = SyncStateSet.decode(resp.body).sync_state_set if resp.body else []
        return ReplicaState.of(h.ReplicaRoleHeader.from_ext(resp.ext_fields), members)

    async def elect(self, addr: str, cluster: str, broker_name: str, broker_id: int) -> ReplicaState:
        """Ask for an election in the group (Apache's broker-triggered one); a master that is still alive
        stays (CONTROLLER_MASTER_STILL_EXIST, answered like a success)."""
        resp = await self._call(addr, request(RequestCode.CONTROLLER_ELECT_MASTER, _ext(
            h.ElectMasterRequestHeader(cluster, broker_name, broker_id, False, int(time.time() * 1000)))),
            accept=(ResponseCode.SUCCESS, ResponseCode.CONTROLLER_MASTER_STILL_EXIST))
        members = ElectMasterResponseBody.decode(resp.body).sync_state_set if resp.body else []
        return ReplicaState.of(h.ReplicaRoleHeader.from_ext(resp.ext_fields), members)

    async def replica_info(self, addr: str, broker_name: str) -> ReplicaState:
        resp = await self._call(addr, request(RequestCode.CONTROLLER_GET_REPLICA_INFO,
                                              _ext(h.GetReplicaInfoRequestHeader(broker_name))))
        members = SyncStateSet.decode(resp.body)
        return ReplicaState.of(h.ReplicaRoleHeader.from_ext(resp.ext_fields), members.sync_state_set,
                               members.sync_state_set_epoch)

    async def alter_sync_state_set(self, addr: str, broker_name: str, master_id: int, master_epoch: int,
                                   members: set[int], members_epoch: int) -> SyncStateSet:
        """Report the master's new sync state set; the controller answers the set it now holds."""
        cmd = request(RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET, _ext(
            h.AlterSyncStateSetRequestHeader(broker_name, master_id, master_epoch, int(time.time() * 1000))),
            SyncStateSet(sorted(members), members_epoch).encode())
        return SyncStateSet.decode((await self._call(addr, cmd)).body)

    def heartbeat(self, addr: str, header: h.BrokerHeartbeatRequestHeader) -> Any:
        """One-way BROKER_HEARTBEAT; the Deferred fires once written (fails if the controller is unreachable)."""
        return self.remoting.invoke_oneway(addr, request(RequestCode.BROKER_HEARTBEAT, _ext(header)))

    def close(self) -> Any:
        return self.remoting.close()
