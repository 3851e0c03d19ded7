"""A small blocking wire client for the advanced-messaging tests, and a ``ferrymq standalone`` runner.

The client speaks the remoting protocol directly (sdk_py's reactor thread drives a RemotingClient), so
tests see exactly the codes, remarks and records the broker sends. A transactional producer is a
connection that sent HEART_BEAT with producer data: the broker sends CHECK_TRANSACTION_STATE on it.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ferrymq.sdk import reactor_thread
from ferrymq.testing import FerryMQServer
from ferrymq.remoting import RemotingClient
from ferrymq.wire.bodies import ResetOffsetBody, ConsumerData, HeartbeatData, ProducerData, SubscriptionData
from ferrymq.wire.codes import PullSysFlag, RequestCode
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.headers import EndTransactionRequestHeader, SendMessageRequestHeader
from ferrymq.wire.message import MessageExt, decode_record, decode_records, encode_properties

C = RequestCode
COMMIT, ROLLBACK, UNKNOWN = 8, 12, 0


@dataclass
class CheckSeen:
    header: dict[str, str]
    message: MessageExt


class WireClient:
    """Blocking calls to one broker address. ``on_check(check) -> decision`` answers check-backs
    (COMMIT / ROLLBACK / UNKNOWN, or None for no answer at all)."""

    def __init__(self, addr: str, on_check: Callable[[CheckSeen], int | None] | None = None):
        self.addr = addr
        self.on_check = on_check
        self.checks: list[CheckSeen] = []
        #: RESET_CONSUMER_CLIENT_OFFSET requests received: (header, ResetOffsetBody)
        self.resets: list[tuple[dict[str, str], ResetOffsetBody]] = []
        self._lock = threading.Lock()
        reactor_thread.ensure_running()
        self.client = reactor_thread.call(RemotingClient, {
            C.CHECK_TRANSACTION_STATE: self._check, C.RESET_CONSUMER_CLIENT_OFFSET: self._reset})

    def close(self) -> None:
        reactor_thread.call(self.client.close)

    def __enter__(self) -> "WireClient":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def call(self, code: int, ext: dict | None = None, body: bytes = b"", timeout: float = 5) -> RemotingCommand:
        cmd = request(code, {k: str(v) for k, v in (ext or {}).items()}, body)
        return reactor_thread.call(self.client.invoke, self.addr, cmd, timeout, timeout=timeout + 5)

    def oneway(self, code: int, ext: dict | None = None, body: bytes = b"") -> None:
        cmd = request(code, {k: str(v) for k, v in (ext or {}).items()}, body, oneway=True)
        reactor_thread.call(self.client.invoke_oneway, self.addr, cmd)

    # ------------------------------------------------------------------ producing

    def send(self, topic: str, body: bytes, props: dict[str, str] | None = None, queue_id: int = 0,
             group: str = "pg", sys_flag: int = 0) -> RemotingCommand:
        h = SendMessageRequestHeader(
            producer_group=group, topic=topic, default_topic="TBW102", default_topic_queue_nums=4, queue_id=queue_id,
            sys_flag=sys_flag, born_timestamp=int(time.time() * 1000), flag=0,
            properties=encode_properties(props or {}),
        )
        return self.call(C.SEND_MESSAGE_V2, h.to_ext_v2(), body)

    def send_half(self, topic: str, body: bytes, group: str, props: dict[str, str] | None = None) -> RemotingCommand:
        return self.send(topic, body, {"TRAN_MSG": "true", "PGROUP": group, **(props or {})}, group=group,
                         sys_flag=4)  # TRANSACTION_PREPARED_TYPE

    def register_producer(self, group: str) -> None:
        data = HeartbeatData(client_id=f"wire-{id(self)}", producer_data_set=[ProducerData(group)])
        assert self.call(C.HEART_BEAT, None, data.encode()).code == 0

    def register_consumer(self, group: str, topic: str, expression: str = "*", expression_type: str = "TAG",
                          version: int = 1, from_where: str = "CONSUME_FROM_FIRST_OFFSET") -> RemotingCommand:
        sub = SubscriptionData(topic=topic, sub_string=expression, expression_type=expression_type, sub_version=version)
        data = HeartbeatData(client_id=f"wire-{id(self)}", consumer_data_set=[ConsumerData(
            group_name=group, consume_type="CONSUME_PASSIVELY", message_model="CLUSTERING",
            consume_from_where=from_where, subscription_data_set=[sub])])
        return self.call(C.HEART_BEAT, None, data.encode())

    def end(self, group: str, queue_offset: int, commit_log_offset: int, decision: int, msg_id: str,
            from_check: bool = False) -> None:
        h = EndTransactionRequestHeader(producer_group=group, tran_state_table_offset=queue_offset,
                                        commit_log_offset=commit_log_offset, commit_or_rollback=decision,
                                        msg_id=msg_id, transaction_id=msg_id, from_transaction_check=from_check)
        self.oneway(C.END_TRANSACTION, h.to_ext())

    def _check(self, cmd: RemotingCommand, channel) -> None:
        seen = CheckSeen(dict(cmd.ext_fields or {}), decode_record(cmd.body)[0])
        with self._lock:
            self.checks.append(seen)
        decision = self.on_check(seen) if self.on_check is not None else None
        if decision is not None:
            ext = seen.header
            h = EndTransactionRequestHeader(
                producer_group=seen.message.properties.get("PGROUP", ""),
                tran_state_table_offset=int(ext["tranStateTableOffset"]),
                commit_log_offset=int(ext["commitLogOffset"]), commit_or_rollback=decision, msg_id=ext.get("msgId", ""),
                transaction_id=ext.get("transactionId"), from_transaction_check=True)
            channel.invoke_oneway(request(C.END_TRANSACTION, h.to_ext(), b"", oneway=True))
        return None

    def _reset(self, cmd: RemotingCommand, channel) -> None:
        with self._lock:
            self.resets.append((dict(cmd.ext_fields or {}), ResetOffsetBody.decode(cmd.body)))
        return None

    # ------------------------------------------------------------------ consuming

    def pull(self, group: str, topic: str, queue_id: int = 0, offset: int = 0, max_nums: int = 32,
             subscription: str | None = "*", expression_type: str = "TAG", sub_version: int = 0) -> RemotingCommand:
        flag = int(PullSysFlag.SUBSCRIPTION) if subscription is not None else 0
        ext = {"consumerGroup": group, "topic": topic, "queueId": queue_id, "queueOffset": offset,
               "maxMsgNums": max_nums, "sysFlag": flag, "commitOffset": 0, "suspendTimeoutMillis": 0,
               "subVersion": sub_version, "expressionType": expression_type}
        if subscription is not None:
            ext["subscription"] = subscription
        return self.call(C.PULL_MESSAGE, ext)

    def drain(self, topic: str, queue_id: int = 0, group: str = "drain", **kw) -> list[MessageExt]:
        """Every message of one queue from offset 0 (follows nextBeginOffset)."""
        out: list[MessageExt] = []
        offset = 0
        for _ in range(1000):
            resp = self.pull(group, topic, queue_id, offset, **kw)
            if resp.code == 0:
                out.extend(decode_records(resp.body))
            nxt = int((resp.ext_fields or {}).get("nextBeginOffset", offset))
            if resp.code not in (0, 20) or nxt <= offset:
                break
            offset = nxt
        return out


def wait_for(predicate: Callable[[], object], timeout: float, what: str, step: float = 0.05):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def standalone(root: Path, extra: dict[str, str]) -> FerryMQServer:
    """``ferrymq standalone`` in a subprocess over one store directory (the pytest plugin's server), with
    small commit-log segments; restartable (``kill`` then ``start``) on the same ports."""
    return FerryMQServer(root, {"brokerName": "crash-broker", "mappedFileSizeCommitLog": "4194304", **extra})
