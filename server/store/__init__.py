"""The store engine: commit log, consume queues, index, flush, recovery, retention, config files.

Entry point for the broker: :class:`MessageStore` with a :class:`MessageStoreConfig`.
"""

from .config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig
from .filter import MessageFilter, TagsCodeFilter
from .message_store import MessageStore, StoreLockedError
from .status import GetMessageResult, GetMessageStatus, PutMessageResult, PutMessageStatus, QueryMessageResult

__all__ = [
    "ASYNC_FLUSH", "SYNC_FLUSH", "MessageStoreConfig", "MessageStore", "StoreLockedError", "MessageFilter",
    "TagsCodeFilter", "GetMessageResult", "GetMessageStatus", "PutMessageResult", "PutMessageStatus",
    "QueryMessageResult",
]
