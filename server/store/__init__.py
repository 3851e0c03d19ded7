"""The store engine: commit log, consume queues, index, flush, recovery, retention, config files.

Entry point for the broker: ``MessageStore(MessageStoreConfig(...))``, then ``start()`` / ``shutdown()``.
All calls come from one thread (the reactor); fsync, preallocation and retention run on store threads.

* write: ``put_message(topic, queue_id, body, properties, flag=, sys_flag=, born_timestamp=, born_host=,
  reconsume_times=, prepared_transaction_offset=, properties_str=) -> PutMessageResult`` (status,
  commitlog_offset, queue_offset, msg_id, store_timestamp, needs_flush_wait); ``put_batch`` for a
  SEND_BATCH_MESSAGE body, ``put_messages`` for a batch of entries; ``wait_flush(result, callback)`` / ``put_message_future`` / ``twisted_adapter.deferred_for``
  for SYNC_FLUSH promises.
* read: ``get_message(group, topic, queue_id, offset, max_nums, max_bytes, filter) -> GetMessageResult``
  (Apache statuses, next_begin_offset, min/max, zero-copy memoryview records); ``get_max_offset``,
  ``get_min_offset``, ``get_store_time``, ``get_earliest_store_time``, ``search_offset_by_time``,
  ``get_queue_unit``, ``select_one_message_by_offset``, ``look_message_by_offset``, ``query_message``.
* events: ``add_arriving_listener(fn(topic, queue_id, max_offset, tags_code, store_ts))``.
* admin/HA: ``delete_topics``, ``runtime_info``, ``clean_expired_files_manually``,
  ``get_commitlog_data`` / ``append_to_commitlog`` (replication), ``recovery_report``;
  ``dispatcher.dispatch_record(info, phys)`` dispatches a record read from the commit log (:mod:`.dispatch`).
* metadata files: ``config_files.ConfigFile(dir, TOPICS | SUBSCRIPTION_GROUPS | CONSUMER_OFFSETS |
  DELAY_OFFSETS)`` with atomic ``save`` and ``.bak`` fallback on ``load``.
"""

from .config import ASYNC_FLUSH, SYNC_FLUSH, MessageStoreConfig
from .message_filter import MessageFilter, TagsCodeFilter
from .message_store import MessageStore, StoreLockedError
from .status import GetMessageResult, GetMessageStatus, PutMessageResult, PutMessageStatus, QueryMessageResult

__all__ = [
    "ASYNC_FLUSH", "SYNC_FLUSH", "MessageStoreConfig", "MessageStore", "StoreLockedError", "MessageFilter",
    "TagsCodeFilter", "GetMessageResult", "GetMessageStatus", "PutMessageResult", "PutMessageStatus",
    "QueryMessageResult",
]
