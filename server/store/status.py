"""Result types of the store API, with Apache's status names (PutMessageStatus, GetMessageStatus)."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class PutMessageStatus(enum.Enum):
    PUT_OK = "PUT_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"
    SERVICE_NOT_AVAILABLE = "SERVICE_NOT_AVAILABLE"
    CREATE_MAPEDFILE_FAILED = "CREATE_MAPEDFILE_FAILED"
    MESSAGE_ILLEGAL = "MESSAGE_ILLEGAL"
    PROPERTIES_SIZE_EXCEEDED = "PROPERTIES_SIZE_EXCEEDED"
    OS_PAGECACHE_BUSY = "OS_PAGECACHE_BUSY"
    UNKNOWN_ERROR = "UNKNOWN_ERROR"


class GetMessageStatus(enum.Enum):
    FOUND = "FOUND"
    NO_MATCHED_MESSAGE = "NO_MATCHED_MESSAGE"
    MESSAGE_WAS_REMOVING = "MESSAGE_WAS_REMOVING"
    OFFSET_FOUND_NULL = "OFFSET_FOUND_NULL"
    OFFSET_OVERFLOW_BADLY = "OFFSET_OVERFLOW_BADLY"
    OFFSET_OVERFLOW_ONE = "OFFSET_OVERFLOW_ONE"
    OFFSET_TOO_SMALL = "OFFSET_TOO_SMALL"
    NO_MATCHED_LOGIC_QUEUE = "NO_MATCHED_LOGIC_QUEUE"
    NO_MESSAGE_IN_QUEUE = "NO_MESSAGE_IN_QUEUE"


@dataclass(slots=True)
class PutMessageResult:
    """Outcome of a put. For a batch, ``msg_id`` is the comma-joined offset ids and ``queue_offset``
    the first message's; ``msg_num`` says how many records were written."""

    status: PutMessageStatus
    commitlog_offset: int = -1
    wrote_bytes: int = 0
    queue_offset: int = -1
    msg_id: str = ""
    store_timestamp: int = 0
    msg_num: int = 0
    remark: str = ""
    #: SYNC_FLUSH and the producer waits: answer from ``MessageStore.wait_flush``
    needs_flush_wait: bool = False
    #: a batch's UNIQ_KEYs, comma-joined (the send answer's transaction id)
    uniq_keys: str = ""

    @property
    def ok(self) -> bool:
        return self.status is PutMessageStatus.PUT_OK


@dataclass(slots=True)
class GetMessageResult:
    """Records found for a pull. ``messages`` are read-only memoryviews of the commit log's mapping
    (zero copy): write them out, or ``bytes()`` them if they must outlive segment deletion."""

    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    messages: list = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def message_count(self) -> int:
        return len(self.messages)

    def body(self) -> bytes:
        """The records concatenated: a PULL_MESSAGE response body."""
        return b"".join(self.messages)


@dataclass(slots=True)
class QueryMessageResult:
    """Records found by key (QUERY_MESSAGE) plus the index state the response header reports."""

    messages: list = field(default_factory=list)
    commitlog_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    def body(self) -> bytes:
        return b"".join(self.messages)
