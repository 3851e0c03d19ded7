"""A scriptable name server and brokers on loopback, for testing client decisions without a real broker.

Each fake records every request it gets; handlers can be replaced per test. Everything runs in the
reactor thread of :mod:`sdk_py.reactor_thread`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from twisted.internet import defer

from ferrymq.sdk import reactor_thread
from ferrymq.remoting import RemotingServer
from ferrymq.wire.bodies import (
    BrokerData,
    GetConsumerListByGroupResponseBody,
    HeartbeatData,
    QueueData,
    TopicRouteData,
)
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.headers import SendMessageRequestHeader
from ferrymq.wire.requests import decode_request_header


class FakeServer:
    def __init__(self, name: str):
        self.name = name
        self.handlers: dict[int, Callable[[RemotingCommand, Any], Any]] = {}
        self.requests: list[RemotingCommand] = []
        self.channels: list = []
        self._cond = threading.Condition()
        self.server = RemotingServer(self._dispatch, name=name)
        reactor_thread.call(self.server.listen, 0, "127.0.0.1")
        self.addr = f"127.0.0.1:{self.server.port}"

    def _dispatch(self, cmd: RemotingCommand, channel) -> Any:
        with self._cond:
            self.requests.append(cmd)
            if channel not in self.channels:
                self.channels.append(channel)
            self._cond.notify_all()
        handler = self.handlers.get(cmd.code)
        if handler is None:
            return cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED, f"fake {self.name}: no handler")
        return handler(cmd, channel)

    def of(self, code: int) -> list[RemotingCommand]:
        with self._cond:
            return [r for r in self.requests if r.code == code]

    def wait_for(self, code: int, count: int = 1, timeout: float = 10.0) -> list[RemotingCommand]:
        deadline = time.monotonic() + timeout
        with self._cond:
            while len([r for r in self.requests if r.code == code]) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = sorted({RequestCode(r.code).name for r in self.requests})
                    raise AssertionError(f"{self.name}: fewer than {count} {RequestCode(code).name} requests "
                                         f"after {timeout} s; got codes {seen}")
                self._cond.wait(left)
            return [r for r in self.requests if r.code == code]

    def stop(self) -> None:
        reactor_thread.call(self.server.stop, 0.5)


class FakeBroker(FakeServer):
    """Answers heartbeats, unregisters and offsets; sends answer with ``send_code`` (0 = stored)."""

    def __init__(self, name: str):
        super().__init__(name)
        self.send_code = ResponseCode.SUCCESS
        self.offset = 0
        self.consumer_ids: list[str] = []
        #: (group, topic, queue id) -> committed offset
        self.offsets: dict[tuple, int] = {}
        ok = lambda cmd, ch: cmd.response(ResponseCode.SUCCESS, None, {})  # noqa: E731
        self.handlers.update({
            RequestCode.HEART_BEAT: self._heartbeat,
            RequestCode.UNREGISTER_CLIENT: ok,
            RequestCode.UPDATE_CONSUMER_OFFSET: self._update_offset,
            RequestCode.SEND_MESSAGE_V2: self._send,
            RequestCode.SEND_BATCH_MESSAGE: self._send,
            RequestCode.GET_CONSUMER_LIST_BY_GROUP: self._consumer_list,
            RequestCode.QUERY_CONSUMER_OFFSET: self._query_offset,
            RequestCode.PULL_MESSAGE: lambda cmd, ch: defer.Deferred(),  # long poll that never returns
            RequestCode.LOCK_BATCH_MQ: self._lock,
            RequestCode.UNLOCK_BATCH_MQ: ok,
        })

    def _heartbeat(self, cmd, ch):
        data = HeartbeatData.decode(cmd.body)
        if data.consumer_data_set and data.client_id not in self.consumer_ids:
            self.consumer_ids.append(data.client_id)
        return cmd.response(ResponseCode.SUCCESS, None, {})

    @staticmethod
    def _key(cmd) -> tuple:
        return cmd.ext("consumerGroup"), cmd.ext("topic"), int(cmd.ext("queueId"))

    def _update_offset(self, cmd, ch):
        self.offsets[self._key(cmd)] = int(cmd.ext("commitOffset"))
        return cmd.response(ResponseCode.SUCCESS, None, {})

    def _query_offset(self, cmd, ch):
        off = self.offsets.get(self._key(cmd))
        if off is None:  # a young queue: Apache answers 0 rather than "not found"
            return cmd.response(ResponseCode.SUCCESS, None, {"offset": "0"})
        return cmd.response(ResponseCode.SUCCESS, None, {"offset": str(off)})

    def _consumer_list(self, cmd, ch):
        return cmd.response(ResponseCode.SUCCESS, None, None,
                            GetConsumerListByGroupResponseBody(list(self.consumer_ids)).encode())

    def _lock(self, cmd, ch):
        return cmd.response(ResponseCode.SUCCESS, None, None, cmd.body.replace(b'"mqSet"', b'"lockOKMQSet"'))

    def _send(self, cmd, ch):
        header: SendMessageRequestHeader = decode_request_header(cmd)
        if self.send_code not in (0, 10, 11, 12):
            return cmd.response(self.send_code, f"fake {self.name} refuses")
        self.offset += 1
        ext = {"msgId": "7F00000100002A9F%016X" % self.offset, "queueId": str(header.queue_id),
               "queueOffset": str(self.offset - 1), "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}
        return cmd.response(self.send_code, None, ext)


class FakeNamesrv(FakeServer):
    def __init__(self):
        super().__init__("namesrv")
        self.routes: dict[str, TopicRouteData] = {}
        self.handlers[RequestCode.GET_ROUTEINFO_BY_TOPIC] = self._route

    def _route(self, cmd, ch):
        topic = cmd.ext("topic")
        route = self.routes.get(topic)
        if route is None:
            return cmd.response(ResponseCode.TOPIC_NOT_EXIST, f"No topic route info in name server for the topic: {topic}")
        return cmd.response(ResponseCode.SUCCESS, None, None, route.encode())

    def set_route(self, topic: str, brokers: list[FakeBroker], queues: int = 2, perm: int = 6) -> None:
        self.routes[topic] = TopicRouteData(
            queue_datas=[QueueData(b.name, queues, queues, perm) for b in brokers],
            broker_datas=[BrokerData("FakeCluster", b.name, {0: b.addr}) for b in brokers],
        )
