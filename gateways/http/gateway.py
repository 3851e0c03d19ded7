"""The gateway's RocketMQ side: one client identity holding the publishing producer, the HTTP consumer
groups and an admin client, all on :mod:`ferrymq.sdk.aio`, on the event loop that serves HTTP."""

from __future__ import annotations

import asyncio
import logging
import os
from typing import Any

from ferrymq.sdk import reactor_thread
from ferrymq.sdk.aio import MQAdmin, Producer
from ferrymq.sdk.client_config import ClientConfig
from ferrymq.sdk.client_instance import ClientInstance
from ferrymq.sdk.consumer.rebalance import MessageModel
from ferrymq.sdk.aio.bridge import call
from ferrymq.wire.message import DEFAULT_MAX_MESSAGE_SIZE

from .consumers import GroupConsumer, unknown_handle
from .problems import Problem

log = logging.getLogger("ferrymq.gateway.http")

#: the producer group of plain (not transactional) publishes; it shows in the brokers' producer lists
PRODUCER_GROUP = "FERRYMQ_HTTP_PRODUCER"
#: how often idle consumer groups are looked for
_IDLE_CHECK_SECONDS = 10.0


class Gateway:
    """What the HTTP routes call. Start and stop it on the loop that serves them."""

    def __init__(self, namesrv_addr: str, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 client_config: dict[str, Any] | None = None, local_offset_dir: str | None = None):
        self.namesrv_addr = namesrv_addr
        #: where broadcasting clients' offsets are kept (None: the SDK's default, ~/.rocketmq_offsets)
        self.local_offset_dir = local_offset_dir
        self.max_message_size = max_message_size
        self._config_kwargs = dict(client_config or {})
        self._config_kwargs.setdefault("instance_name", f"ferrymq-http-{os.getpid()}")
        self._instance: ClientInstance | None = None
        self.producer: Producer | None = None
        self.admin: MQAdmin | None = None
        self.groups: dict[str, GroupConsumer] = {}
        #: BROADCASTING consumers by (group, client)
        self.broadcasts: dict[tuple[str, str], GroupConsumer] = {}
        self._idle_task: asyncio.Task | None = None

    def _client_kwargs(self) -> dict[str, Any]:
        return {"config": self._instance.config, "instance": self._instance}

    async def start(self) -> None:
        config = ClientConfig(self.namesrv_addr, **self._config_kwargs)
        reactor_thread.ensure_running()
        self._instance = reactor_thread.call(lambda: ClientInstance(config))
        self.producer = Producer(PRODUCER_GROUP, max_message_size=self.max_message_size, **self._client_kwargs())
        await self.producer.start()
        self.admin = MQAdmin(self.namesrv_addr)
        self._idle_task = asyncio.get_running_loop().create_task(self._stop_idle_groups())
        log.info("HTTP gateway in front of name server(s) %s as client %s", self.namesrv_addr, config.client_id)

    async def stop(self) -> None:
        if self._idle_task is not None:
            self._idle_task.cancel()
        for group in [*self.groups.values(), *self.broadcasts.values()]:
            await group.stop()
        self.groups.clear()
        self.broadcasts.clear()
        if self.producer is not None:
            producer, self.producer = self.producer, None
            await producer.stop()
        if self.admin is not None:
            await self.admin.close()
        if self._instance is not None:
            await call(self._instance.shutdown)

    def require_started(self) -> None:
        if self.producer is None:
            raise Problem(503, "the gateway is starting (or stopping); try again in a moment")

    def group(self, name: str, max_reconsume_times: int) -> GroupConsumer:
        consumer = self.groups.get(name)
        if consumer is None:
            consumer = self.groups[name] = GroupConsumer(name, self._client_kwargs(), max_reconsume_times)
        elif consumer.max_reconsume_times != max_reconsume_times:
            raise Problem(409, f"group {name} consumes with maxReconsumeTimes={consumer.max_reconsume_times} at "
                               f"this gateway; all its requests must ask for the same", "query.maxReconsumeTimes")
        return consumer

    def consumer(self, name: str, max_reconsume_times: int, model: str, client: str | None) -> GroupConsumer:
        """The group's consumer for a consume or stream request: the group's clustering consumer, or the
        broadcasting consumer of ``client``; a group is consumed one way or the other at this gateway."""
        if model == MessageModel.CLUSTERING:
            if client is not None:
                raise Problem(400, "client names a BROADCASTING consumer; a CLUSTERING group's requests "
                                   "share its messages whoever sends them", "query.client")
            if any(group == name and c.consuming for (group, _), c in self.broadcasts.items()):
                raise Problem(409, f"group {name} is consumed with model=BROADCASTING at this gateway; a "
                                   f"group is consumed one way at a time", "query.model")
            return self.group(name, max_reconsume_times)
        if client is None:
            raise Problem(400, "a BROADCASTING consumer names itself with client (each client gets every "
                               "message and has its own offsets)", "query.client")
        if name in self.groups and self.groups[name].consuming:
            raise Problem(409, f"group {name} is consumed with model=CLUSTERING at this gateway; a group is "
                               f"consumed one way at a time", "query.model")
        consumer = self.broadcasts.get((name, client))
        if consumer is None:
            config = ClientConfig(self.namesrv_addr, **{**self._config_kwargs, "instance_name": f"http-{client}"})
            consumer = self.broadcasts[name, client] = GroupConsumer(
                name, {"config": config, "local_offset_dir": self.local_offset_dir}, max_reconsume_times,
                MessageModel.BROADCASTING)
        return consumer

    def settle(self, name: str, handles: list[str], consumed: bool, delay_level: int) -> int:
        """Ack or nack ``handles`` of group ``name``, whichever of its consumers here handed each out: all
        of them, or none when one is not handed out here."""
        consumers = [c for (group, _), c in self.broadcasts.items() if group == name]
        if name in self.groups:
            consumers.append(self.groups[name])
        if not consumers:
            raise Problem(404, f"no message of group {name} is handed out at this gateway", "/group")
        owners: dict[GroupConsumer, list[str]] = {}
        for i, handle in enumerate(handles):
            owner = next((c for c in consumers if c.holds(handle)), None)
            if owner is None:
                raise unknown_handle(name, handle, i)
            owners.setdefault(owner, []).append(handle)
        return sum(owner.settle(mine, consumed, delay_level) for owner, mine in owners.items())

    async def _stop_idle_groups(self) -> None:
        while True:
            await asyncio.sleep(_IDLE_CHECK_SECONDS)
            for table in (self.groups, self.broadcasts):
                for key, group in list(table.items()):
                    if group.idle:
                        log.info("HTTP consumers of group %s (%s): no request for a while; stopping (a "
                                 "clustering group's queues go to its other consumers, a broadcasting client "
                                 "keeps its offsets)", group.group, group.model.value)
                        del table[key]
                        await group.stop()
