"""User-facing message types: what an application builds to send and what a send or pull gives back.

The record layout and decoding live in :mod:`wire.message`; this module only adds the producer-side
:class:`Message` (properties kept the way the Java client keeps them) and the result types, so that a
script reads ``result.status``, ``result.msg_id`` and ``msg.tags`` with the meaning Apache's clients give
those names.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from ferrymq.wire.bodies import MessageQueue
from ferrymq.wire.message import MessageConst, MessageExt

__all__ = [
    "Message",
    "MessageExt",
    "MessageQueue",
    "PullResult",
    "PullStatus",
    "SendResult",
    "SendStatus",
]


@dataclass(slots=True)
class Message:
    """A message to send. ``properties`` is the wire property map; tags, keys and delay are views on it.

    Like Java's ``Message``, a new message asks the broker to answer only once it is stored
    (``WAIT=true``).
    """

    topic: str
    body: bytes = b""
    tags: str | None = None
    keys: str | list[str] | None = None
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    delay_level: int = 0
    wait_store_msg_ok: bool = True

    def __post_init__(self) -> None:
        if isinstance(self.body, str):
            self.body = self.body.encode()
        if self.tags:
            self.properties[MessageConst.TAGS] = self.tags
        if self.keys:
            keys = self.keys if isinstance(self.keys, str) else MessageConst.KEY_SEPARATOR.join(self.keys)
            self.properties[MessageConst.KEYS] = keys
        if self.delay_level > 0:
            self.properties[MessageConst.DELAY_TIME_LEVEL] = str(self.delay_level)
        self.properties.setdefault(MessageConst.WAIT_STORE_MSG_OK, "true" if self.wait_store_msg_ok else "false")

    def put_user_property(self, name: str, value: str) -> None:
        self.properties[name] = value

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(MessageConst.UNIQ_KEY)


class SendStatus(enum.Enum):
    """How far the broker got (Java ``SendStatus``): anything but SEND_OK means stored but not as asked."""

    SEND_OK = "SEND_OK"
    FLUSH_DISK_TIMEOUT = "FLUSH_DISK_TIMEOUT"
    FLUSH_SLAVE_TIMEOUT = "FLUSH_SLAVE_TIMEOUT"
    SLAVE_NOT_AVAILABLE = "SLAVE_NOT_AVAILABLE"


@dataclass(slots=True)
class SendResult:
    """``msg_id`` is the client's UNIQ_KEY (comma-joined for a batch), ``offset_msg_id`` the broker's
    offset message id, as the Java client reports them."""

    status: SendStatus
    msg_id: str | None
    offset_msg_id: str
    message_queue: MessageQueue
    queue_offset: int
    transaction_id: str | None = None
    region_id: str | None = None
    trace_on: bool = True


class PullStatus(enum.Enum):
    FOUND = "FOUND"
    NO_NEW_MSG = "NO_NEW_MSG"
    NO_MATCHED_MSG = "NO_MATCHED_MSG"
    OFFSET_ILLEGAL = "OFFSET_ILLEGAL"


@dataclass(slots=True)
class PullResult:
    status: PullStatus
    next_begin_offset: int
    min_offset: int
    max_offset: int
    messages: list[MessageExt] = field(default_factory=list)
    suggest_which_broker_id: int = 0
