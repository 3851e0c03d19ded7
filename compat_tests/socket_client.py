"""A tiny blocking remoting client and a fake broker endpoint, on plain sockets and ``wire.frame``.

The compat tests use these to talk to a name server through the protocol itself (REGISTER_BROKER and
friends), independent of FerryMQ's own transport and SDK, so the same test drives Apache's name server
and FerryMQ's. Requests are written as the Java broker writes them (JSON header, fastjson field order).
"""

from __future__ import annotations

import socket
import ssl
import threading
import time
import zlib
from dataclasses import dataclass, field

import orjson

from ferrymq.wire.codes import LanguageCode, RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand, request
from ferrymq.wire.frame import FrameDecoder, encode


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host, int(port)


class Connection:
    """One TCP connection; ``call`` sends a request and waits for the response with its opaque.

    Keep it open for as long as a registration should live: Apache's name server forgets a broker the
    moment the channel that registered it closes.
    """

    def __init__(self, addr: str, timeout: float = 5.0, tls: bool | ssl.SSLContext = False):
        """``tls``: speak TLS (Python's ``ssl``, not checking the server's certificate, as Apache's clients
        in test mode), or with this context (one presenting a client certificate, say)."""
        self.addr = addr
        self.sock = socket.create_connection(split_addr(addr), timeout=timeout)
        if tls:
            context = tls if isinstance(tls, ssl.SSLContext) else ssl._create_unverified_context()
            self.sock = context.wrap_socket(self.sock)
        self.decoder = FrameDecoder()
        self.pending: list[RemotingCommand] = []

    def call(self, cmd: RemotingCommand, timeout: float = 5.0) -> RemotingCommand:
        self.sock.sendall(encode(cmd))
        deadline = time.monotonic() + timeout
        while True:
            for i, got in enumerate(self.pending):
                if got.is_response and got.opaque == cmd.opaque:
                    return self.pending.pop(i)
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no response to request code {cmd.code} from {self.addr} within {timeout}s")
            self.sock.settimeout(remaining)
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError(f"{self.addr} closed the connection before answering code {cmd.code}")
            self.pending.extend(self.decoder.feed(data))

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> "Connection":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def call(addr: str, cmd: RemotingCommand, timeout: float = 5.0,
         tls: bool | ssl.SSLContext = False) -> RemotingCommand:
    with Connection(addr, timeout, tls) as conn:
        return conn.call(cmd, timeout)


def java_crc32(data: bytes) -> int:
    """UtilAll.crc32 as the broker computes ``bodyCrc32``: CRC32 masked to a non-negative int."""
    return zlib.crc32(data) & 0x7FFFFFFF


@dataclass(frozen=True)
class TopicSpec:
    name: str
    read_queue_nums: int = 4
    write_queue_nums: int = 4
    perm: int = 6


def register_broker_body(topics: list[TopicSpec], counter: int = 1) -> bytes:
    """A RegisterBrokerBody as the Java broker writes it uncompressed (fastjson: alphabetical keys)."""
    table = {
        t.name: {
            "attributes": {},
            "order": False,
            "perm": t.perm,
            "readQueueNums": t.read_queue_nums,
            "topicFilterType": "SINGLE_TAG",
            "topicName": t.name,
            "topicSysFlag": 0,
            "writeQueueNums": t.write_queue_nums,
        }
        for t in topics
    }
    body = {
        "filterServerList": [],
        "topicConfigSerializeWrapper": {
            "dataVersion": {"counter": counter, "stateVersion": 0, "timestamp": int(time.time() * 1000)},
            "topicConfigTable": table,
        },
    }
    return orjson.dumps(body)


def register_broker_request(
    cluster: str, broker_name: str, broker_addr: str, topics: list[TopicSpec], broker_id: int = 0
) -> RemotingCommand:
    body = register_broker_body(topics)
    host, port = split_addr(broker_addr)
    return request(
        RequestCode.REGISTER_BROKER,
        {
            "brokerAddr": broker_addr,
            "brokerId": str(broker_id),
            "brokerName": broker_name,
            "bodyCrc32": str(java_crc32(body)),
            "clusterName": cluster,
            "compressed": "false",
            "enableActingMaster": "false",
            "haServerAddr": f"{host}:{port + 1}",
            "heartbeatTimeoutMillis": "120000",
        },
        body,
        language=LanguageCode.JAVA,
    )


@dataclass
class FakeBroker:
    """A loopback endpoint answering what mqadmin asks a broker while listing a cluster.

    GET_BROKER_RUNTIME_INFO (28) gets a KVTable with the keys ``mqadmin clusterList`` parses; every
    other code gets REQUEST_CODE_NOT_SUPPORTED. ``seen`` records the request codes received.
    """

    version_desc: str = "V5_5_0"
    seen: list[int] = field(default_factory=list)
    _server: socket.socket | None = None
    _threads: list[threading.Thread] = field(default_factory=list)
    _stopped: threading.Event = field(default_factory=threading.Event)

    def start(self) -> "FakeBroker":
        self._server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._server.bind(("127.0.0.1", 0))
        self._server.listen(8)
        self._server.settimeout(0.2)
        t = threading.Thread(target=self._accept_loop, name="fake-broker-accept", daemon=True)
        t.start()
        self._threads.append(t)
        return self

    @property
    def addr(self) -> str:
        host, port = self._server.getsockname()
        return f"{host}:{port}"

    def runtime_info(self) -> dict[str, str]:
        now = int(time.time() * 1000)
        return {
            "brokerVersionDesc": self.version_desc,
            "brokerVersion": "0",
            "brokerActive": "true",
            "bootTimestamp": str(now - 60_000),
            "msgPutTotalYesterdayMorning": "0",
            "msgPutTotalTodayMorning": "0",
            "msgPutTotalTodayNow": "7",
            "msgGetTotalYesterdayMorning": "0",
            "msgGetTotalTodayMorning": "0",
            "msgGetTotalTodayNow": "3",
            "putTps": "1.5 1.0 0.5",
            "getTransferredTps": "0.5 0.25 0.1",
            # rocketmq-tools 4.9.x reads the misspelled key and throws if it is missing.
            "getTransferedTps": "0.5 0.25 0.1",
            "getFoundTps": "0.0 0.0 0.0",
            "getMissTps": "0.0 0.0 0.0",
            "getTotalTps": "0.0 0.0 0.0",
            "sendThreadPoolQueueSize": "0",
            "pullThreadPoolQueueSize": "0",
            "sendThreadPoolQueueHeadWaitTimeMills": "0",
            "pullThreadPoolQueueHeadWaitTimeMills": "0",
            "pageCacheLockTimeMills": "0",
            "earliestMessageTimeStamp": str(now - 3_600_000),
            "commitLogDiskRatio": "0.25",
            "commitLogMinOffset": "0",
            "commitLogMaxOffset": "1024",
            "dispatchBehindBytes": "0",
        }

    def _accept_loop(self) -> None:
        while not self._stopped.is_set():
            try:
                conn, _ = self._server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            t = threading.Thread(target=self._serve, args=(conn,), name="fake-broker-conn", daemon=True)
            t.start()
            self._threads.append(t)

    def _serve(self, conn: socket.socket) -> None:
        decoder = FrameDecoder()
        conn.settimeout(0.2)
        with conn:
            while not self._stopped.is_set():
                try:
                    data = conn.recv(65536)
                except TimeoutError:
                    continue
                except OSError:
                    return
                if not data:
                    return
                for cmd in decoder.feed(data):
                    if cmd.is_response:
                        continue
                    self.seen.append(cmd.code)
                    if cmd.is_oneway:
                        continue
                    if cmd.code == RequestCode.GET_BROKER_RUNTIME_INFO:
                        reply = cmd.response(body=orjson.dumps({"table": self.runtime_info()}))
                    else:
                        reply = cmd.response(ResponseCode.REQUEST_CODE_NOT_SUPPORTED,
                                             f" request type {cmd.code} not supported")
                    conn.sendall(encode(reply))

    def stop(self) -> None:
        self._stopped.set()
        if self._server is not None:
            self._server.close()
        for t in self._threads:
            t.join(timeout=2)
