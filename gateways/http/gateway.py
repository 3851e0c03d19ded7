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
from ferrymq.sdk.aio.bridge import call
from ferrymq.wire.message import DEFAULT_MAX_MESSAGE_SIZE

from .consumers import IDLE_SECONDS, GroupConsumer
from .problems import Problem

log = logging.getLogger("ferrymq.gateway.http")

#: the producer group of plain (not transactional) publishes; it shows in the brokers' producer lists
PRODUCER_GROUP = "FERRYMQ_HTTP_PRODUCER"
#: how often idle consumer groups are looked for
_IDLE_CHECK_SECONDS = 10.0


class Gateway:
    """What the HTTP routes call. Start and stop it on the loop that serves them."""

    def __init__(self, namesrv_addr: str, *, max_message_size: int = DEFAULT_MAX_MESSAGE_SIZE,
                 client_config: dict[str, Any] | None = None, idle_seconds: float = IDLE_SECONDS):
        self.namesrv_addr = namesrv_addr
        self.idle_seconds = idle_seconds
        self.max_message_size = max_message_size
        self._config_kwargs = dict(client_config or {})
        self._config_kwargs.setdefault("instance_name", f"ferrymq-http-{os.getpid()}")
        self._instance: ClientInstance | None = None
        self.producer: Producer | None = None
        self.admin: MQAdmin | None = None
        self.groups: dict[str, GroupConsumer] = {}
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
        for group in list(self.groups.values()):
            await group.stop()
        self.groups.clear()
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
            consumer = self.groups[name] = GroupConsumer(name, self._client_kwargs(), max_reconsume_times,
                                                         self.idle_seconds)
        elif consumer.max_reconsume_times != max_reconsume_times:
            raise Problem(409, f"group {name} consumes with maxReconsumeTimes={consumer.max_reconsume_times} at "
                               f"this gateway; all its requests must ask for the same", "query.maxReconsumeTimes")
        return consumer

    async def _stop_idle_groups(self) -> None:
        while True:
            await asyncio.sleep(min(_IDLE_CHECK_SECONDS, self.idle_seconds))
            for name, group in list(self.groups.items()):
                if group.idle:
                    log.info("HTTP consumers of group %s: no request for a while; stopping, so the group's "
                             "other consumers take its queues", name)
                    del self.groups[name]
                    await group.stop()
