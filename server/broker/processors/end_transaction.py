"""The broker side of transactions: END_TRANSACTION (37) and CHECK_TRANSACTION_STATE (39) on the wire.

Half messages, op records, check counts and discarding live in
:class:`server.transaction.service.TransactionalMessageService`; this adapter stores a
transactional send as a half message, answers END_TRANSACTION with Apache's validation remarks, and
sends each check oneway to one live producer channel of the half message's group.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from ferrymq.remoting.dispatch import handles
from ferrymq.server.transaction.service import COMMIT, ROLLBACK, TransactionalMessageService, prepare_half
from ferrymq.server.config import BrokerConfig
from ferrymq.wire.codes import Perm, RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.headers import EndTransactionRequestHeader
from ferrymq.wire.message import MessageExt

from ..clients import ProducerManager
from ..offsets import ConsumerOffsetManager
from .common import refuse
from ..store_port import StorePort
from ..topics import TopicConfigManager

log = logging.getLogger("ferrymq.broker.transactions")


#: ``park(topic, queue_id, props, sys_flag)``: where a committed message waits instead (updating ``props``), or None.
ParkCommit = Callable[[str, int, dict[str, str], int], "tuple[str, int] | None"]


class TransactionProcessor:
    """``park``: how a committed message with a delay level or timer waits (None: stored as it is)."""

    def __init__(self, config: BrokerConfig, store: StorePort, offsets: ConsumerOffsetManager,
                 topics: TopicConfigManager, producers: ProducerManager, park: ParkCommit | None = None,
                 clock: Callable[[], float] | None = None):
        self.config = config
        self.store = store
        self.producers = producers
        extra = {} if clock is None else {"clock": clock}
        self.service = TransactionalMessageService(
            store, offsets, self._send_check,
            config,  # BrokerConfig has TransactionConfig's keys: UPDATE_BROKER_CONFIG changes apply to the next pass
            broker_name=config.brokerName, ensure_topic=lambda t: topics.create_if_absent(t, 1, Perm.READ | Perm.WRITE),
            park=park, **extra,
        )
        #: CHECK_TRANSACTION_STATE requests sent (tests and runtime info read it).
        self.checks_sent = 0

    def prepare_message(self, msg: MessageExt):
        """Store ``msg`` as a half message; the producer's answer reports the half's offsets."""
        msg.topic, msg.queue_id, msg.sys_flag = prepare_half(msg.topic, msg.queue_id, msg.properties, msg.sys_flag)
        return self.store.put_message(msg)

    def check(self) -> int:
        """One check-back pass (the broker runs it every transactionCheckInterval)."""
        return self.service.check()

    def _send_check(self, group: str, ext: dict[str, str], body: bytes) -> bool:
        channel = self.producers.any_channel(group)
        if channel is None:
            log.warning("check transaction failed: no live producer of group %s", group)
            return False
        try:
            channel.invoke_oneway(request(RequestCode.CHECK_TRANSACTION_STATE, ext, body))
        except Exception as exc:  # noqa: BLE001 - a vanished producer is asked again next round
            log.info("CHECK_TRANSACTION_STATE to %s failed: %s", getattr(channel, "remote_address", "?"), exc)
            return False
        self.checks_sent += 1
        return True

    @handles(RequestCode.END_TRANSACTION)
    def end_transaction(self, cmd: RemotingCommand, channel: Any, h: EndTransactionRequestHeader):
        if self.config.brokerRole == "SLAVE":
            raise refuse(ResponseCode.SLAVE_NOT_AVAILABLE, "Can't find the transaction message, broker is slave")
        if h.commit_or_rollback not in (COMMIT, ROLLBACK):
            if h.from_transaction_check:
                log.info("producer group %s does not know transaction %s yet", h.producer_group, h.msg_id)
            return None  # TRANSACTION_NOT_TYPE: nothing to do, nothing to answer (as Apache)
        result = self.service.end_transaction(h.producer_group, h.tran_state_table_offset, h.commit_log_offset,
                                              h.commit_or_rollback, bool(h.from_transaction_check))
        if result.code != ResponseCode.SUCCESS:
            log.warning("END_TRANSACTION %s from %s refused: %s", h.msg_id, getattr(channel, "remote_address", "?"),
                        result.remark)
            raise refuse(result.code, result.remark)
        return cmd.response(ResponseCode.SUCCESS, None, {})
