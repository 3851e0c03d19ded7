"""Result types of the store API, with Apache's status names (PutMessageStatus, GetMessageStatus)."""

from __future__ import annotations

import enum
import struct
from dataclasses import dataclass, field


#: a stored record starts with its own length
_TOTAL_SIZE = struct.Struct(">i")


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
    """Records found for a pull, as read-only memoryviews of the commit log's mapping (zero copy): write
    them out, or ``bytes()`` them if they must outlive segment deletion.

    ``spans`` each cover one or more whole records that lie back to back in the commit log (a batch
    stores its messages so), so a pull of a batch-sent backlog is a few views, not one per message.
    """

    status: GetMessageStatus
    next_begin_offset: int = 0
    min_offset: int = 0
    max_offset: int = 0
    spans: list = field(default_factory=list)
    queue_offsets: list[int] = field(default_factory=list)
    message_count: int = 0
    buffer_total_size: int = 0
    suggest_pulling_from_slave: bool = False

    @property
    def messages(self) -> list[memoryview]:
        """One view per record, split off the spans by each record's TOTALSIZE field."""
        out = []
        for span in self.spans:
            pos, end = 0, len(span)
            while pos < end:
                size = _TOTAL_SIZE.unpack_from(span, pos)[0]
                out.append(span[pos : pos + size])
                pos += size
        return out

    def body(self) -> bytes:
        """The records concatenated: a PULL_MESSAGE response body."""
        spans = self.spans
        return bytes(spans[0]) if len(spans) == 1 else b"".join(spans)


@dataclass(slots=True)
class QueryMessageResult:
    """Records found by key (QUERY_MESSAGE) plus the index state the response header reports."""

    messages: list = field(default_factory=list)
    commitlog_offsets: list[int] = field(default_factory=list)
    index_last_update_timestamp: int = 0
    index_last_update_phyoffset: int = 0

    def body(self) -> bytes:
        return b"".join(self.messages)
