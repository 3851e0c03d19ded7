"""The few admin requests a test needs (cluster info, topic routes, create a topic or a group, a group's
offset), blocking, on a plain socket.

It runs on ``ferrymq.wire`` alone so that a user's test process gets no Twisted reactor from the fixture:
their code under test may run its own event loop, or none.
"""

from __future__ import annotations

import socket
import ssl
import time

from ferrymq.wire.bodies import ClusterInfo, SubscriptionGroupConfig, TopicRouteData
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.frame import FrameDecoder, encode
from ferrymq.wire.headers import CreateTopicRequestHeader, GetRouteInfoRequestHeader, QueryConsumerOffsetRequestHeader
from ferrymq.wire.requests import decode_response_header, encode_request_header

#: read and write permission (Apache's PermName.PERM_READ | PERM_WRITE)
PERM_READ_WRITE = 6


class AdminError(RuntimeError):
    """The server answered a request with an error code."""

    def __init__(self, code: int, remark: str | None, what: str):
        super().__init__(f"{what}: code {code} ({remark or 'no remark'})")
        self.code = code


#: how a call connects: plain (False), over TLS without checking the server's certificate (True: a test
#: server's is self-signed), or over TLS with this context (one presenting a client certificate, say)
Tls = bool | ssl.SSLContext


def call(addr: str, cmd: RemotingCommand, timeout: float = 5.0, tls: Tls = False) -> RemotingCommand:
    """Send ``cmd`` on a new connection to ``addr`` (``host:port``) and return the answer."""
    host, _, port = addr.rpartition(":")
    deadline = time.monotonic() + timeout
    decoder = FrameDecoder()
    plain = socket.create_connection((host, int(port)), timeout=timeout)
    context = tls if isinstance(tls, ssl.SSLContext) else ssl._create_unverified_context() if tls else None
    with context.wrap_socket(plain) if context is not None else plain as sock:
        sock.sendall(encode(cmd))
        while True:
            sock.settimeout(max(0.001, deadline - time.monotonic()))
            data = sock.recv(65536)
            if not data:
                raise ConnectionError(f"{addr} closed the connection before answering request {cmd.code}")
            for got in decoder.feed(data):
                if got.is_response and got.opaque == cmd.opaque:
                    return got


def _checked(answer: RemotingCommand, what: str) -> RemotingCommand:
    if answer.code != ResponseCode.SUCCESS:
        raise AdminError(answer.code, answer.remark, what)
    return answer


def cluster_info(namesrv_addr: str, timeout: float = 5.0, tls: Tls = False) -> ClusterInfo:
    answer = call(namesrv_addr, request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout, tls)
    return ClusterInfo.decode(_checked(answer, "cluster info").body)


def route(namesrv_addr: str, topic: str, tls: Tls = False) -> TopicRouteData | None:
    """The topic's route, or None while the name server knows no route for it."""
    code = RequestCode.GET_ROUTEINFO_BY_TOPIC
    answer = call(namesrv_addr, request(code, encode_request_header(code, GetRouteInfoRequestHeader(topic))),
                  tls=tls)
    if answer.code == ResponseCode.TOPIC_NOT_EXIST:
        return None
    return TopicRouteData.decode(_checked(answer, f"route of {topic}").body)


def create_topic(broker_addr: str, topic: str, queues: int, *, order: bool = False, tls: Tls = False) -> None:
    code = RequestCode.UPDATE_AND_CREATE_TOPIC
    header = CreateTopicRequestHeader(topic=topic, default_topic="TBW102", read_queue_nums=queues,
                                      write_queue_nums=queues, perm=PERM_READ_WRITE,
                                      topic_filter_type="SINGLE_TAG", order=order, topic_sys_flag=0)
    _checked(call(broker_addr, request(code, encode_request_header(code, header)), tls=tls), f"create topic {topic}")


def create_group(broker_addr: str, config: SubscriptionGroupConfig, tls: Tls = False) -> None:
    cmd = request(RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, None, config.encode())
    _checked(call(broker_addr, cmd, tls=tls), f"create group {config.group_name}")



def consumer_offset(broker_addr: str, group: str, topic: str, queue_id: int) -> int | None:
    """The offset ``group`` committed for one queue, or None while it has committed none."""
    code = RequestCode.QUERY_CONSUMER_OFFSET
    header = QueryConsumerOffsetRequestHeader(consumer_group=group, topic=topic, queue_id=queue_id)
    answer = call(broker_addr, request(code, encode_request_header(code, header)))
    if answer.code == ResponseCode.QUERY_NOT_FOUND:
        return None
    return decode_response_header(code, _checked(answer, f"offset of {group} on {topic}:{queue_id}")).offset
