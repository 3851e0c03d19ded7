"""Bodies of Apache 5.x controller mode: what the controller and a broker's replication state exchange."""

from __future__ import annotations

from dataclasses import dataclass, field

from .model import body

#: Java's Long.MAX_VALUE: the end offset of an epoch still being written
OPEN_END = (1 << 63) - 1


@body
@dataclass(slots=True)
class SyncStateSet:
    """The brokers (controller-assigned ids) holding every acknowledged message, with the version of that set:
    the body of REGISTER_BROKER_TO_CONTROLLER and GET_REPLICA_INFO answers, ALTER_SYNC_STATE_SET both ways
    and NOTIFY_BROKER_ROLE_CHANGED."""

    sync_state_set: list[int] = field(default_factory=list)
    sync_state_set_epoch: int = 0


@body
@dataclass(slots=True)
class ElectMasterResponseBody:
    """ELECT_MASTER answer (the broker reads the sync state set; the member group is for mqadmin)."""

    sync_state_set: list[int] = field(default_factory=list)


@body
@dataclass(slots=True)
class EpochEntry:
    """From ``start_offset`` to ``end_offset`` (exclusive) the commit log was written under master ``epoch``."""

    epoch: int = 0
    start_offset: int = 0
    end_offset: int = OPEN_END


@body
@dataclass(slots=True)
class EpochEntryCache:
    """GET_BROKER_EPOCH_CACHE answer (mqadmin getBrokerEpoch)."""

    cluster_name: str = ""
    broker_name: str = ""
    broker_id: int = 0
    epoch_list: list[EpochEntry] = field(default_factory=list)
    max_offset: int = 0
