"""Transactional messages (basic): half messages, END_TRANSACTION (37) and check-back (CHECK_TRANSACTION_STATE 39).

A half message is stored in RMQ_SYS_TRANS_HALF_TOPIC (queue 0) with its destination in REAL_TOPIC /
REAL_QID, so consumers never see it. END_TRANSACTION commit writes the real message (transaction type
COMMIT, preparedTransactionOffset = the half's commit-log offset) and an op record; rollback writes the
op record only. Op records (RMQ_SYS_TRANS_OP_HALF_TOPIC, tag ``d``, body ``"<half queue offset>,"``)
mark a half as resolved, as Apache writes them.

Unresolved halves older than ``transactionTimeOut`` are checked back every ``transactionCheckInterval``
with a live producer of their group, at most ``transactionCheckMax`` times, then discarded into
TRANS_CHECK_MAX_TIME_TOPIC. What is pending is rebuilt at start by scanning the half and op queues;
check counts live in memory (Apache re-appends the half with a counter instead).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

from wire import topics as names
from wire.codes import RequestCode, ResponseCode
from wire.command import RemotingCommand, request
from wire.errors import BodyError
from wire.headers import CheckTransactionStateRequestHeader, EndTransactionRequestHeader, decode_request_header
from wire.message import MessageConst, MessageExt, MessageSysFlag, decode_record, encode_record
from wire.msgid import create_offset_msg_id

from .context import BrokerContext
from .processors.common import fail, then

log = logging.getLogger("ferrymq.broker.transactions")

HALF_QUEUE = 0
REMOVE_TAG = "d"
OFFSET_SEPARATOR = ","
_COMMIT = MessageSysFlag.TRANSACTION_COMMIT_TYPE
_ROLLBACK = MessageSysFlag.TRANSACTION_ROLLBACK_TYPE


@dataclass
class PendingHalf:
    phys: int
    group: str
    store_timestamp: int
    immunity_ms: int
    checks: int = 0


class TransactionService:
    def __init__(self, ctx: BrokerContext):
        self.ctx = ctx
        self.pending: dict[int, PendingHalf] = {}

    def table(self) -> dict[int, Any]:
        return {RequestCode.END_TRANSACTION: self.end_transaction}

    # ------------------------------------------------------------------ half messages

    def prepare_message(self, msg: MessageExt):
        """Store ``msg`` as a half message; the producer's answer reports the half's offsets."""
        props = dict(msg.properties)
        uniq = props.get(MessageConst.UNIQ_KEY)
        if uniq:
            props[MessageConst.TRANSACTION_ID] = uniq
        props[MessageConst.REAL_TOPIC] = msg.topic
        props[MessageConst.REAL_QUEUE_ID] = str(msg.queue_id)
        half = MessageExt(
            topic=names.TRANS_HALF_TOPIC, body=msg.body, flag=msg.flag, properties=props, queue_id=HALF_QUEUE,
            sys_flag=MessageSysFlag.reset_transaction(msg.sys_flag, MessageSysFlag.TRANSACTION_NOT_TYPE),
            born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
            reconsume_times=msg.reconsume_times,
        )

        def remember(result):
            if result.ok:
                self.pending[result.queue_offset] = PendingHalf(
                    result.commitlog_offset, props.get(MessageConst.PRODUCER_GROUP, ""), result.store_timestamp,
                    _immunity_ms(props, self.ctx.config.transactionTimeOut),
                )
            return result

        return then(self.ctx.store.put_message(half), remember)

    # ------------------------------------------------------------------ END_TRANSACTION

    def end_transaction(self, cmd: RemotingCommand, channel: Any):
        ctx = self.ctx
        h: EndTransactionRequestHeader = decode_request_header(cmd)
        if ctx.config.brokerRole == "SLAVE":
            return fail(cmd, ResponseCode.SLAVE_NOT_AVAILABLE, "Can't find the transaction message, broker is slave")
        kind = h.commit_or_rollback
        if kind not in (_COMMIT, _ROLLBACK):
            if h.from_transaction_check:
                log.info("producer %s still does not know transaction %s", h.producer_group, h.msg_id)
            return None  # TRANSACTION_NOT_TYPE: nothing to do, nothing to answer (as Apache)
        half, error = self._find_half(cmd, h)
        if error is not None:
            return error
        if kind == _ROLLBACK:
            return then(self._write_op(half), lambda _r: cmd.response(ResponseCode.SUCCESS, None, {}))
        # The committed record keeps the half's properties string as is (TRAN_MSG, REAL_TOPIC... included):
        # Apache clears them from its in-memory map only after encoding the string it stores, and clients
        # rely on TRAN_MSG=true to expose the transaction id.
        props = half.properties
        real = MessageExt(
            topic=props[MessageConst.REAL_TOPIC], body=half.body, flag=half.flag,
            queue_id=int(props.get(MessageConst.REAL_QUEUE_ID, "0")),
            sys_flag=MessageSysFlag.reset_transaction(half.sys_flag, _COMMIT),
            born_timestamp=half.born_timestamp, born_host=half.born_host, store_host=ctx.store_host,
            reconsume_times=half.reconsume_times, prepared_transaction_offset=h.commit_log_offset, properties=props,
        )

        def committed(result):
            if not result.ok:
                return fail(cmd, ResponseCode.SYSTEM_ERROR, f"commit of the half message failed: {result.status.name}")
            ctx.stats.put.add(1)
            return then(self._write_op(half), lambda _r: cmd.response(ResponseCode.SUCCESS, None, {}))

        return then(ctx.store.put_message(real), committed)

    def _find_half(self, cmd: RemotingCommand, h: EndTransactionRequestHeader):
        raw = self.ctx.store.look_message_by_offset(h.commit_log_offset)
        half = None
        if raw is not None:
            try:
                half, _ = decode_record(raw)
            except BodyError:
                half = None
        if half is None or half.topic != names.TRANS_HALF_TOPIC:
            return None, fail(cmd, ResponseCode.SYSTEM_ERROR, "Find prepared transaction message failed")
        if half.properties.get(MessageConst.PRODUCER_GROUP) != h.producer_group:
            return None, fail(cmd, ResponseCode.SYSTEM_ERROR, "The producer group wrong")
        if half.queue_offset != h.tran_state_table_offset:
            return None, fail(cmd, ResponseCode.SYSTEM_ERROR, "The transaction state table offset wrong")
        if half.commitlog_offset != h.commit_log_offset:
            return None, fail(cmd, ResponseCode.SYSTEM_ERROR, "The commit log offset wrong")
        if half.queue_offset not in self.pending:
            log.info("transaction %s ended again (already resolved)", h.msg_id)
        return half, None

    def _write_op(self, half: MessageExt):
        self.pending.pop(half.queue_offset, None)
        op = MessageExt(
            topic=names.TRANS_OP_HALF_TOPIC, body=f"{half.queue_offset}{OFFSET_SEPARATOR}".encode(),
            properties={MessageConst.TAGS: REMOVE_TAG, MessageConst.WAIT_STORE_MSG_OK: "false"},
            queue_id=HALF_QUEUE, born_timestamp=self.ctx.now_ms(), born_host=self.ctx.store_host,
            store_host=self.ctx.store_host,
        )
        return self.ctx.store.put_message(op)

    # ------------------------------------------------------------------ start-up and check-back

    def load(self) -> None:
        """Rebuild the pending halves: every half without an op record."""
        done: set[int] = set()
        for msg in self._scan(names.TRANS_OP_HALF_TOPIC):
            for part in msg.body.decode("ascii", "replace").split(OFFSET_SEPARATOR):
                if part.strip().lstrip("-").isdigit():
                    done.add(int(part))
        for msg in self._scan(names.TRANS_HALF_TOPIC):
            if msg.queue_offset not in done:
                self.pending[msg.queue_offset] = PendingHalf(
                    msg.commitlog_offset, msg.properties.get(MessageConst.PRODUCER_GROUP, ""), msg.store_timestamp,
                    _immunity_ms(msg.properties, self.ctx.config.transactionTimeOut),
                )
        if self.pending:
            log.info("%d transactions still open after start", len(self.pending))

    def _scan(self, topic: str):
        store = self.ctx.store
        offset = store.get_min_offset(topic, HALF_QUEUE)
        end = store.get_max_offset(topic, HALF_QUEUE)
        while offset < end:
            result = store.get_message(topic, HALF_QUEUE, offset, 32, 1 << 20, None)
            if result.next_begin_offset <= offset:
                break
            for view in result.messages:
                try:
                    yield decode_record(view)[0]
                except BodyError:
                    continue
            offset = result.next_begin_offset

    def check(self) -> None:
        """Ask producers about halves older than their immunity; discard those checked too often."""
        ctx = self.ctx
        now = int(time.time() * 1000)  # store timestamps are wall-clock
        for queue_offset, half in list(self.pending.items()):
            if now - half.store_timestamp < half.immunity_ms:
                continue
            raw = ctx.store.look_message_by_offset(half.phys)
            if raw is None:  # aged out of the commit log
                self.pending.pop(queue_offset, None)
                continue
            msg, _ = decode_record(raw)
            if half.checks >= ctx.config.transactionCheckMax:
                self._discard(msg)
                continue
            channel = ctx.producers.any_channel(half.group)
            if channel is None:
                log.debug("no producer of group %s online to check transaction at %d", half.group, queue_offset)
                continue
            half.checks += 1
            self._send_check(channel, msg)

    def _send_check(self, channel: Any, half: MessageExt) -> None:
        props = half.properties
        uniq = props.get(MessageConst.UNIQ_KEY)
        header = CheckTransactionStateRequestHeader(
            tran_state_table_offset=half.queue_offset, commit_log_offset=half.commitlog_offset,
            topic=props.get(MessageConst.REAL_TOPIC), msg_id=uniq,
            transaction_id=props.get(MessageConst.TRANSACTION_ID, uniq),
            offset_msg_id=create_offset_msg_id(half.store_host, half.commitlog_offset),
            broker_name=self.ctx.config.brokerName,
        )
        shown = MessageExt(**{f: getattr(half, f) for f in half.__dataclass_fields__})
        shown.topic = props.get(MessageConst.REAL_TOPIC, half.topic)
        shown.queue_id = int(props.get(MessageConst.REAL_QUEUE_ID, "0"))
        try:
            channel.invoke_oneway(request(RequestCode.CHECK_TRANSACTION_STATE, header.to_ext(), encode_record(shown)))
        except Exception as exc:  # noqa: BLE001 - a vanished producer is asked again next round
            log.info("CHECK_TRANSACTION_STATE to %s failed: %s", getattr(channel, "remote_address", "?"), exc)

    def _discard(self, half: MessageExt) -> None:
        log.warning("transaction of half message at %d (group %s) checked %d times without an answer; discarded",
                    half.queue_offset, half.properties.get(MessageConst.PRODUCER_GROUP), self.ctx.config.transactionCheckMax)
        self.ctx.topics.create_if_absent(names.TRANS_CHECK_MAX_TIME_TOPIC, 1, 6)
        kept = MessageExt(
            topic=names.TRANS_CHECK_MAX_TIME_TOPIC, body=half.body, flag=half.flag, properties=dict(half.properties),
            queue_id=0, sys_flag=half.sys_flag, born_timestamp=half.born_timestamp, born_host=half.born_host,
            store_host=self.ctx.store_host,
        )
        self.ctx.store.put_message(kept)
        self._write_op(half)


def _immunity_ms(props: dict[str, str], default_ms: int) -> int:
    """CHECK_IMMUNITY_TIME_IN_SECONDS (set by the producer) overrides transactionTimeOut."""
    raw = props.get(MessageConst.CHECK_IMMUNITY_TIME_IN_SECONDS)
    if raw and raw.strip().isdigit():
        return int(raw) * 1000
    return default_ms
