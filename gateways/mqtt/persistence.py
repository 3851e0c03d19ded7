"""MQTT state that outlives the process: persistent sessions and retained messages, as files in the store.

Where, and why there: one file per session (``sessions/``) and per retained message (``retained/``)
under ``{storePathRootDir}/mqtt``, each replaced atomically (written aside, then renamed), and fsync'd
when the broker flushes synchronously (``flushDiskType=SYNC_FLUSH``). The alternative, a system topic
in the commit log replayed at start-up, would need compaction by key, which the store does not do, and
would lose a quiet session's state when retention deletes the segment that holds its last record; files
are read at start-up in one pass and keep what no message refers to any more. Like the broker's other
state files (``config/consumerOffset.json``, ``topics.json``), they sit in the store directory, which is
what a slave copies from its master besides the commit log. The messages themselves stay in the commit
log: a session file holds only the PUBLISHes handed to its session and not yet acknowledged, and the
gateway's consumer offsets (``offsets/``) are the position of what was not yet handed to any session.

A file's name is the SHA-256 of its key (client identifiers and topics may hold any character); the
key is inside. The codec is JSON (one object, ``"v": 1``), its messages the MQTT 5 encoding of their
PUBLISH, base64, and a pending delayed will the MQTT 5 CONNECT that carries it, base64, beside its due
time: the layouts the gateway already specifies and tests, with every property kept.

What a file holds is written shortly after it changes (changes are gathered and written together, off
the reactor thread, one batch at a time): an orderly stop writes everything, and a crash loses at most
the latest changes of a session, never a message the broker acknowledged (that is in the commit log).
With SYNC_FLUSH the listener also holds a persistent session's outgoing packets (PUBREC, SUBACK...)
until :meth:`StateFiles.written` says the change they answer is on disk, as the broker answers a send.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
from collections.abc import Callable, Mapping
from pathlib import Path

from ferrymq.sdk.message import Message
from ferrymq.server.event_loop import call_soon
from twisted.internet import defer, threads

from .packet import MQTT_5
from .packets import Connect, Publish, Subscription, Will, decode_packet, encode
from .session import NEVER_EXPIRES, InFlight, Outgoing, Session

log = logging.getLogger("ferrymq.gateway.mqtt")

#: the version of the files' layout
VERSION = 1


class StateError(ValueError):
    """A state file that does not hold what this codec writes."""


# ---------------------------------------------------------------------------------------------- codec

def encode_session(session: Session) -> bytes:
    """What of ``session`` survives a restart (not its connection, nor deliveries RocketMQ hands out
    again: those with a token, from a shared subscription, whose consume did not complete)."""
    return json.dumps({
        "v": VERSION,
        "clientId": session.client_id,
        "expiryInterval": session.expiry_interval,
        "expiresAt": session.expires_at,
        "subscriptions": [_encode_subscription(sub, session.subscription_ids.get(f), session.subscribed_at.get(f, 0.0))
                          for f, sub in session.subscriptions.items()],
        "receivedQos2": sorted(session.received_qos2),
        "inFlight": [{"released": flight.state is Outgoing.RELEASED, "publish": _encode_publish(flight.publish)}
                     for flight in session.in_flight.values() if flight.token is None],
        "queued": [_encode_publish(publish) for publish, token in session.queued if token is None],
        "will": None if session.pending_will is None else _encode_will(*session.pending_will),
        "served": [[topic, queue_id, offset] for (topic, queue_id), offset in session.served.items()],
    }, separators=(",", ":")).encode()


def decode_session(data: bytes) -> Session:
    doc = _document(data)
    try:
        session = Session(doc["clientId"], expiry_interval=int(doc["expiryInterval"]),
                          expires_at=None if doc["expiresAt"] is None else float(doc["expiresAt"]))
        for entry in doc["subscriptions"]:
            sub = Subscription(entry["filter"], int(entry["qos"]), bool(entry["noLocal"]),
                               bool(entry["retainAsPublished"]), int(entry["retainHandling"]))
            session.subscriptions[sub.topic_filter] = sub
            session.subscribed_at[sub.topic_filter] = float(entry["since"])
            if entry.get("id") is not None:
                session.subscription_ids[sub.topic_filter] = int(entry["id"])
        session.received_qos2.update(int(pid) for pid in doc["receivedQos2"])
        for entry in doc["inFlight"]:
            publish = _decode_publish(entry["publish"])
            state = Outgoing.RELEASED if entry["released"] else Outgoing.PUBLISHED
            session.in_flight[publish.packet_identifier] = InFlight(publish, None, state)
        session.queued.extend((_decode_publish(text), None) for text in doc["queued"])
        if doc.get("will") is not None:
            session.pending_will = _decode_will(doc["will"])
        session.served.update(((str(topic), int(queue_id)), int(offset)) for topic, queue_id, offset in doc.get("served", ()))
    except (KeyError, TypeError, ValueError) as exc:
        raise StateError(f"not a session: {exc!r}") from None
    if session.in_flight:
        session._next_id = max(session.in_flight)
    return session


def encode_retained(message: Message) -> bytes:
    return json.dumps({"v": VERSION, "topic": message.topic, "properties": message.properties,
                       "body": base64.b64encode(message.body).decode()}, separators=(",", ":")).encode()


def decode_retained(data: bytes) -> Message:
    doc = _document(data)
    try:
        properties = {str(k): str(v) for k, v in doc["properties"].items()}
        return Message(str(doc["topic"]), base64.b64decode(doc["body"], validate=True), properties=properties)
    except (KeyError, TypeError, AttributeError, ValueError) as exc:
        raise StateError(f"not a retained message: {exc!r}") from None


def _encode_subscription(sub: Subscription, identifier: int | None, since: float) -> dict:
    return {"filter": sub.topic_filter, "qos": sub.qos, "noLocal": sub.no_local,
            "retainAsPublished": sub.retain_as_published, "retainHandling": sub.retain_handling,
            "id": identifier, "since": since}


def _encode_publish(publish: Publish) -> str:
    return base64.b64encode(encode(publish, MQTT_5)).decode()


def _decode_publish(text: str) -> Publish:
    packet = decode_packet(base64.b64decode(text, validate=True), MQTT_5)
    if not isinstance(packet, Publish):
        raise StateError(f"{type(packet).__name__} where a PUBLISH was expected")
    return packet


def _encode_will(will: Will, due: float) -> dict:
    connect = Connect("", MQTT_5, will=will)
    return {"due": due, "connect": base64.b64encode(encode(connect, MQTT_5)).decode()}


def _decode_will(entry: dict) -> tuple[Will, float]:
    packet = decode_packet(base64.b64decode(entry["connect"], validate=True), MQTT_5)
    if not isinstance(packet, Connect) or packet.will is None:
        raise StateError("no will where a CONNECT with a will was expected")
    return packet.will, float(entry["due"])


def _document(data: bytes) -> dict:
    try:
        doc = json.loads(data)
    except ValueError as exc:
        raise StateError(f"not JSON: {exc}") from None
    if not isinstance(doc, dict) or doc.get("v") != VERSION:
        raise StateError(f"not a version {VERSION} state file")
    return doc


# ---------------------------------------------------------------------------------------------- files

def file_name(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest() + ".json"


class StateFiles:
    """The files of one gateway's sessions and retained messages under ``directory``.

    ``changed`` and ``retained_changed`` note a key; the batch written next looks the key up in
    ``sessions`` / ``retained`` then (a session that is not persistent any more, or gone, and a
    retained message cleared, have their file removed).
    """

    def __init__(self, directory: Path | str, *, sync: bool = False, reactor=None):
        self.reactor = reactor  # the running one when None, looked up once needed (after it is installed)
        self.directory = Path(directory)
        self.sync = sync
        self.sessions_dir = self.directory / "sessions"
        self.retained_dir = self.directory / "retained"
        self.offsets_dir = self.directory / "offsets"
        self._sessions: Mapping[str, Session] = {}
        self._retained: Callable[[str], Message | None] = lambda topic_name: None
        self._dirty_sessions: set[str] = set()
        self._dirty_retained: set[str] = set()
        self._writing: defer.Deferred | None = None
        self._scheduled = None
        #: changes noted so far, and how many of them are written: :meth:`written` compares the two
        self._noted = 0
        self._done = 0
        self._waiting: list[tuple[int, defer.Deferred]] = []

    # ------------------------------------------------------------------ start-up

    def load(self, now: float) -> tuple[dict[str, Session], list[Message]]:
        """The sessions still alive at ``now`` and the retained messages; files of expired sessions are
        removed. A session that was attached when the process ended starts its expiry now. A session
        that ended while the process was down but still owes its delayed will is kept: the first expiry
        sweep (or its client's CONNECT) ends it and publishes the will, as when it ends while running."""
        for d in (self.sessions_dir, self.retained_dir):
            d.mkdir(parents=True, exist_ok=True)
        sessions: dict[str, Session] = {}
        for path in sorted(self.sessions_dir.glob("*.json")):
            session = self._read(path, decode_session)
            if session is None:
                continue
            if session.expires_at is None and session.expiry_interval != NEVER_EXPIRES:
                session.expires_at = now + session.expiry_interval
            if session.expires_at is not None and session.expires_at <= now and session.pending_will is None:
                path.unlink(missing_ok=True)
                continue
            sessions[session.client_id] = session
        retained = [m for m in (self._read(p, decode_retained) for p in sorted(self.retained_dir.glob("*.json")))
                    if m is not None]
        return sessions, retained

    @staticmethod
    def _read(path: Path, decode):
        try:
            return decode(path.read_bytes())
        except (OSError, StateError) as exc:
            log.error("MQTT state file %s is unreadable and left aside: %s", path, exc)
            return None

    def watch(self, sessions: Mapping[str, Session], retained: Callable[[str], Message | None]) -> None:
        """Where batches find the current state of a noted key."""
        self._sessions = sessions
        self._retained = retained

    # ------------------------------------------------------------------ changes

    def changed(self, client_id: str) -> None:
        self._dirty_sessions.add(client_id)
        self._noted += 1
        self._schedule()

    def retained_changed(self, topic_name: str) -> None:
        self._dirty_retained.add(topic_name)
        self._noted += 1
        self._schedule()

    def written(self) -> defer.Deferred:
        """Fires once every change noted so far is written (fsync'd with ``sync``), or failed to be
        (logged: the server goes on rather than stall its devices)."""
        if self._done >= self._noted:
            return defer.succeed(None)
        waiter = defer.Deferred()
        self._waiting.append((self._noted, waiter))
        return waiter

    def _schedule(self) -> None:
        if self._scheduled is None and self._writing is None:
            if self.reactor is None:
                from twisted.internet import reactor
                self.reactor = reactor
            self._scheduled = call_soon(self.reactor, self._write_next)

    def _batch(self) -> list[tuple[Path, bytes | None]]:
        """What to write now: each noted key's file and its bytes (``None``: remove it)."""
        batch: list[tuple[Path, bytes | None]] = []
        for client_id in self._dirty_sessions:
            session = self._sessions.get(client_id)
            data = encode_session(session) if session is not None and session.expiry_interval else None
            batch.append((self.sessions_dir / file_name(client_id), data))
        for topic_name in self._dirty_retained:
            message = self._retained(topic_name)
            data = None if message is None else encode_retained(message)
            batch.append((self.retained_dir / file_name(topic_name), data))
        self._dirty_sessions.clear()
        self._dirty_retained.clear()
        return batch

    def _write_next(self) -> defer.Deferred | None:
        """Write what is noted, one batch at a time (a file is never written by two threads at once)."""
        self._scheduled = None
        covers = self._noted
        batch = self._batch()
        if not batch:
            return None
        self._writing = writing = threads.deferToThread(write_files, batch, self.sync)
        writing.addErrback(lambda f: log.error("MQTT state not written: %s", f.getErrorMessage()))
        writing.addBoth(self._written, covers)
        return writing

    def _written(self, _result, covers: int) -> None:
        self._writing = None
        self._done = covers
        due = [waiter for noted, waiter in self._waiting if noted <= covers]
        self._waiting = [(noted, waiter) for noted, waiter in self._waiting if noted > covers]
        for waiter in due:
            waiter.callback(None)
        if self._dirty_sessions or self._dirty_retained:
            self._schedule()

    @defer.inlineCallbacks
    def flush(self):
        """Write every noted change; fires once written (an orderly stop waits for it)."""
        if self._scheduled is not None:  # pending: a write that started set it to None
            self._scheduled.cancel()
        self._scheduled = None
        while self._writing is not None:
            yield self._writing
        writing = self._write_next()
        if writing is not None:
            yield writing


def write_files(batch: list[tuple[Path, bytes | None]], sync: bool) -> None:
    """Replace (or remove, for ``None``) each file atomically: written aside, then renamed over it."""
    directories = set()
    for path, data in batch:
        directories.add(path.parent)
        if data is None:
            path.unlink(missing_ok=True)
            continue
        aside = path.with_suffix(".tmp")
        with open(aside, "wb") as f:
            f.write(data)
            if sync:
                f.flush()
                os.fsync(f.fileno())
        os.replace(aside, path)
    if sync:
        for directory in directories:
            fd = os.open(directory, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


__all__ = ["VERSION", "StateError", "StateFiles", "decode_retained", "decode_session", "encode_retained",
           "encode_session", "file_name", "write_files"]
