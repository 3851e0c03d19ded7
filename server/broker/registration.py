"""Broker -> name server: REGISTER_BROKER at start, on topic changes and every registerNameServerPeriod;
UNREGISTER_BROKER on shutdown. One failing name server never stops registration with the others.

Registrations with one name server go out one at a time: a name server may run two requests of one
connection in either order (Apache's runs them on a thread pool), and an older registration taking effect
after a newer one would undo it (a promoted master's id 0 turned back into its slave id until the next
period). Each reads the broker's identity and topics when it goes out, so a queued one sends the newest.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

from twisted.internet import defer

from .namesrv_peer import NamesrvPeer, RegisterBrokerReply
from ferrymq.remoting import RemotingClient
from ferrymq.wire.bodies import TopicConfig, TopicConfigSerializeWrapper
from ferrymq.wire.signature import Credentials

log = logging.getLogger("ferrymq.broker.registration")

#: Apache clamps registerNameServerPeriod into [10 s, 60 s].
MIN_PERIOD_MS, MAX_PERIOD_MS = 10_000, 60_000
UNREGISTER_TIMEOUT_S = 3.0


def split_namesrv_addr(addr: str) -> list[str]:
    return [a.strip() for a in (addr or "").split(";") if a.strip()]


class NameServerRegistration:
    """``wrapper()`` gives the topic table to send; ``identity`` is (cluster, addr, name, id, ha addr)."""

    def __init__(self, namesrv_addr: str, identity: tuple[str, str, str, int, str],
                 wrapper: Callable[[], TopicConfigSerializeWrapper], reactor: Any,
                 timeout_ms: int = 6000, compressed: bool = False,
                 on_reply: Callable[[RegisterBrokerReply], None] | None = None, tls: Any = None,
                 credentials: Credentials | None = None):
        """``on_reply`` hears every name server's answer (a slave learns its master's addresses there);
        ``tls``, a :class:`~ferrymq.remoting.tls.ClientTls`, makes the connections TLS (``tls.enable``);
        ``credentials`` sign the requests (``innerClientAuthenticationCredentials``)."""
        self.identity = identity
        self.on_reply = on_reply
        self.wrapper = wrapper
        self.reactor = reactor
        self.compressed = compressed
        self.client = RemotingClient(reactor=reactor, tls=tls, credentials=credentials)
        self.peers = [NamesrvPeer(addr, self.client, timeout_ms / 1000.0) for addr in split_namesrv_addr(namesrv_addr)]
        self._pending: Any = None
        self._waiters: list[defer.Deferred] = []
        #: name server address -> fires when the last registration queued for it is answered
        self._last: dict[str, defer.Deferred] = {}
        self.registrations = 0

    def set_namesrv_addr(self, namesrv_addr: str) -> None:
        timeout = self.peers[0].timeout if self.peers else 6.0
        self.peers = [NamesrvPeer(addr, self.client, timeout) for addr in split_namesrv_addr(namesrv_addr)]

    def register_all(self) -> defer.Deferred:
        """Register with every name server, each once its previous registration is answered; fires when
        all answered (failures are logged)."""
        return defer.DeferredList([self._after_previous(peer) for peer in self.peers], consumeErrors=True)

    def _after_previous(self, peer: NamesrvPeer) -> defer.Deferred:
        previous = self._last.get(peer.addr)
        answered = self._last[peer.addr] = defer.Deferred()

        def send() -> defer.Deferred:
            d = self._register_with(peer)
            d.addBoth(lambda result: (answered.callback(None), result)[1])
            return d

        if previous is None or previous.called:
            return send()
        out = defer.Deferred()

        def send_after(_: None) -> None:
            send().chainDeferred(out)

        previous.addCallback(send_after)
        return out

    def _register_with(self, peer: NamesrvPeer) -> defer.Deferred:
        cluster, addr, name, broker_id, ha_addr = self.identity
        d = peer.register_broker(cluster, addr, name, broker_id, ha_addr, self.wrapper(), compressed=self.compressed)
        d.addCallback(self._registered, peer.addr)
        d.addErrback(lambda f: log.warning("register broker to name server %s failed: %s", peer.addr,
                                           f.getErrorMessage()))
        return d

    def _registered(self, reply: RegisterBrokerReply, namesrv: str) -> None:
        if self.on_reply is not None:
            self.on_reply(reply)
        self.registrations += 1
        if self.registrations == 1:  # the line an operator waits for: clients can find the broker now
            log.info("broker %s (%s) is registered with name server %s: ready, clients use namesrvAddr=%s",
                     self.identity[2], self.identity[1], namesrv, ";".join(p.addr for p in self.peers))

    def register_soon(self) -> None:
        """Register on the next reactor turn, coalescing a burst of topic changes into one round."""
        if self._pending is None or not self._pending.active():
            self._pending = self.reactor.callLater(0, self._register_pending)

    def _register_pending(self) -> None:
        waiters, self._waiters = self._waiters, []

        def release(_: object) -> None:
            for d in waiters:
                d.callback(None)

        self.register_all().addBoth(release)

    def pending(self, timeout: float) -> defer.Deferred:
        """Fires when the registration round already scheduled has answered (at once if none is).

        Apache answers a send that auto-created its topic only after the name servers know the topic,
        so a consumer started right after the send finds a route; ``timeout`` bounds the wait.
        """
        if self._pending is None or not self._pending.active():
            return defer.succeed(None)
        d = defer.Deferred()
        self._waiters.append(d)
        timer = self.reactor.callLater(timeout, lambda: d.called or d.callback(None))
        d.addBoth(lambda r: (timer.cancel() if timer.active() else None, r)[1])
        return d

    def unregister_all(self) -> defer.Deferred:
        cluster, addr, name, broker_id, _ = self.identity
        calls = []
        for peer in self.peers:
            d = peer.unregister_broker(cluster, addr, name, broker_id)
            d.addTimeout(UNREGISTER_TIMEOUT_S, self.reactor)  # shutdown must not wait on a dead name server
            d.addErrback(lambda f, a=peer.addr: log.warning("unregister broker from name server %s failed: %s", a,
                                                              f.getErrorMessage()))
            calls.append(d)
        return defer.DeferredList(calls, consumeErrors=True)

    def close(self) -> defer.Deferred:
        if self._pending is not None and self._pending.active():
            self._pending.cancel()
        return self.client.close()


def perm_limited(wrapper: TopicConfigSerializeWrapper, broker_perm: int) -> TopicConfigSerializeWrapper:
    """Apache registers each topic's perm ANDed with the broker's when the broker lost read or write."""
    if broker_perm & 6 == 6:
        return wrapper
    table = {
        name: TopicConfig(c.topic_name, c.read_queue_nums, c.write_queue_nums, c.perm & broker_perm,
                          c.topic_filter_type, c.topic_sys_flag, c.order, c.attributes)
        for name, c in wrapper.topic_config_table.items()
    }
    return TopicConfigSerializeWrapper(topic_config_table=table, data_version=wrapper.data_version)
