"""Half messages, their commit or rollback, and the check-back of the undecided ones.

A transactional send is stored as a half message in RMQ_SYS_TRANS_HALF_TOPIC (queue 0), invisible
to consumers. END_TRANSACTION commits it (a copy goes to the real topic) or rolls it back; either
way an op record in RMQ_SYS_TRANS_OP_HALF_TOPIC marks the half offset done, so the state survives
restarts in the store itself. Half messages left undecided longer than ``transactionTimeOut`` are
re-appended (with TRANSACTION_CHECK_TIMES + 1) and the producer group is asked about the new copy
with CHECK_TRANSACTION_STATE; after ``transactionCheckMax`` checks the message is parked in
TRANS_CHECK_MAX_TIME_TOPIC and never delivered.

As in Apache, the committed copy keeps the half record's properties string verbatim (REAL_TOPIC,
REAL_QID, TRAN_MSG, PGROUP and ``__transactionId__`` included): Apache writes the string before it
clears those keys, and consumers see them.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Callable

from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.message import (
    MessageConst,
    MessageExt,
    MessageSysFlag,
    decode_record,
    encode_properties,
    encode_record,
    peek_record,
)
from ferrymq.wire.msgid import create_offset_msg_id
from ferrymq.wire.topics import TRANS_CHECK_GROUP, TRANS_CHECK_MAX_TIME_TOPIC, TRANS_HALF_TOPIC, TRANS_OP_HALF_TOPIC

log = logging.getLogger("ferrymq.transaction")

#: The tag of op records ("d" for delete: the half message is decided).
OP_TAG = "d"
COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


@dataclass(slots=True)
class TransactionConfig:
    """BrokerConfig keys (Apache names and defaults)."""

    transactionTimeOut: int = 6_000
    transactionCheckMax: int = 15
    transactionCheckInterval: int = 30_000
    fileReservedTime: int = 72  # hours: half messages born before that are discarded


def prepare_half(topic: str, queue_id: int, props: dict[str, str], sys_flag: int) -> tuple[str, int, int]:
    """Where a transactional send is stored: (half topic, queue 0, sys flag with the transaction bits cleared).

    ``props`` gains REAL_TOPIC, REAL_QID and ``__transactionId__`` (= UNIQ_KEY).
    """
    uniq = props.get(MessageConst.UNIQ_KEY)
    if uniq:
        props[MessageConst.TRANSACTION_ID] = uniq
    props[MessageConst.REAL_TOPIC] = topic
    props[MessageConst.REAL_QUEUE_ID] = str(queue_id)
    return TRANS_HALF_TOPIC, 0, sys_flag & ~MessageSysFlag.TRANSACTION_MASK


@dataclass(slots=True)
class EndResult:
    code: int
    remark: str | None = None


class TransactionalMessageService:
    """``config`` is a TransactionConfig or anything with its four keys (the broker passes its live
    BrokerConfig). ``store`` is the broker's :class:`~server.broker.store_port.SystemStore`; ``offsets`` keeps the check pass's progress like a consumer group
    (a :class:`server.broker.offsets.ConsumerOffsetManager`); ``send_check(group, ext, body)`` sends
    CHECK_TRANSACTION_STATE to one live producer of ``group`` and returns False when there is none."""

    def __init__(
        self,
        store,
        offsets,
        send_check: Callable[[str, dict[str, str], bytes], bool],
        config: TransactionConfig | None = None,
        broker_name: str = "broker-a",
        clock: Callable[[], float] = time.time,
        ensure_topic: Callable[[str], None] | None = None,
        park: Callable[[str, int, dict[str, str], int], tuple[str, int] | None] | None = None,
    ):
        self.store = store
        self.offsets = offsets
        self.send_check = send_check
        self.config = config or TransactionConfig()
        self.broker_name = broker_name
        self.clock = clock
        self.ensure_topic = ensure_topic or (lambda topic: None)
        #: ``park(topic, queue, props, sys_flag)``: where a committed message waits instead (a delay level or
        #: timer, as Apache's put hook does for commits), updating ``props``; None to store it as it is.
        self.park = park
        #: Half-queue offsets decided by an op record, above the check pass's progress.
        self.done: set[int] = set()
        self._op_read = 0

    def _now(self) -> int:
        return int(self.clock() * 1000)

    # ------------------------------------------------------------------ op records

    def _refresh_done(self) -> None:
        """Read op records written since the last look (they also come from before a restart)."""
        bounds = self.store.queue_range(TRANS_OP_HALF_TOPIC, 0)
        if bounds is None:
            return
        start = max(self._op_read, bounds[0])
        end = bounds[1]
        for _, _, view in self.store.iter_queue(TRANS_OP_HALF_TOPIC, 0, start, end):
            if view is not None:
                msg, _ = decode_record(view)
                for part in msg.body.decode(errors="replace").split(","):
                    if part.strip().isdigit():
                        self.done.add(int(part))
        self._op_read = max(start, end)

    def _mark_done(self, half_queue_offset: int) -> bool:
        result = self.store.append(
            TRANS_OP_HALF_TOPIC, 0, f"{half_queue_offset},".encode(), {MessageConst.TAGS: OP_TAG}
        )
        if not result.ok:
            log.error("cannot write the op record for half offset %d: %s", half_queue_offset, result.status.name)
            return False
        self.done.add(half_queue_offset)
        return True

    # ------------------------------------------------------------------ END_TRANSACTION

    def end_transaction(
        self,
        producer_group: str,
        tran_state_table_offset: int,
        commit_log_offset: int,
        commit_or_rollback: int,
        from_transaction_check: bool = False,
    ) -> EndResult:
        """Apply a producer's decision. Unknown (0) or any other value does nothing: a check will follow."""
        if commit_or_rollback not in (COMMIT, ROLLBACK):
            return EndResult(ResponseCode.SUCCESS)
        view = self.store.read_record(commit_log_offset)
        half = None
        if view is not None:
            try:
                half, _ = decode_record(view)
            except ValueError:
                half = None
        if half is None or half.topic != TRANS_HALF_TOPIC:
            return EndResult(ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        if not from_transaction_check and self._immune(half):
            log.warning(
                "END_TRANSACTION for %s refused: within its CHECK_IMMUNITY_TIME_IN_SECONDS, the check decides",
                half.uniq_key,
            )
            return EndResult(ResponseCode.ILLEGAL_OPERATION)  # Apache answers 604 with no remark: wait for the check
        if half.properties.get(MessageConst.PRODUCER_GROUP) != producer_group:
            return EndResult(ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != tran_state_table_offset:
            return EndResult(ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        if half.commitlog_offset != commit_log_offset:
            return EndResult(ResponseCode.SYSTEM_ERROR, "The commit log offset wrong")
        if half.queue_offset in self.done:
            return EndResult(ResponseCode.SUCCESS)  # already decided: never deliver twice
        if commit_or_rollback == COMMIT:
            result = self._commit(half)
            if not result.ok:
                return EndResult(ResponseCode.SYSTEM_ERROR, f"storing the committed message failed: {result.status.name}")
        self._mark_done(half.queue_offset)
        return EndResult(ResponseCode.SUCCESS)

    def _immune(self, half: MessageExt) -> bool:
        seconds = half.properties.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
        if not seconds:
            return False
        try:
            immunity_ms = int(seconds) * 1000
        except ValueError:
            return False
        return self._now() - half.born_timestamp > immunity_ms

    def _commit(self, half: MessageExt):
        """Store the committed message in its own topic and queue; the half's REAL_TOPIC and REAL_QID go,
        as Apache's broker drops them (a delay or timer ``park`` sets them again for its own topic)."""
        props = dict(half.properties)
        topic = props.pop(MessageConst.REAL_TOPIC, "")
        try:
            real_queue = int(props.pop(MessageConst.REAL_QUEUE_ID, "0"))
        except ValueError:
            real_queue = 0
        sys_flag = (half.sys_flag & ~MessageSysFlag.TRANSACTION_MASK) | COMMIT
        if self.park is not None:
            where = self.park(topic, real_queue, props, sys_flag)
            if where is not None:
                topic, real_queue = where
        return self.store.append(
            topic,
            real_queue,
            half.body,
            encode_properties(props),
            flag=half.flag,
            sys_flag=sys_flag,
            born_timestamp=half.born_timestamp,
            born_host=half.born_host,
            reconsume_times=half.reconsume_times,
            prepared_transaction_offset=half.commitlog_offset,
        )

    # ------------------------------------------------------------------ check-back

    def check(self) -> int:
        """One pass over the undecided half messages; returns how many checks were sent."""
        self._refresh_done()
        bounds = self.store.queue_range(TRANS_HALF_TOPIC, 0)
        if bounds is None:
            return 0
        progress = self.offsets.query(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, 0)
        start = max(progress, bounds[0])
        pass_start = self._now()
        end = bounds[1]
        sent = 0
        cfg = self.config
        stopped_at = None
        for offset, _, view in self.store.iter_queue(TRANS_HALF_TOPIC, 0, start, end):
            if offset in self.done or view is None:
                continue
            half, _ = decode_record(view)
            props = half.properties
            checks = int(props.get(MessageConst.TRANSACTION_CHECK_TIMES, "0") or 0)
            now = self._now()
            if checks >= cfg.transactionCheckMax or now - half.born_timestamp > cfg.fileReservedTime * 3_600_000:
                self._discard(half, peek_record(view).properties, checks)
                continue
            immunity = cfg.transactionTimeOut
            custom = props.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
            if custom and custom.isdigit():
                immunity = max(immunity, int(custom) * 1000)
            if half.store_timestamp >= pass_start or now - half.born_timestamp < immunity:
                stopped_at = offset  # this one and everything after it are too young
                break
            if self._recheck(half, checks):
                sent += 1
        progress = max(start, end) if stopped_at is None else stopped_at
        self.offsets.commit(TRANS_CHECK_GROUP, TRANS_HALF_TOPIC, 0, progress)
        self.done = {o for o in self.done if o >= progress}
        return sent

    def _discard(self, half: MessageExt, properties: str, checks: int) -> None:
        log.warning(
            "half message %s (offset %d) discarded after %d checks without a decision; parked in %s",
            half.uniq_key, half.queue_offset, checks, TRANS_CHECK_MAX_TIME_TOPIC,
        )
        self.ensure_topic(TRANS_CHECK_MAX_TIME_TOPIC)
        self.store.append(
            TRANS_CHECK_MAX_TIME_TOPIC, 0, half.body, properties, flag=half.flag, sys_flag=half.sys_flag,
            born_timestamp=half.born_timestamp, born_host=half.born_host, reconsume_times=half.reconsume_times,
        )

    def _recheck(self, half: MessageExt, checks: int) -> bool:
        """Re-append ``half`` with one more check counted, then ask its producer group about the copy."""
        props = dict(half.properties)
        props[MessageConst.TRANSACTION_CHECK_TIMES] = str(checks + 1)
        copy = self.store.append(
            TRANS_HALF_TOPIC, 0, half.body, props, flag=half.flag, sys_flag=half.sys_flag,
            born_timestamp=half.born_timestamp, born_host=half.born_host, reconsume_times=half.reconsume_times,
        )
        if not copy.ok:
            log.error("cannot re-append half message %s for its check: %s", half.uniq_key, copy.status.name)
            return False
        group = props.get(MessageConst.PRODUCER_GROUP, "")
        uniq = props.get(MessageConst.UNIQ_KEY, "")
        ext = {
            "topic": TRANS_HALF_TOPIC,
            "tranStateTableOffset": str(copy.queue_offset),
            "commitLogOffset": str(copy.commitlog_offset),
            "msgId": uniq,
            "transactionId": props.get(MessageConst.TRANSACTION_ID, uniq),
            "offsetMsgId": create_offset_msg_id(self.store.store_host, copy.commitlog_offset),
            "bname": self.broker_name,
        }
        try:
            real_queue = int(props.get(MessageConst.REAL_QUEUE_ID, "0"))
        except ValueError:
            real_queue = 0
        body = encode_record(
            MessageExt(
                topic=props.get(MessageConst.REAL_TOPIC, TRANS_HALF_TOPIC), body=half.body, flag=half.flag,
                properties=props, queue_id=real_queue, queue_offset=copy.queue_offset,
                commitlog_offset=copy.commitlog_offset, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp,
                born_host=half.born_host, store_timestamp=copy.store_timestamp, store_host=self.store.store_host,
                reconsume_times=half.reconsume_times,
            )
        )
        if not self.send_check(group, ext, body):
            log.info("no live producer of group %s to check transaction %s; will ask again", group, uniq)
            return False
        return True
