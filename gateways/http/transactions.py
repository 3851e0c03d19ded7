"""Transactions published over HTTP: what the gateway remembers of each, and the signed check-back
call that lets an HTTP service answer the broker's CHECK_TRANSACTION_STATE.

The local transaction is the HTTP client's. Its half message is published, left UNKNOWN, and resolved
either by the client (``POST /v1/transactions/{id}``) or, once the broker's ``transactionTimeOut`` has
passed, by a check-back: the broker asks this gateway (the group's transactional producer), and the
gateway asks the message's ``checkBackUrl``. A failed, slow or garbled answer counts as UNKNOWN, as an
exception in a Java ``TransactionListener.checkLocalTransaction`` does: the broker asks again every
``transactionCheckInterval`` and discards the message after ``transactionCheckMax`` checks.

The first decision wins: once resolved, a later check-back (the broker may still hold a copy of the
half message when the decision crosses its check pass) is answered from the record without calling
the receiver. The gateway remembers the newest :data:`TRANSACTIONS_KEPT` transactions with their latest
:data:`CHECK_BACKS_KEPT` check-backs each; the open ones are also kept in a file (:class:`TransactionFile`),
so that after a restart, clean or not, the broker's check-backs still reach the receivers and the
clients' decisions still reach the broker.
"""

from __future__ import annotations

import asyncio
import base64
import enum
import hashlib
import hmac
import itertools
import logging
import os
import tempfile
import time
from collections import OrderedDict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson

from ferrymq.sdk.producer import LocalTransactionState
from ferrymq.wire.message import MessageConst, MessageExt

from .messages import is_text, user_properties

log = logging.getLogger("ferrymq.gateway.http.transactions")

#: transactions remembered (the oldest are forgotten first; a forgotten one is 404 and checks back UNKNOWN)
TRANSACTIONS_KEPT = 10_000
#: check-backs remembered per transaction (Apache's transactionCheckMax defaults to 15)
CHECK_BACKS_KEPT = 64
#: headers of a check-back call (see :func:`sign`)
TIMESTAMP_HEADER = "FerryMQ-Timestamp"
SIGNATURE_HEADER = "FerryMQ-Signature"


class State(enum.Enum):
    UNKNOWN = LocalTransactionState.UNKNOW
    COMMIT = LocalTransactionState.COMMIT_MESSAGE
    ROLLBACK = LocalTransactionState.ROLLBACK_MESSAGE


def sign(secret: bytes, timestamp: str, body: bytes) -> str:
    """The signature header's value: HMAC-SHA256 of ``timestamp + "." + body``, so neither the exact
    body bytes nor the time can be changed without the secret."""
    return "sha256=" + hmac.new(secret, timestamp.encode() + b"." + body, hashlib.sha256).hexdigest()


def verify(secret: bytes, timestamp: str, body: bytes, signature: str, *, max_age: float = 300.0,
           now: float | None = None) -> bool:
    """A receiver's check of a check-back call: signed with ``secret`` and at most ``max_age`` seconds old."""
    try:
        age = (time.time() if now is None else now) - int(timestamp)
    except ValueError:
        return False
    return abs(age) <= max_age and hmac.compare_digest(sign(secret, timestamp, body), signature)


def _now_ms() -> int:
    return int(time.time() * 1000)


@dataclass(slots=True)
class CheckBack:
    time: int
    check_times: int
    url: str | None
    status: int | None
    answer: State
    latency_ms: int
    detail: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"time": self.time, "checkTimes": self.check_times, "url": self.url, "status": self.status,
                "answer": self.answer.name, "latencyMs": self.latency_ms, "detail": self.detail}

    @classmethod
    def from_json(cls, value: dict[str, Any]) -> CheckBack:
        return cls(value["time"], value["checkTimes"], value["url"], value["status"], State[value["answer"]],
                   value["latencyMs"], value["detail"])


@dataclass(slots=True)
class Transaction:
    """A half message and how it was resolved. ``offset_msg_id``/``queue_offset`` locate its newest copy
    in the broker's half queue (each check stores it again), which is the one END_TRANSACTION names."""

    id: str
    msg_id: str
    topic: str
    tag: str | None
    keys: list[str]
    producer_group: str
    check_back_url: str
    broker_name: str
    offset_msg_id: str
    queue_offset: int
    created_at: int = field(default_factory=_now_ms)
    state: State = State.UNKNOWN
    resolved_by: str | None = None
    resolved_at: int | None = None
    check_backs: deque[CheckBack] = field(default_factory=lambda: deque(maxlen=CHECK_BACKS_KEPT))

    def resolve(self, state: State, by: str) -> None:
        self.state, self.resolved_by, self.resolved_at = state, by, _now_ms()

    def to_json(self) -> dict[str, Any]:
        return {"transactionId": self.id, "msgId": self.msg_id, "topic": self.topic, "tag": self.tag,
                "keys": self.keys, "producerGroup": self.producer_group, "checkBackUrl": self.check_back_url,
                "brokerName": self.broker_name, "state": self.state.name, "resolvedBy": self.resolved_by,
                "createdAt": self.created_at, "resolvedAt": self.resolved_at,
                "checkBacks": [c.to_json() for c in self.check_backs]}

    def to_record(self) -> dict[str, Any]:
        """What :class:`TransactionFile` keeps: :meth:`to_json` and where the half message's newest copy is."""
        return {**self.to_json(), "offsetMsgId": self.offset_msg_id, "queueOffset": self.queue_offset}

    @classmethod
    def from_record(cls, value: dict[str, Any]) -> Transaction:
        tx = cls(value["transactionId"], value["msgId"], value["topic"], value["tag"], value["keys"],
                 value["producerGroup"], value["checkBackUrl"], value["brokerName"], value["offsetMsgId"],
                 value["queueOffset"], value["createdAt"], State[value["state"]], value["resolvedBy"],
                 value["resolvedAt"])
        tx.check_backs.extend(CheckBack.from_json(c) for c in value["checkBacks"])
        return tx


class TransactionFile:
    """The open transactions on disk, rewritten whole after each change: written aside, the previous
    version kept as ``.bak``, then renamed over, as the HTTP consumers' offset files are. A killed
    process leaves the old or the new file, never a torn one; the write is not fsync'd, so a power loss
    may take the latest change with it."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._backup = self.path.with_name(self.path.name + ".bak")

    def load(self) -> list[Transaction]:
        for path in (self.path, self._backup):
            try:
                data = path.read_bytes()
            except FileNotFoundError:
                continue
            try:
                return [Transaction.from_record(value) for value in orjson.loads(data)["transactions"]]
            except (orjson.JSONDecodeError, TypeError, KeyError, ValueError) as exc:
                log.warning("transaction file %s is unreadable (%s); trying its backup", path, exc)
        return []

    def save(self, transactions: list[Transaction]) -> None:
        data = orjson.dumps({"transactions": [tx.to_record() for tx in transactions]})
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists():
            os.replace(self.path, self._backup)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, prefix=f".{self.path.name}.")
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, self.path)


def check_back_body(tx: Transaction, msg: MessageExt, check_times: int) -> bytes:
    """The JSON a receiver gets (schema ``CheckBackRequest``), as the exact bytes that are signed."""
    text = is_text(msg.body)
    return orjson.dumps({
        "transactionId": tx.id, "msgId": tx.msg_id, "producerGroup": tx.producer_group, "topic": tx.topic,
        "tag": tx.tag, "keys": tx.keys, "properties": user_properties(msg.properties),
        "body": msg.body.decode() if text else base64.b64encode(msg.body).decode(),
        "bodyEncoding": "text" if text else "base64", "bornTimestamp": msg.born_timestamp,
        "checkTimes": check_times,
    })


class Transactions:
    """The gateway's transactions, and :meth:`check`, the transactional producers' checker. With a
    ``file``, each change of an open transaction is saved before it is answered or acted on."""

    def __init__(self, secret: str, timeout: float, file: TransactionFile | None = None):
        self.secret = secret.encode()
        self.timeout = timeout
        self.file = file
        self._records: OrderedDict[str, Transaction] = OrderedDict()
        self._http: httpx.AsyncClient | None = None
        #: the check-back call in flight of each transaction: a check arriving meanwhile (the broker checks
        #: again when an answer is slow, each time on a new copy of the half message) waits for its answer
        #: and takes it rather than calling the URL a second time, unless it was UNKNOWN
        self._calling: dict[str, asyncio.Future[CheckBack]] = {}

    def load(self) -> list[Transaction]:
        """Take back the open transactions of the file (call before the first :meth:`add`); those are returned."""
        if self.file is None:
            return []
        restored = self.file.load()
        for tx in restored:
            self._records[tx.id] = tx
        return restored

    def save(self) -> None:
        """Write the open transactions to the file (none: nothing to do)."""
        if self.file is not None:
            self.file.save([tx for tx in self._records.values() if tx.state is State.UNKNOWN])

    def add(self, tx: Transaction) -> None:
        self._records[tx.id] = tx
        while len(self._records) > TRANSACTIONS_KEPT:
            self._records.popitem(last=False)
        self.save()

    def get(self, tx_id: str) -> Transaction | None:
        return self._records.get(tx_id)

    def recent(self, n: int = 100) -> list[Transaction]:
        """The newest ``n`` transactions, newest first."""
        return list(itertools.islice(reversed(self._records.values()), n))

    async def close(self) -> None:
        if self._http is not None:
            http, self._http = self._http, None
            await http.aclose()

    async def check(self, msg: MessageExt) -> LocalTransactionState:
        """Answer the broker's check of a half message (the copy it stored for this check)."""
        tx_id = msg.properties.get(MessageConst.TRANSACTION_ID) or msg.uniq_key or ""
        check_times = int(msg.properties.get(MessageConst.TRANSACTION_CHECK_TIMES, "0") or 0)
        tx = self._records.get(tx_id)
        if tx is None:
            log.warning("transaction %s (check %d): not published through this gateway, or forgotten; "
                        "answered UNKNOWN", tx_id, check_times)
            return LocalTransactionState.UNKNOW
        tx.offset_msg_id, tx.queue_offset = msg.offset_msg_id, msg.queue_offset
        self.save()  # the copy END_TRANSACTION must name from now on
        record = None
        while record is None:
            if tx.state is not State.UNKNOWN:
                record = CheckBack(_now_ms(), check_times, None, None, tx.state, 0,
                                   f"resolved by the {tx.resolved_by} already; answered from the gateway's record")
            elif (in_flight := self._calling.get(tx.id)) is not None:
                called = await asyncio.shield(in_flight)
                if called.answer is not State.UNKNOWN:
                    record = CheckBack(_now_ms(), check_times, None, None, called.answer, 0,
                                       "answered with the check-back call that was in flight")
                # else: that call learnt nothing, so this check asks for itself rather than spend one of
                # the broker's transactionCheckMax checks unasked
            else:
                record = await self._call_once(tx, msg, check_times)
        tx.check_backs.append(record)
        self.save()
        log.info("transaction %s check %d: %s answered %s (HTTP %s, %d ms)%s", tx.id, check_times,
                 record.url or "the gateway's record", record.answer.name, record.status, record.latency_ms,
                 f": {record.detail}" if record.detail else "")
        return tx.state.value

    async def _call_once(self, tx: Transaction, msg: MessageExt, check_times: int) -> CheckBack:
        """Call the check-back URL, a check arriving meanwhile waiting for this call; apply its answer."""
        calling = self._calling[tx.id] = asyncio.get_running_loop().create_future()
        try:
            record = await self._call(tx, msg, check_times)
        except BaseException:
            calling.cancel()
            raise
        else:
            calling.set_result(record)
        finally:
            del self._calling[tx.id]
        if tx.state is State.UNKNOWN and record.answer is not State.UNKNOWN:
            tx.resolve(record.answer, "checkBack")
        elif tx.state is not record.answer and record.answer is not State.UNKNOWN:
            record.detail = f"the {tx.resolved_by} resolved it {tx.state.name} meanwhile; that stands"
        return record

    async def _call(self, tx: Transaction, msg: MessageExt, check_times: int) -> CheckBack:
        """POST the signed check-back; whatever goes wrong is an UNKNOWN answer with its reason."""
        body = check_back_body(tx, msg, check_times)
        timestamp = str(int(time.time()))
        headers = {"Content-Type": "application/json", TIMESTAMP_HEADER: timestamp,
                   SIGNATURE_HEADER: sign(self.secret, timestamp, body)}
        if self._http is None:
            self._http = httpx.AsyncClient(follow_redirects=False)
        started, status, answer, detail = time.monotonic(), None, State.UNKNOWN, None
        try:
            async with asyncio.timeout(self.timeout):
                response = await self._http.post(tx.check_back_url, content=body, headers=headers,
                                                 timeout=self.timeout)
                content = await response.aread()
            status = response.status_code
            answer, detail = _answer(status, content)
        except TimeoutError:
            detail = f"no answer within {self.timeout:g} s (httpCheckBackTimeout)"
        except httpx.HTTPError as exc:
            detail = f"the call failed: {type(exc).__name__}: {exc}"
        latency = int((time.monotonic() - started) * 1000)
        return CheckBack(_now_ms(), check_times, tx.check_back_url, status, answer, latency, detail)


def _answer(status: int, content: bytes) -> tuple[State, str | None]:
    if status != 200:
        return State.UNKNOWN, f"HTTP {status}, not 200"
    try:
        value = orjson.loads(content)
        return State[value["state"]], None
    except (orjson.JSONDecodeError, TypeError, KeyError):
        return State.UNKNOWN, 'the answer is not {"state": "COMMIT"|"ROLLBACK"|"UNKNOWN"}: ' + repr(content[:200])
