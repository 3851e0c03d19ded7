"""The MQTT listener: Twisted protocols that feed :class:`~.session.ServerConnection` and carry out its actions.

Everything runs in the reactor thread, the broker's own inside a FerryMQ server: the RocketMQ client is
the Deferred SDK, so a device's message reaches the broker without a thread hop.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from twisted.internet import defer, task
from twisted.internet.protocol import Factory, Protocol

from ferrymq.remoting.twisted_io import prompt_writer

from .deadlines import Deadlines
from .gateway import Gateway, settle
from .packets import PingResp, encode
from .reason_codes import ReasonCode
from .session import (
    Ack,
    ChangeSubscriptions,
    Close,
    Connected,
    Forward,
    Release,
    Send,
    ServerConnection,
    Session,
    SessionEnded,
    expire,
)

log = logging.getLogger("ferrymq.gateway.mqtt")

#: the largest packet a device may send: a RocketMQ message's default maximum body and its headers
MAXIMUM_PACKET_SIZE = (4 << 20) + 64 * 1024
#: seconds between sweeps for detached sessions whose expiry interval has passed
EXPIRY_SWEEP_SECONDS = 1.0
#: the answer to a PINGREQ, the one exchange that changes nothing a session persists
_PONG = Send(PingResp())


class MQTTProtocol(Protocol):
    """One device's connection."""

    def __init__(self, factory: MQTTFactory):
        self.factory = factory
        self.gateway = factory.gateway
        self.conn: ServerConnection | None = None
        #: bytes to write (``None``: close) held until a persistent session's change is on disk, when the
        #: broker flushes synchronously; ``None`` while nothing is held
        self._held: list[bytes | None] | None = None
        self._held_for: defer.Deferred | None = None
        #: how bytes go out: a socket send when nothing is queued before them (:func:`~ferrymq.remoting.twisted_io.writer`)
        self._send: Callable[[bytes], None] | None = None
        #: while corked (:meth:`cork`), the packets written, sent together by :meth:`uncork`
        self._corked: list[bytes] | None = None
        #: the device's QoS 1 and 2 PUBLISHes not acknowledged yet, in the order they came, each with the
        #: arguments of its acknowledgement once its store answered (``None`` until then): MQTT 4.6 has
        #: them acknowledged in that order, also when a later one is stored first (the first message of
        #: a topic waits for its route)
        self._unacked: deque[list] = deque()

    def connectionMade(self) -> None:
        # a turn's packets go out as one write (cork): without TCP_NODELAY the next turn's would wait for
        # the peer's ACK, which a QoS 0 subscriber sends only after its delayed-ACK time
        self._send = prompt_writer(self.transport)
        self.conn = ServerConnection(self.gateway.sessions, time.time(), maximum_packet_size=MAXIMUM_PACKET_SIZE,
                                     access=self.gateway.access, peer_ip=getattr(self.transport.getPeer(), "host", ""))
        self.factory.protocols[self.conn] = self
        self._arm()

    def dataReceived(self, data: bytes) -> None:
        # the answers to what one read brought (a PUBACK each, with a store that answers at once) go out
        # as one write; what it stored reaches the subscribers in this turn too
        corked = self.cork()
        held = self.gateway.hold_deliveries() if corked else None
        try:
            self.run(self.conn.receive_data(data, time.time()))
        finally:
            try:
                if held is not None:
                    held.flush()
            finally:
                if corked:
                    self.uncork()

    def cork(self) -> bool:
        """Gather the packets written from now on until :meth:`uncork`, which sends them as one write (one
        system call instead of one a packet); ``False`` if they are gathered already (the one who corked
        uncorks)."""
        if self._corked is not None:
            return False
        self._corked = []
        return True

    def uncork(self) -> None:
        self._flush()
        self._corked = None

    def _flush(self) -> None:
        out = self._corked
        if out:
            self._corked = []
            self._send(out[0] if len(out) == 1 else b"".join(out))

    def connectionLost(self, reason=None) -> None:
        self.factory.deadlines.forget(self)
        self.run(self.conn.connection_lost(time.time()))
        self.factory.protocols.pop(self.conn, None)
        session = self.conn.session
        if session is not None and session.owner is None:
            self.factory.detached[session.client_id] = session

    def _arm(self) -> None:
        """File the connection's deadline with the factory's :class:`~.deadlines.Deadlines`; when it comes
        due early (packets arrived since), :meth:`expired` files the later one rather than each packet."""
        deadline = self.conn.deadline
        if deadline is not None:
            self.factory.deadlines.file(self, deadline)

    def expired(self) -> None:
        self.run(self.conn.tick(time.time()))
        self._arm()

    def run(self, actions: list) -> None:
        session = self.conn.session
        if session is not None and session.expiry_interval and actions != [_PONG]:
            self.gateway.session_changed(session)
            state = self.gateway.state
            if state is not None and state.sync:
                self._hold(state.written())
        stored: list = []  # the outcomes of the Forwards that follow, stored with the one before them
        for at, action in enumerate(actions):
            if isinstance(action, Send):
                self._write(encode(action.packet, self.conn.version))
            elif isinstance(action, Close):
                self._write(None)
            elif isinstance(action, Forward):
                if not stored:
                    stored = self._store_run(actions, at)
                self._forward(action, stored.pop())
            elif isinstance(action, ChangeSubscriptions):
                self.gateway.subscriptions_changed(action.session)
                self._write(encode(action.reply, self.conn.version))
                for topic_filter in action.retained:
                    for delivery in self.gateway.retained_deliveries(topic_filter):
                        self.run(self.conn.deliver(delivery, None, retained_for=topic_filter))
            elif isinstance(action, Connected):
                self.gateway.session_changed(action.session)  # resumed without expiry: its file goes
                if action.taken_over is not None:
                    other = self.factory.protocols.get(action.taken_over)
                    if other is not None:
                        other.run(action.taken_over.take_over(time.time()))
                self._arm()  # the keep-alive's deadline, if it comes before the CONNECT timeout's
            elif isinstance(action, SessionEnded):
                self.gateway.session_changed(action.session)
                self.gateway.subscriptions_changed(action.session)
            elif isinstance(action, (Ack, Release)):
                settle([action])

    def _write(self, data: bytes | None) -> None:
        """Write ``data`` (``None``: close once written), after what is held, if anything is."""
        if self._held is not None:
            self._held.append(data)
        elif data is None:
            self._flush()
            self.transport.loseConnection()
        elif self._corked is not None:
            self._corked.append(data)
        else:
            self._send(data)

    def _hold(self, written: defer.Deferred) -> None:
        """Hold what this connection writes until ``written`` fires (the session's change is on disk,
        as SYNC_FLUSH promises before an acknowledgement); a later change holds it longer."""
        if written.called and self._held is None:
            return
        if self._held is None:
            self._held = []
        self._held_for = written
        written.addCallback(self._release, written)

    def _release(self, _result, written: defer.Deferred) -> None:
        if written is self._held_for:
            held, self._held, self._held_for = self._held, None, None
            for data in held:
                self._write(data)

    def _store_run(self, actions: list, at: int) -> list:
        """Store the messages of the Forwards in a row from ``actions[at]`` (a read's PUBLISHes) together;
        their outcomes, the last first."""
        end = at + 1
        while end < len(actions) and isinstance(actions[end], Forward):
            end += 1
        if end - at == 1:
            return [self.gateway.publish(actions[at].message)]
        return self.gateway.publish_many([action.message for action in actions[at:end]])[::-1]

    def _forward(self, action: Forward, d: Any) -> None:
        """Answer ``action`` once ``d``, the gateway's outcome of storing its message, says it is stored."""
        pid = action.packet_identifier
        if pid is None:
            if isinstance(d, defer.Deferred):
                d.addErrback(lambda f: log.warning("MQTT message to %s not stored: %s", action.message.topic,
                                                   f.getErrorMessage()))
            return
        if not isinstance(d, defer.Deferred) and not self._unacked:  # stored already, nothing before it
            self.run(self.conn.stored(pid))
            return
        slot: list = [None]
        self._unacked.append(slot)
        if not isinstance(d, defer.Deferred):
            slot[0] = (pid,)
            return  # acknowledged after those before it

        def answered(_result):
            slot[0] = (pid,)
            self._acknowledge()

        def failed(failure):
            log.info("MQTT message to %s not stored: %s", action.message.topic, failure.getErrorMessage())
            slot[0] = (pid, ReasonCode.UNSPECIFIED_ERROR, failure.getErrorMessage())
            self._acknowledge()

        d.addCallbacks(answered, failed)

    def _acknowledge(self) -> None:
        """Acknowledge the stored PUBLISHes at the head of :attr:`_unacked`, up to the first still storing."""
        unacked = self._unacked
        while unacked and unacked[0][0] is not None:
            self.run(self.conn.stored(*unacked.popleft()[0]))


class MQTTFactory(Factory):
    def __init__(self, gateway: Gateway, reactor=None):
        if reactor is None:
            from twisted.internet import reactor
        self.reactor = reactor
        self.gateway = gateway
        self.protocols: dict[ServerConnection, MQTTProtocol] = {}
        self.deadlines = Deadlines(reactor, MQTTProtocol.expired)
        #: the sessions a connection left detached, by client identifier: the only ones that can expire or
        #: owe a delayed will (a session of a live connection cannot), so the sweep looks at them alone
        self.detached: dict[str, Session] = {}
        #: the connections the gateway's deliveries corked, until it says they are all handed over
        self._corked: list[MQTTProtocol] = []
        gateway.run_actions = self._run_for
        gateway.deliveries_done = self._uncork

    def buildProtocol(self, addr) -> MQTTProtocol:
        return MQTTProtocol(self)

    def _run_for(self, session: Session, actions: list) -> None:
        """Run a delivery's actions on the connection of ``session``, whose packets are gathered until the
        gateway's batch of deliveries is over (:meth:`_uncork`): a subscriber gets them in one write."""
        protocol = self.protocols.get(session.owner)
        if protocol is None:
            settle(actions)
        else:
            if protocol.cork():
                self._corked.append(protocol)
            protocol.run(actions)

    def _uncork(self) -> None:
        corked, self._corked = self._corked, []
        for protocol in corked:
            protocol.uncork()


class MQTTListener:
    """The gateway served on ``host:port`` of the running reactor (``stop()`` for :class:`_StopInOrder`).

    :meth:`listen` binds at once, before the reactor runs, so a taken port stops the server from starting
    as a taken listenPort does; the RocketMQ client starts once the reactor runs (:meth:`start_client`).
    """

    def __init__(self, gateway: Gateway, host: str, port: int, reactor=None):
        if reactor is None:
            from twisted.internet import reactor
        self.reactor = reactor
        self.gateway = gateway
        self.host = host
        self.port = port
        #: the port of MQTT over TLS, once :meth:`listen_tls` bound it
        self.tls_port: int | None = None
        self.factory = MQTTFactory(gateway, reactor)
        self._listening = None
        self._tls_listening = None
        self._sweep = task.LoopingCall(self._expire_sessions)
        self._sweep.clock = self.reactor
        #: whether a sweep took in the sessions detached before any connection (restored from the store)
        self._seeded = False

    def listen(self) -> None:
        """Bind now (``CannotListenError`` if the port is taken)."""
        self.gateway.restore()
        self._listening = self.reactor.listenTCP(self.port, self.factory, interface=self.host)
        self.port = self._listening.getHost().port

    def listen_tls(self, port: int, tls) -> None:
        """Serve MQTT over TLS on ``port`` too (``mqttTlsListenPort``; 0: any free port), with ``tls``, a
        :class:`~ferrymq.remoting.tls.ServerTls`. Binds now, as :meth:`listen`."""
        from twisted.protocols.tls import TLSMemoryBIOFactory

        over_tls = TLSMemoryBIOFactory(tls, False, self.factory, self.reactor)
        self._tls_listening = self.reactor.listenTCP(port, over_tls, interface=self.host)
        self.tls_port = self._tls_listening.getHost().port

    @defer.inlineCallbacks
    def start_client(self):
        try:
            yield self.gateway.start()
        except Exception as exc:  # noqa: BLE001 - devices are refused until it works
            log.error("the MQTT gateway's RocketMQ client did not start: %s", exc)
            return
        self._sweep.start(EXPIRY_SWEEP_SECONDS, now=False)
        log.info("MQTT gateway listening on %s:%d (docs/mqtt.md)", self.host, self.port)
        if self.tls_port is not None:
            log.info("MQTT gateway listening on %s:%d over TLS (docs/tls.md)", self.host, self.tls_port)

    def _expire_sessions(self) -> None:
        """Sessions that expired, and delayed wills that are due (no connection is left to run them)."""
        sessions, detached = self.gateway.sessions, self.factory.detached
        if not self._seeded:
            self._seeded = True
            detached.update((s.client_id, s) for s in sessions.values() if s.owner is None)
        for client_id, session in list(detached.items()):
            if (session.owner is not None or sessions.get(client_id) is not session
                    or (session.expires_at is None and session.pending_will is None)):
                del detached[client_id]  # back, ended, or waiting for its device alone
        owing = [s for s in detached.values() if s.pending_will is not None]
        actions = expire(sessions, time.time(), detached.values())
        for action in actions:
            if isinstance(action, Forward):
                self.gateway.send(action.message).addErrback(
                    lambda f, topic=action.message.topic: log.warning("MQTT will to %s not stored: %s", topic,
                                                                      f.getErrorMessage()))
        settle(actions)
        ended = [action.session for action in actions if isinstance(action, SessionEnded)]
        # a published will leaves its session's file, or a restart would publish it again
        for session in {*ended, *(s for s in owing if s.pending_will is None)}:
            self.gateway.session_changed(session)
        if ended:
            self.gateway.subscriptions_changed(*ended)

    @defer.inlineCallbacks
    def stop(self):
        if self._sweep.running:
            self._sweep.stop()
        self.factory.deadlines.stop()
        for listening in (self._listening, self._tls_listening):
            if listening is not None:
                yield listening.stopListening()
        self.gateway.closing()
        for protocol in list(self.factory.protocols.values()):
            protocol.run(protocol.conn.shut_down(time.time()))  # their wills are stored before the gateway stops
        yield self.gateway.stop()


__all__ = ["MAXIMUM_PACKET_SIZE", "MQTTProtocol", "MQTTFactory", "MQTTListener"]
