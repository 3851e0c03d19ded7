"""A slave's copy of its master's metadata (Apache's SlaveSynchronize).

The commit log reaches a slave through the HA stream; topics, subscription groups, consumer offsets
and delay-level offsets do not, so a slave asks its master for them with the admin requests Apache's
slave sends: GET_ALL_TOPIC_CONFIG (paged by topicSeq), GET_ALL_SUBSCRIPTIONGROUP_CONFIG (paged by
groupSeq), GET_ALL_CONSUMER_OFFSET and GET_ALL_DELAY_OFFSET.

The schedule is Apache's (a look every 3 s, every table at most once a minute) with three differences,
each making the slave current sooner without asking for more than Apache's slave does at rest:

* the first round runs as soon as the master is known, not a minute after start (until then Apache's
  slave answers TOPIC_NOT_EXIST to every reader);
* consumer and delay offsets are asked for every 3 s: they are small, and they are where a reader
  starts on the slave once the master is gone (a minute-old offset redelivers a minute of messages);
* topics and groups are asked for again within 3 s once the replicated stream or the offset table
  names one the slave does not know (a topic created on the master shows on the slave with its first
  message, not up to a minute later). Each unknown name asks once per minute at most.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ferrymq.remoting import RemotingClient
from ferrymq.wire import fastjson
from ferrymq.wire.bodies import SubscriptionGroupWrapper, TopicConfigSerializeWrapper
from ferrymq.wire.codes import RequestCode
from ferrymq.wire.command import request
from ferrymq.wire.signature import Credentials
from twisted.internet import defer, task

log = logging.getLogger("ferrymq.ha.sync")

#: seconds between two looks at the master (Apache's slave: every 3 s)
SYNC_INTERVAL_S = 3.0
#: seconds between two rounds of every table (Apache's slave: at most once a minute)
FULL_SYNC_INTERVAL_S = 60.0
#: timeout of one admin call to the master (Apache's default remoting timeout)
CALL_TIMEOUT_S = 3.0
#: page size asked for (Apache's master answers all at once unless enableSplitMetadata)
PAGE = 2_000


class SlaveSynchronize:
    """Pulls the master's tables into the slave's ``ctx`` (a :class:`~server.broker.context.BrokerContext`).

    ``persist_offsets`` writes consumerOffset.json (the broker's file thread); topic and group changes
    persist through their managers' own ``on_change``.
    """

    def __init__(self, ctx: Any, reactor: Any, persist_offsets: Callable[[], Any], tls: Any = None,
                 credentials: Credentials | None = None):
        """``tls``: a :class:`~ferrymq.remoting.tls.ClientTls` when the broker's own connections use TLS;
        ``credentials``: the broker's own (``innerClientAuthenticationCredentials``), for a master that
        authenticates."""
        self.ctx = ctx
        self.reactor = reactor
        self.persist_offsets = persist_offsets
        self.client = RemotingClient(reactor=reactor, tls=tls, credentials=credentials)
        self.master_addr = ""
        self.rounds = 0
        #: reactor time of the last round of every table (None: none yet)
        self.last_full: float | None = None
        #: topics and groups named somewhere the slave did not know them, since the last full round
        self._unknown: set[str] = set()
        self._topics_stale = False
        self._loop: task.LoopingCall | None = None
        self._running: defer.Deferred | None = None

    def set_master_addr(self, addr: str) -> None:
        """Sync from ``addr`` (the master's client address); the first round starts now."""
        if not addr or addr == self.master_addr:
            return
        self.master_addr = addr
        if self._loop is None:
            loop = self._loop = task.LoopingCall(self.sync_all)
            loop.clock = self.reactor
            loop.start(SYNC_INTERVAL_S, now=True).addErrback(lambda f: log.error("slave sync stopped: %s", f))

    def stop(self) -> defer.Deferred:
        if self._loop is not None and self._loop.running:
            self._loop.stop()
        return self.client.close()

    def sync_all(self) -> defer.Deferred | None:
        """One round; a round still running is not doubled."""
        if self._running is not None or not self.master_addr:
            return None
        d = self._running = defer.ensureDeferred(self._round(self.master_addr))

        def done(_: object) -> None:
            self._running = None
            self.rounds += 1

        d.addBoth(done)
        return None  # the loop does not wait for a slow master

    def replicated(self, topic: str, *_arrival: object) -> None:
        """Arriving listener of the slave's store: a replicated message of a topic the slave does not know
        asks for the topic table at the next look."""
        if topic not in self.ctx.topics.table and topic not in self._unknown:
            self._unknown.add(topic)
            self._topics_stale = True

    async def _round(self, addr: str) -> None:
        now = self.reactor.seconds()
        full = self.last_full is None or now - self.last_full >= FULL_SYNC_INTERVAL_S
        if full:
            self.last_full = now
            self._unknown.clear()
        offsets = await self._step("consumer offsets", addr, self._fetch_offsets)
        groups_stale = False
        for key in offsets or ():
            topic, _, group = key.partition("@")
            if topic not in self.ctx.topics.table and topic not in self._unknown:
                self._unknown.add(topic)
                self._topics_stale = True
            if group not in self.ctx.groups.table and group not in self._unknown:
                self._unknown.add(group)
                groups_stale = True
        if full or self._topics_stale:
            self._topics_stale = False
            await self._step("topic config", addr, self._topics)
        if full or groups_stale:
            await self._step("subscription groups", addr, self._groups)
        if offsets is not None and self.ctx.offsets.merge(offsets):
            self.persist_offsets()
        await self._step("delay offsets", addr, self._delay_offsets)

    async def _step(self, name: str, addr: str, step):
        try:
            return await step(addr)
        except Exception as exc:  # noqa: BLE001 - one table failing must not stop the others
            log.warning("slave sync of %s from master %s failed: %s", name, addr, exc)
            return None

    async def _call(self, addr: str, code: int, ext: dict[str, str] | None = None):
        return await self.client.call(addr, request(code, ext), CALL_TIMEOUT_S)

    async def _paged(self, addr: str, code: int, seq_key: str, max_key: str, decode, table_of):
        """Apache's paged fetch: pages from ``seq`` 0 until the total the master states (none stated: the
        one page holds everything); the last page's wrapper (for its data version) and the whole table."""
        seq, table = 0, {}
        while True:
            resp = await self._call(addr, code, {seq_key: str(seq), max_key: str(PAGE), "dataVersion": ""})
            wrapper = decode(resp.body)
            page = table_of(wrapper)
            table.update(page)
            seq += len(page)
            total = resp.ext("totalTopicNum") or resp.ext("totalGroupNum")
            if total is None or not page or seq >= int(total) - 1:
                return wrapper, table

    async def _topics(self, addr: str) -> None:
        wrapper, table = await self._paged(addr, RequestCode.GET_ALL_TOPIC_CONFIG, "topicSeq", "maxTopicNum",
                                           TopicConfigSerializeWrapper.decode, lambda w: w.topic_config_table)
        topics = self.ctx.topics
        if topics.data_version != wrapper.data_version or topics.table != table:
            topics.replace_all(table, wrapper.data_version)
            log.info("topic config synced from master %s: %d topics", addr, len(table))

    async def _groups(self, addr: str) -> None:
        wrapper, table = await self._paged(addr, RequestCode.GET_ALL_SUBSCRIPTIONGROUP_CONFIG, "groupSeq",
                                           "maxGroupNum", SubscriptionGroupWrapper.decode,
                                           lambda w: w.subscription_group_table)
        groups = self.ctx.groups
        if groups.data_version != wrapper.data_version or groups.table != table:
            groups.replace_all(table, wrapper.data_version)

    async def _fetch_offsets(self, addr: str) -> dict:
        resp = await self._call(addr, RequestCode.GET_ALL_CONSUMER_OFFSET)
        return (fastjson.loads(resp.body) or {}).get("offsetTable") or {}

    async def _delay_offsets(self, addr: str) -> None:
        resp = await self._call(addr, RequestCode.GET_ALL_DELAY_OFFSET)
        table = (fastjson.loads(resp.body) or {}).get("offsetTable") or {}
        scheduler = self.ctx.scheduler
        offsets = {int(level): int(offset) for level, offset in table.items()}
        if offsets != scheduler.offsets:
            scheduler.offsets = offsets
            scheduler.persist()
