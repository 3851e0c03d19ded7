"""The running name server: registry + KV store + processor behind a RemotingServer, plus the expiry scan."""

from __future__ import annotations

import logging
from typing import Any

from twisted.internet import defer, task

from ferrymq.server.config import NamesrvConfig, NettyServerConfig
from ferrymq.remoting import Channel, RemotingServer, routes
from ferrymq.remoting.tls import ServerTls
from ferrymq.server.write_queue import WriteQueue

from .kvconfig import KVConfigStore, atomic_write
from .processor import NamesrvProcessor
from .registry import RouteRegistry

log = logging.getLogger("ferrymq.namesrv")

#: Apache waits 5 s before the first expiry scan, whatever the interval.
FIRST_SCAN_DELAY = 5.0


class NameServer:
    """``NameServer(config, netty).start()``; ``stop()`` returns a Deferred (graceful)."""

    def __init__(self, config: NamesrvConfig, netty: NettyServerConfig, reactor: Any = None,
                 tls: ServerTls | None = None):
        """``tls``: the listener's TLS (``tls.server.mode``); None serves plain clients only."""
        if reactor is None:
            from twisted.internet import reactor as default_reactor

            reactor = default_reactor
        if config.clusterTest:
            raise ValueError("clusterTest=true (Apache's cluster-test processor) is not supported by FerryMQ")
        self.config = config
        self.netty = netty
        self.reactor = reactor
        self._writes = WriteQueue(reactor, "namesrv-files")
        self.registry = RouteRegistry(
            support_acting_master=config.supportActingMaster,
            delete_topic_with_broker_registration=config.deleteTopicWithBrokerRegistration,
            default_expired_ms=config.brokerChannelExpiredTime,
            now=lambda: int(self.reactor.seconds() * 1000),
        )
        self.kv = KVConfigStore(config.kvConfigPath, write=self._write_file)
        self.kv.load()
        self.processor = NamesrvProcessor(self.registry, self.kv, config, netty, persist_config=self._write_file)
        self.server = RemotingServer(routes([self.processor]), netty.transport_options(), reactor, name="namesrv",
                                     tls=tls)
        self.server.add_close_listener(self._channel_closed)
        self._scan: task.LoopingCall | None = None
        self._first_scan: Any = None

    def _write_file(self, path: str, data: bytes) -> defer.Deferred:
        """Queue a file write on the name server's file thread (fsync stays off the reactor), in order."""
        return self._writes.submit(path, atomic_write, path, data)

    def _channel_closed(self, channel: Channel) -> None:
        self.registry.on_channel_destroy(channel)

    def scan_not_active_brokers(self) -> None:
        for expired in self.registry.scan_not_active_brokers():
            if isinstance(expired.channel, Channel):
                expired.channel.close()

    def start(self) -> None:
        self.server.listen(self.netty.listenPort, self.netty.bindAddress, backlog=self.netty.serverSocketBacklog)
        interval = self.config.scanNotActiveBrokerInterval / 1000.0
        self._scan = task.LoopingCall(self.scan_not_active_brokers)
        self._scan.clock = self.reactor

        def begin() -> None:
            self._first_scan = None
            self._scan.start(interval, now=True).addErrback(
                lambda f: log.error("broker expiry scan stopped: %s", f.getTraceback())
            )

        self._first_scan = self.reactor.callLater(min(FIRST_SCAN_DELAY, interval), begin)
        log.info("name server listening on %s:%d", self.netty.bindAddress, self.server.port)

    @property
    def port(self) -> int:
        return self.server.port

    @defer.inlineCallbacks
    def stop(self, grace: float | None = None):
        log.info("name server shutting down")
        if self._first_scan is not None and self._first_scan.active():
            self._first_scan.cancel()
        if self._scan is not None and self._scan.running:
            self._scan.stop()
        yield self.server.stop(grace)
        yield self._writes.close()
        log.info("name server stopped")
