"""Replication bodies: the HA runtime report (GET_BROKER_HA_STATUS, ``mqadmin haStatus``) and the timer
tables a classic slave copies from its master (GET_TIMER_CHECK_POINT, GET_TIMER_METRICS)."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from .model import body
from .route import DataVersion


@body
@dataclass(slots=True)
class HAConnectionRuntimeInfo:
    """A master's view of one slave connection."""

    addr: str = ""
    slave_ack_offset: int = 0
    #: the master's commit-log max offset minus ``slave_ack_offset``
    diff: int = 0
    in_sync: bool = False
    transferred_byte_in_second: int = 0
    #: the next commit-log offset the master sends this slave
    transfer_from_where: int = 0


@body
@dataclass(slots=True)
class HAClientRuntimeInfo:
    """A slave's view of its replication client."""

    master_addr: str | None = None
    transferred_byte_in_second: int = 0
    max_offset: int = 0
    last_read_timestamp: int = 0
    last_write_timestamp: int = 0
    master_flush_offset: int = 0


@body
@dataclass(slots=True)
class HARuntimeInfo:
    """GET_BROKER_HA_STATUS: a master fills the connection list, a slave ``ha_client_runtime_info``."""

    master: bool = False
    master_commit_log_max_offset: int = 0
    in_sync_slave_nums: int = 0
    ha_connection_info: list[HAConnectionRuntimeInfo] = field(default_factory=list)
    ha_client_runtime_info: HAClientRuntimeInfo = field(default_factory=HAClientRuntimeInfo)


@body
@dataclass(slots=True)
class TimerMetric:
    count: int = 0
    time_stamp: int = 0


@body
@dataclass(slots=True)
class TimerMetricsWrapper:
    """GET_TIMER_METRICS: timers pending per destination topic."""

    timing_count: dict[str, TimerMetric] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)


@dataclass(frozen=True, slots=True)
class TimerCheckpoint:
    """GET_TIMER_CHECK_POINT's body: seven big-endian longs, Apache's TimerCheckpoint layout."""

    LAYOUT = struct.Struct(">7q")

    last_read_time_ms: int = 0
    last_timer_log_flush_pos: int = 0
    last_timer_queue_offset: int = 0
    master_timer_queue_offset: int = 0
    data_version: DataVersion = field(default_factory=lambda: DataVersion(timestamp=0))

    def encode(self) -> bytes:
        v = self.data_version
        return self.LAYOUT.pack(self.last_read_time_ms, self.last_timer_log_flush_pos, self.last_timer_queue_offset,
                                self.master_timer_queue_offset, v.state_version, v.timestamp, v.counter)

    @classmethod
    def decode(cls, data: bytes) -> TimerCheckpoint:
        read, flush, queue, master, state, stamp, counter = cls.LAYOUT.unpack_from(data)
        return cls(read, flush, queue, master, DataVersion(counter=counter, state_version=state, timestamp=stamp))
