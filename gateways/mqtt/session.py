"""The server side of one MQTT connection and the session it carries, sans I/O (h11 style).

:class:`ServerConnection` takes bytes (:meth:`~ServerConnection.receive_data`), the passing of time
(:meth:`~ServerConnection.tick`), the end of the network connection (:meth:`~ServerConnection.connection_lost`),
the outcome of storing a device's message (:meth:`~ServerConnection.stored`) and messages to deliver
(:meth:`~ServerConnection.deliver`), and answers with :data:`Action` lists: packets to send, the
connection to close, messages to store in RocketMQ, subscriptions to change, deliveries settled. The
caller does the I/O and calls back; nothing here knows sockets, reactors or RocketMQ clients.

A :class:`Session` (spec 4.1: subscriptions, QoS 1/2 messages in flight both ways, messages waiting for
the client) outlives its connection when the client asks (3.1.1 Clean Session 0, MQTT 5 Session Expiry
Interval above 0). Sessions live in a :data:`Sessions` mapping the caller owns and shares between its
connections, which is how a reconnecting client finds its session (session present) and QoS 2 stays
exactly once across reconnects: the packet identifiers of QoS 2 messages already stored are remembered
until their PUBREL.

Each delivery carries an opaque ``token`` of the caller's (a RocketMQ consume to complete); it comes
back in :class:`Ack` once the delivery is over (acknowledged by the client, or nothing to deliver) and in
:class:`Release` when the session ends with it unfinished.
"""

from __future__ import annotations

import dataclasses
import math
import secrets
from collections import deque
from collections.abc import Iterable, MutableMapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from ferrymq.sdk.message import Message

from ..access import PUB, SUB, Access
from ..access import topic as topic_resource
from . import mapping, topics
from .connection import Decoder, ProtocolViolation
from .packet import MQTT_3_1_1, MQTT_5, Packet
from .packets import (
    ConnAck,
    Connect,
    Disconnect,
    PingReq,
    PingResp,
    PubAck,
    PubComp,
    Publish,
    PubRec,
    PubRel,
    SubAck,
    Subscribe,
    Subscription,
    UnsubAck,
    Unsubscribe,
    Will,
    encode,
)
from .properties import NO_PROPERTIES, Properties
from .reason_codes import ReasonCode, connect_return_code

#: the Receive Maximum the server announces: QoS 1/2 PUBLISHes a client may have unacknowledged
RECEIVE_MAXIMUM = 64
#: the Topic Alias Maximum the server announces
TOPIC_ALIAS_MAXIMUM = 64
#: messages a detached or window-full session holds for its client before refusing more (Release)
QUEUE_LIMIT = 1000
#: seconds a new connection has to send its CONNECT
CONNECT_TIMEOUT = 10.0
#: MQTT 5 Session Expiry Interval meaning "never" (3.1.1 Clean Session 0 sessions are kept this long)
NEVER_EXPIRES = 0xFFFFFFFF
#: the 3.1.1 SUBACK failure return code (MQTT 5 says why with a reason code)
_SUBACK_FAILURE_3_1_1 = 0x80


# ---------------------------------------------------------------------------------------------- actions

@dataclass(frozen=True, slots=True)
class Send:
    """Write ``packet``, encoded for the connection's protocol level."""

    packet: Packet


@dataclass(frozen=True, slots=True)
class Close:
    """Close the network connection once what was sent before it is written."""


@dataclass(frozen=True, slots=True)
class Forward:
    """Store ``message`` in RocketMQ; for QoS 1 and 2 call :meth:`ServerConnection.stored` with
    ``packet_identifier`` when the broker answers. A will message has no identifier and no answer."""

    message: Message
    qos: int
    packet_identifier: int | None = None


@dataclass(frozen=True, slots=True)
class ChangeSubscriptions:
    """Make RocketMQ deliver what ``session``'s subscriptions now match (``added`` filters are new or
    changed, ``removed`` ones gone), then send ``reply`` (SUBACK, UNSUBACK): answering only once the
    consumers are in place means a message published after the reply reaches the subscriber. Then
    deliver the retained messages matching the ``retained`` filters (:func:`deliver` ``retained_for``),
    which follow the SUBACK (spec 3.3.1.3)."""

    session: Session
    added: tuple[str, ...]
    removed: tuple[str, ...]
    reply: Packet
    retained: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Ack:
    """The delivery of ``token`` is over: acknowledged by the client, sent at QoS 0, or matching nothing."""

    token: Any


@dataclass(frozen=True, slots=True)
class Release:
    """Deliveries not finished and now never will be here (their session ended, or it holds too many):
    the caller hands them back (another member of a shared group, or a later delivery)."""

    tokens: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Connected:
    """CONNECT accepted. ``taken_over`` is the connection that had the session's client identifier
    and must be ended with :meth:`ServerConnection.take_over` (spec 3.1.4-3)."""

    session: Session
    session_present: bool
    taken_over: ServerConnection | None = None


@dataclass(frozen=True, slots=True)
class SessionEnded:
    """``session`` is over (its connection closed and it does not outlive it, or a clean start replaced
    it): stop delivering its subscriptions."""

    session: Session


Action = Send | Close | Forward | ChangeSubscriptions | Ack | Release | Connected | SessionEnded


# ---------------------------------------------------------------------------------------------- session

class Outgoing(Enum):
    """Where a QoS 1/2 message to the client is: PUBLISH sent (awaiting PUBACK/PUBREC), or PUBREL sent."""

    PUBLISHED = 1
    RELEASED = 2


@dataclass(slots=True)
class InFlight:
    publish: Publish
    token: Any
    state: Outgoing = Outgoing.PUBLISHED


@dataclass(eq=False)
class Session:
    """The MQTT session of one client identifier (spec 4.1)."""

    client_id: str
    #: by topic filter as subscribed (``$share/...`` included)
    subscriptions: dict[str, Subscription] = field(default_factory=dict)
    #: MQTT 5 Subscription Identifier of a filter, if it has one
    subscription_ids: dict[str, int] = field(default_factory=dict)
    #: when each filter was subscribed (wall-clock seconds): it matches only messages stored since
    subscribed_at: dict[str, float] = field(default_factory=dict)
    #: QoS 1/2 messages sent to the client and not yet acknowledged, by packet identifier
    in_flight: dict[int, InFlight] = field(default_factory=dict)
    #: messages waiting for a connection or a free slot in the client's Receive Maximum
    queued: deque[tuple[Publish, Any]] = field(default_factory=deque)
    #: QoS 2 messages from the client stored in RocketMQ and not yet released (PUBREL): exactly once
    received_qos2: set[int] = field(default_factory=set)
    expiry_interval: int = 0
    #: the connection the session is attached to, if any
    owner: ServerConnection | None = None
    #: when a detached session ends (its Session Expiry Interval after its connection closed); ``None``
    #: while attached or when it never expires
    expires_at: float | None = None
    #: for each queue (RocketMQ topic, queue id) of the broker whose store the gateway reads, the commit-log
    #: offset of the latest message handed to the session: read again after a crash, it is not given again
    served: dict[tuple[str, int], int] = field(default_factory=dict)
    #: an MQTT 5 will waiting for its Will Delay Interval (due time), dropped if the client comes back first
    pending_will: tuple[Will, float] | None = None
    _next_id: int = 0

    def matching(self, delivery: mapping.Delivery, share: str | None = None, stored_at: float | None = None) -> list[str]:
        """The filters ``delivery`` is for: ``share`` alone (the one shared subscription whose group got
        it), or every non-shared filter that matches its topic, except those subscribed after the message
        was stored (``stored_at``, wall-clock seconds, when known) and No Local ones of its own publisher."""
        if share is not None:
            return [share] if share in self.subscriptions else []
        own = delivery.publisher == self.client_id
        return [f for f, sub in self.subscriptions.items()
                if not f.startswith(topics.SHARE_PREFIX) and topics.matches(f, delivery.topic_name)
                and not (own and sub.no_local)
                and (stored_at is None or self.subscribed_at.get(f, 0.0) <= stored_at)]

    def next_packet_identifier(self) -> int:
        for _ in range(0xFFFF):
            self._next_id = self._next_id % 0xFFFF + 1
            if self._next_id not in self.in_flight:
                return self._next_id
        raise RuntimeError("all 65535 packet identifiers are in flight")

    def tokens(self) -> tuple[Any, ...]:
        return tuple(f.token for f in self.in_flight.values()) + tuple(token for _, token in self.queued)


def to_store_time(now: float) -> float:
    """``now`` (seconds) cut to the millisecond, the resolution of a message's store time: a message stored
    in the millisecond of a SUBSCRIBE is then not taken for one stored before it."""
    return math.floor(now * 1000) / 1000


#: client identifier -> session, owned by the caller and shared by its connections
Sessions = MutableMapping[str, Session]


# ---------------------------------------------------------------------------------------------- connection

class State(Enum):
    AWAITING_CONNECT = 1
    CONNECTED = 2
    CLOSED = 3


class ServerConnection:
    """One client's network connection, from its CONNECT to its close."""

    def __init__(self, sessions: Sessions, now: float, *, maximum_packet_size: int = 1 << 20,
                 receive_maximum: int = RECEIVE_MAXIMUM, topic_alias_maximum: int = TOPIC_ALIAS_MAXIMUM,
                 access: Access | None = None, peer_ip: str = ""):
        """``access``: the broker's users and ACLs, checked at CONNECT, PUBLISH and SUBSCRIBE (None: no
        checks); ``peer_ip`` is the client's address, for ACL entries limited to source IPs."""
        self.sessions = sessions
        self.access = access
        self.peer_ip = peer_ip
        #: the user the CONNECT named (proven when ``access`` authenticates)
        self.user: str | None = None
        self.receive_maximum = receive_maximum
        self.maximum_packet_size = maximum_packet_size
        self.decoder = Decoder("server", maximum_packet_size=maximum_packet_size,
                               topic_alias_maximum=topic_alias_maximum)
        self.state = State.AWAITING_CONNECT
        self.version: int | None = None
        self.session: Session | None = None
        self.keep_alive = 0
        self.will: Will | None = None
        #: what the client accepts (MQTT 5 CONNECT properties)
        self.client_receive_maximum = 0xFFFF
        self.client_maximum_packet_size: int | None = None
        #: QoS 1 and 2 PUBLISHes from the client being stored (not yet acknowledged), by packet identifier
        self._storing: dict[int, int] = {}
        self._last_received = now
        #: the latest time any entry point was given (a will's expiry starts when it is published)
        self._now = now

    # ------------------------------------------------------------------ time

    @property
    def deadline(self) -> float | None:
        """When :meth:`tick` closes the connection unless a packet arrives: 1.5 keep-alive periods after
        the last one (spec 3.1.2.10), or the CONNECT timeout; ``None`` without a keep-alive."""
        if self.state is State.AWAITING_CONNECT:
            return self._last_received + CONNECT_TIMEOUT
        if self.state is State.CONNECTED and self.keep_alive:
            return self._last_received + 1.5 * self.keep_alive
        return None

    def tick(self, now: float) -> list[Action]:
        self._now = now
        deadline = self.deadline
        if deadline is None or now < deadline:
            return []
        if self.state is State.AWAITING_CONNECT:
            return self._close(None, publish_will=False)
        return self._close(Disconnect(ReasonCode.KEEP_ALIVE_TIMEOUT), publish_will=True)

    # ------------------------------------------------------------------ bytes in

    def receive_data(self, data: bytes, now: float) -> list[Action]:
        if self.state is State.CLOSED:
            return []
        self._last_received = self._now = now
        actions: list[Action] = []
        for event in self.decoder.feed(data):
            if self.state is State.CLOSED:
                break
            if isinstance(event, ProtocolViolation):
                self.version = self.version or event.version
                actions += self._close(event.reply(), publish_will=True)
            else:
                actions += self._handle(event, now)
        return actions

    def _handle(self, packet: Packet, now: float) -> list[Action]:
        # the decoder gives exactly these classes: comparing the class is cheaper than isinstance of an ABC
        kind = packet.__class__
        if kind is Publish:
            return self._publish(packet, now)
        if kind is PubAck:
            return self._finish_outgoing(packet.packet_identifier, Outgoing.PUBLISHED, qos=1)
        if kind is Connect:
            return self._connect(packet, now)
        if kind is PubRec:
            return self._pubrec(packet)
        if kind is PubComp:
            return self._finish_outgoing(packet.packet_identifier, Outgoing.RELEASED, qos=2)
        if kind is PubRel:
            return self._pubrel(packet)
        if kind is Subscribe:
            return self._subscribe(packet)
        if kind is Unsubscribe:
            return self._unsubscribe(packet)
        if kind is PingReq:
            return [Send(PingResp())]
        if kind is Disconnect:
            return self._disconnect(packet)
        # AUTH: no CONNECT here names an authentication method, so there is no exchange to continue
        return self._close(Disconnect(ReasonCode.PROTOCOL_ERROR), publish_will=True)

    # ------------------------------------------------------------------ CONNECT

    def _connect(self, connect: Connect, now: float) -> list[Action]:
        self.version = connect.protocol_level
        props = connect.properties
        if props.authentication_method is not None:
            return self._refuse(ReasonCode.BAD_AUTHENTICATION_METHOD)
        client_id = connect.client_identifier
        self.user = connect.user_name
        if self.access is not None and self.access.authenticating:
            # mosquitto answers every failed login Not authorized (3.1.1: return code 5), whatever failed
            self.user = self.access.login(connect.user_name, connect.password, client_id)
            if self.user is None:
                return self._refuse(ReasonCode.NOT_AUTHORIZED)
        assigned = None
        if not client_id:
            if self.version == MQTT_3_1_1 and not connect.clean_start:
                return self._refuse(ReasonCode.CLIENT_IDENTIFIER_NOT_VALID)  # MQTT-3.1.3-8
            client_id = assigned = f"ferrymq-{secrets.token_hex(8)}"
        if self.version == MQTT_5:
            expiry = props.session_expiry_interval or 0
            self.client_receive_maximum = props.receive_maximum or 0xFFFF
            self.client_maximum_packet_size = props.maximum_packet_size
        else:
            expiry = 0 if connect.clean_start else NEVER_EXPIRES
        if connect.will is not None:
            try:
                _will_message(connect.will, now, client_id)
            except mapping.MappingError as error:
                return self._refuse(error.reason_code)
        self.keep_alive = connect.keep_alive
        self.will = connect.will
        self.state = State.CONNECTED
        actions: list[Action] = []
        session = self.sessions.get(client_id)
        taken_over = session.owner if session is not None else None
        if session is not None and session.expires_at is not None and session.expires_at <= now:
            del self.sessions[client_id]  # expired before the next sweep came to it
            actions += _end(session, now)
            session = None
        if session is not None and connect.clean_start:
            session.owner = None  # the connection taken over has no session left to end
            del self.sessions[client_id]
            actions += _end(session, now)
            session = None
        present = session is not None
        if session is None:
            session = self.sessions[client_id] = Session(client_id)
        session.owner = self
        session.expires_at = None
        session.pending_will = None  # back before the will's delay passed: it is not published
        session.expiry_interval = expiry
        self.session = session
        connack_props = NO_PROPERTIES
        if self.version == MQTT_5:
            connack_props = Properties(
                receive_maximum=self.receive_maximum, maximum_packet_size=self.maximum_packet_size,
                topic_alias_maximum=self.decoder.topic_alias_maximum,
                assigned_client_identifier=assigned, wildcard_subscription_available=1,
                subscription_identifier_available=1, shared_subscription_available=1)
        actions += [Connected(session, present, taken_over), Send(ConnAck(present, ReasonCode.SUCCESS, connack_props))]
        if present:
            actions += self._resend()
        return actions

    def _refuse(self, reason_code: ReasonCode) -> list[Action]:
        if self.version == MQTT_5:
            reply = ConnAck(False, reason_code)
        else:
            return_code = connect_return_code(reason_code)
            reply = None if return_code is None else ConnAck(False, return_code)
        return self._close(reply, publish_will=False)

    def _resend(self) -> list[Action]:
        """A resumed session's unacknowledged messages, in order (spec 4.4): PUBLISH again with DUP, or
        PUBREL; then what waited for the connection."""
        actions: list[Action] = []
        for flight in self.session.in_flight.values():
            if flight.state is Outgoing.PUBLISHED:
                actions.append(Send(dataclasses.replace(flight.publish, dup=True)))
            else:
                actions.append(Send(PubRel(flight.publish.packet_identifier)))
        return actions + self._drain()

    # ------------------------------------------------------------------ PUBLISH from the client

    def _publish(self, publish: Publish, now: float) -> list[Action]:
        pid = publish.packet_identifier
        if publish.qos == 2 and (pid in self.session.received_qos2 or pid in self._storing):
            # a retransmission of a message stored (or being stored) already: exactly once
            return [Send(PubRec(pid))] if pid in self.session.received_qos2 else []
        if publish.qos and self.version == MQTT_5 and self._unacknowledged() >= self.receive_maximum:
            return self._close(Disconnect(ReasonCode.RECEIVE_MAXIMUM_EXCEEDED), publish_will=True)
        try:
            message = mapping.to_rocketmq(publish, int(now * 1000), self.session.client_id)
        except mapping.MappingError as error:
            return self._publish_refused(publish.qos, pid, error.reason_code, str(error))
        if self.access is not None and not self._allowed(PUB, message.topic):
            return self._publish_denied(publish.qos, pid)
        if publish.qos:
            self._storing[pid] = publish.qos
        return [Forward(message, publish.qos, pid)]

    def _allowed(self, action: str, topic: str) -> bool:
        access = self.access
        return access is None or not access.authorizing or access.allows(self.user, action, topic_resource(topic),
                                                                          self.peer_ip)

    def _publish_denied(self, qos: int, packet_identifier: int | None) -> list[Action]:
        """A PUBLISH the user may not make is dropped, as mosquitto drops it: MQTT 5 says Not authorized in
        the acknowledgement; 3.1.1, which has no negative acknowledgement, acknowledges it (QoS 0: nothing)."""
        if qos == 0:
            return []
        if self.version == MQTT_5:
            return self._publish_refused(qos, packet_identifier, ReasonCode.NOT_AUTHORIZED, "not authorized")
        if qos == 1:
            return [Send(PubAck(packet_identifier))]
        self.session.received_qos2.add(packet_identifier)
        return [Send(PubRec(packet_identifier))]

    def _unacknowledged(self) -> int:
        """Client QoS 1/2 PUBLISHes the server has not finished acknowledging (MQTT 5 Receive Maximum)."""
        return len(self._storing) + len(self.session.received_qos2)

    def _publish_refused(self, qos: int, packet_identifier: int | None, reason_code: int,
                         reason: str) -> list[Action]:
        """MQTT 5 says why in the acknowledgement (QoS 0: in a DISCONNECT); 3.1.1 has no negative
        acknowledgement, so the connection closes (3.1.1 spec 3.3.5)."""
        if self.version != MQTT_5:
            return self._close(None, publish_will=True)
        props = Properties(reason_string=reason)
        if qos == 1:
            return [Send(PubAck(packet_identifier, reason_code, props))]
        if qos == 2:
            return [Send(PubRec(packet_identifier, reason_code, props))]
        return self._close(Disconnect(reason_code, props), publish_will=True)

    def stored(self, packet_identifier: int, reason_code: int = ReasonCode.SUCCESS, reason: str = "") -> list[Action]:
        """RocketMQ's answer to a :class:`Forward` of a QoS 1/2 PUBLISH: acknowledge it now."""
        qos = self._storing.pop(packet_identifier, None)
        if qos is None or self.state is not State.CONNECTED:
            return []  # the connection closed meanwhile; the client sends it again
        if reason_code != ReasonCode.SUCCESS:
            return self._publish_refused(qos, packet_identifier, reason_code, reason)
        if qos == 1:
            return [Send(PubAck(packet_identifier))]
        self.session.received_qos2.add(packet_identifier)
        return [Send(PubRec(packet_identifier))]

    def _pubrel(self, pubrel: PubRel) -> list[Action]:
        pid = pubrel.packet_identifier
        if pid in self.session.received_qos2:
            self.session.received_qos2.discard(pid)
            return [Send(PubComp(pid))]
        return [Send(PubComp(pid, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND))]

    # ------------------------------------------------------------------ PUBLISH to the client

    def deliver(self, delivery: mapping.Delivery, token: Any, share: str | None = None,
                stored_at: float | None = None, *, retained_for: str | None = None) -> list[Action]:
        """Send a RocketMQ message to this connection's client, as its subscriptions ask (see
        :func:`deliver`)."""
        return deliver(self.session, delivery, token, share, stored_at, retained_for=retained_for)

    def _drain(self) -> list[Action]:
        """Send queued messages while the client's Receive Maximum leaves room."""
        session = self.session
        actions: list[Action] = []
        while session.queued and len(session.in_flight) < self.client_receive_maximum:
            queued, token = session.queued.popleft()
            # built field by field: dataclasses.replace costs several times as much, once a message
            publish = Publish(queued.topic_name, queued.payload, queued.qos, queued.retain, queued.dup,
                              session.next_packet_identifier(), queued.properties)
            session.in_flight[publish.packet_identifier] = InFlight(publish, token)
            actions.append(Send(publish))
        return actions

    def _too_large(self, publish: Publish) -> bool:
        return (self.client_maximum_packet_size is not None
                and len(encode(publish, self.version)) > self.client_maximum_packet_size)

    def _pubrec(self, pubrec: PubRec) -> list[Action]:
        flight = self.session.in_flight.get(pubrec.packet_identifier)
        if flight is None or flight.publish.qos != 2:
            return [Send(PubRel(pubrec.packet_identifier, ReasonCode.PACKET_IDENTIFIER_NOT_FOUND))]
        if pubrec.reason_code >= 0x80:  # the client refused it: the delivery is over (spec 4.3.3)
            return self._finish_outgoing(pubrec.packet_identifier, Outgoing.PUBLISHED, qos=2)
        flight.state = Outgoing.RELEASED
        return [Send(PubRel(pubrec.packet_identifier))]

    def _finish_outgoing(self, packet_identifier: int, state: Outgoing, qos: int) -> list[Action]:
        flight = self.session.in_flight.get(packet_identifier)
        if flight is None or flight.state is not state or flight.publish.qos != qos:
            return []  # an acknowledgement of nothing in flight is ignored, as brokers do
        del self.session.in_flight[packet_identifier]
        return [Ack(flight.token), *self._drain()]

    # ------------------------------------------------------------------ SUBSCRIBE, UNSUBSCRIBE

    def _subscribe(self, subscribe: Subscribe) -> list[Action]:
        session = self.session
        codes = []
        added = []
        retained = []
        identifier = next(iter(subscribe.properties.subscription_identifier), None)
        for sub in subscribe.subscriptions:
            code = self._check_filter(sub)
            if code is None:
                code = min(sub.qos, 2)
                new = sub.topic_filter not in session.subscriptions
                if new:
                    session.subscribed_at[sub.topic_filter] = to_store_time(self._now)
                # Retain Handling 0: on every SUBSCRIBE, 1: when new, 2: never; never to a shared one (4.8.2)
                if (sub.retain_handling == 0 or (sub.retain_handling == 1 and new)) and \
                        not sub.topic_filter.startswith(topics.SHARE_PREFIX):
                    retained.append(sub.topic_filter)
                session.subscriptions[sub.topic_filter] = sub
                if identifier is None:
                    session.subscription_ids.pop(sub.topic_filter, None)
                else:
                    session.subscription_ids[sub.topic_filter] = identifier
                added.append(sub.topic_filter)
            elif code == ReasonCode.PROTOCOL_ERROR:
                return self._close(Disconnect(ReasonCode.PROTOCOL_ERROR), publish_will=True)
            codes.append(code if self.version == MQTT_5 or code <= 2 else _SUBACK_FAILURE_3_1_1)
        return [ChangeSubscriptions(session, tuple(added), (), SubAck(subscribe.packet_identifier, tuple(codes)),
                                    tuple(retained))]

    def _check_filter(self, sub: Subscription) -> int | None:
        """``None`` for a filter this gateway serves, else the SUBACK reason code that says why not."""
        if not topics.is_valid_filter(sub.topic_filter):
            return ReasonCode.TOPIC_FILTER_INVALID
        shared = topics.parse_shared(sub.topic_filter)
        if shared is not None and sub.no_local:
            return ReasonCode.PROTOCOL_ERROR  # MQTT-3.8.3-4
        try:
            topic = mapping.subscription(shared.topic_filter if shared else sub.topic_filter)
            if shared is not None:
                mapping.share_group(shared.group)
        except mapping.MappingError as error:
            return error.reason_code
        if not self._allowed(SUB, topic.topic):
            return ReasonCode.NOT_AUTHORIZED
        return None

    def _unsubscribe(self, unsubscribe: Unsubscribe) -> list[Action]:
        session = self.session
        removed = []
        codes = []
        for topic_filter in unsubscribe.topic_filters:
            if session.subscriptions.pop(topic_filter, None) is None:
                codes.append(ReasonCode.NO_SUBSCRIPTION_EXISTED)
            else:
                session.subscription_ids.pop(topic_filter, None)
                session.subscribed_at.pop(topic_filter, None)
                removed.append(topic_filter)
                codes.append(ReasonCode.SUCCESS)
        return [ChangeSubscriptions(session, (), tuple(removed),
                                    UnsubAck(unsubscribe.packet_identifier, tuple(codes)))]

    # ------------------------------------------------------------------ the end

    def _disconnect(self, disconnect: Disconnect) -> list[Action]:
        if disconnect.properties.session_expiry_interval is not None:
            if self.session.expiry_interval == 0 and disconnect.properties.session_expiry_interval:
                return self._close(Disconnect(ReasonCode.PROTOCOL_ERROR), publish_will=True)  # MQTT-3.14.2-2
            self.session.expiry_interval = disconnect.properties.session_expiry_interval
        return self._close(None, publish_will=disconnect.reason_code == ReasonCode.DISCONNECT_WITH_WILL_MESSAGE)

    def connection_lost(self, now: float) -> list[Action]:
        """The network connection ended; without a DISCONNECT first, the will is published (spec 3.1.2.5)."""
        self._now = now
        if self.state is State.CLOSED:
            return []
        return self._close(None, publish_will=True)

    def take_over(self, now: float) -> list[Action]:
        """Another connection took this one's client identifier (spec 3.1.4-3): close with *Session taken
        over*; the will is published, as on any close without DISCONNECT."""
        self._now = now
        if self.state is State.CLOSED:
            return []
        return self._close(Disconnect(ReasonCode.SESSION_TAKEN_OVER), publish_will=True)

    def shut_down(self, now: float) -> list[Action]:
        """The server is stopping: close with *Server shutting down*. The server closes the connection
        without the client's DISCONNECT, so the will is published (spec 3.1.2.5), as mosquitto does as it
        stops; a delayed one of a persistent session waits in the session, which detaches, its expiry
        starting now."""
        self._now = now
        if self.state is State.CLOSED:
            return []
        return self._close(Disconnect(ReasonCode.SERVER_SHUTTING_DOWN), publish_will=True)

    def _close(self, reply: Packet | None, publish_will: bool) -> list[Action]:
        was_connected = self.state is State.CONNECTED
        self.state = State.CLOSED
        actions: list[Action] = []
        if reply is not None and (self.version == MQTT_5 or isinstance(reply, ConnAck)):
            actions.append(Send(reply))
        actions.append(Close())
        will = self.will if was_connected and publish_will else None
        self.will = None
        session = self.session
        if will is not None and will.properties.will_delay_interval and session is not None:
            # MQTT 5 Will Delay: published when the delay passes or the session ends, whichever is first;
            # not at all if the client resumes the session before (it already has, if taken over)
            if session.owner is self and session.expiry_interval != 0:
                session.pending_will = (will, self._now + will.properties.will_delay_interval)
                will = None
            elif session.owner is not self and session.owner is not None:
                will = None
        if will is not None:
            actions.append(Forward(_will_message(will, self._now, self.session.client_id), will.qos))
        if session is not None and session.owner is self:
            session.owner = None
            if session.expiry_interval == 0:
                if self.sessions.get(session.client_id) is session:
                    del self.sessions[session.client_id]
                actions += _end(session, self._now)
            elif session.expiry_interval != NEVER_EXPIRES:
                session.expires_at = self._now + session.expiry_interval
        return actions


def deliver(session: Session, delivery: mapping.Delivery, token: Any, share: str | None = None,
            stored_at: float | None = None, *, retained_for: str | None = None,
            filters: list[str] | None = None) -> list[Action]:
    """Give ``session`` a RocketMQ message (``share``: the shared subscription whose group delivered it;
    ``stored_at``: when the broker stored it, see :meth:`Session.matching`; ``retained_for``: the
    filter just subscribed whose retained message this is; ``filters``: what :meth:`Session.matching`
    answered for it, when the caller asked already).

    One PUBLISH at the highest QoS its matching subscriptions grant, capped by the message's own, with
    their subscription identifiers (spec 3.3.4). QoS 0 goes now or never; QoS 1 and 2 go when the
    client's Receive Maximum has room, and wait in the session (detached or not) until then; a shared
    subscription's QoS 1 delivery stays the group's until acknowledged (``token``, handed back if the
    session ends first), a QoS 2 one is the session's at once (``Ack``). RETAIN is
    set on a retained message sent for a new subscription, and otherwise only for a subscription with
    Retain As Published (3.1.1 spec 3.3.1.3, MQTT 5 3.3.1.3).
    """
    if retained_for is not None:
        filters = [retained_for] if retained_for in session.subscriptions else []
        retain = True
    else:
        if filters is None:
            filters = session.matching(delivery, share, stored_at)
        retain = delivery.retain and any(session.subscriptions[f].retain_as_published for f in filters)
    if not filters:
        return [Ack(token)]
    subscriptions = session.subscriptions
    qos = min(delivery.qos, max(subscriptions[f].qos for f in filters))
    props = delivery.properties
    if session.subscription_ids:
        ids = tuple(sorted({session.subscription_ids[f] for f in filters if f in session.subscription_ids}))
        if ids:
            props = dataclasses.replace(props, subscription_identifier=ids)
    connection = session.owner
    # sent at once when nothing waits before it and the client's Receive Maximum has room: then it takes its
    # packet identifier now rather than a placeholder replaced on the way out (:meth:`ServerConnection._drain`)
    at_once = qos and connection is not None and not session.queued \
        and len(session.in_flight) < connection.client_receive_maximum
    publish = Publish(delivery.topic_name, delivery.payload, qos, retain,
                      packet_identifier=(session.next_packet_identifier() if at_once else 1) if qos else None,
                      properties=props)
    if connection is not None and connection._too_large(publish):
        return [Ack(token)]  # MQTT-3.1.2-25: discarded as if delivered
    if qos == 0:
        if connection is None:
            return [Ack(token)]
        return [Send(publish), Ack(token)]
    if len(session.queued) >= QUEUE_LIMIT:
        return [Release((token,))]
    handed: list[Action] = []
    if qos == 2 and share is not None:
        # a QoS 2 message of a shared subscription is completed with the member chosen, never another
        # (MQTT 5 4.8.2): its session owns it from now on, as a fan-out delivery, and persists it
        handed, token = [Ack(token)], None
    if at_once:
        session.in_flight[publish.packet_identifier] = InFlight(publish, token)
        handed.append(Send(publish))
        return handed
    session.queued.append((publish, token))
    return handed + (connection._drain() if connection is not None else [])


def expire(sessions: Sessions, now: float, candidates: Iterable[Session] | None = None) -> list[Action]:
    """End the detached sessions whose Session Expiry Interval has passed (spec 3.1.2.11.2), and publish
    the delayed wills that are due; the caller sweeps now and then, and a CONNECT finds an expired
    session ended even between sweeps. ``candidates``: the sessions to look at, if the caller knows
    which may be detached (every session otherwise)."""
    actions: list[Action] = []
    for session in list(sessions.values() if candidates is None else candidates):
        if session.owner is not None or sessions.get(session.client_id) is not session:
            continue
        if session.expires_at is not None and session.expires_at <= now:
            del sessions[session.client_id]
            actions += _end(session, now)
        elif session.pending_will is not None and session.pending_will[1] <= now:
            actions += _publish_pending_will(session, now)
    return actions


def _end(session: Session, now: float) -> list[Action]:
    tokens = session.tokens()
    session.in_flight.clear()
    session.queued.clear()
    return [*_publish_pending_will(session, now), SessionEnded(session), *([Release(tokens)] if tokens else [])]


def _publish_pending_will(session: Session, now: float) -> list[Action]:
    if session.pending_will is None:
        return []
    will, _ = session.pending_will
    session.pending_will = None
    return [Forward(_will_message(will, now, session.client_id), will.qos)]


def _will_message(will: Will, now: float, client_id: str) -> Message:
    """The will as RocketMQ stores it: as if the client had published it (``MappingError`` if it cannot
    be, which :meth:`ServerConnection._connect` finds out before accepting the will)."""
    publish = Publish(will.topic, will.payload, will.qos, will.retain, packet_identifier=1 if will.qos else None,
                      properties=will.properties)
    return mapping.to_rocketmq(publish, int(now * 1000), client_id)


__all__ = ["RECEIVE_MAXIMUM", "TOPIC_ALIAS_MAXIMUM", "QUEUE_LIMIT", "CONNECT_TIMEOUT", "NEVER_EXPIRES",
           "Send", "Close", "Forward", "ChangeSubscriptions", "Ack", "Release", "Connected", "SessionEnded",
           "Action", "Session", "Sessions", "ServerConnection", "State", "deliver", "expire"]
