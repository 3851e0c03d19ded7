"""Name-server bodies: broker registration, topic routes, cluster info, KV tables, topic lists."""

from __future__ import annotations

import struct
import time
import zlib
from dataclasses import dataclass, field
from typing import Any

from .. import fastjson
from ..errors import BodyError
from .model import body


def _now_ms() -> int:
    return int(time.time() * 1000)


@body
@dataclass(slots=True)
class DataVersion:
    """Version stamp of a broker's topic (or group) table; the name server compares it to skip re-reads."""

    counter: int = 0
    state_version: int = 0
    timestamp: int = field(default_factory=_now_ms)


# Apache's TopicConfig defaults (readQueueNums/writeQueueNums 16, perm RW).
DEFAULT_QUEUE_NUMS = 16


@body
@dataclass(slots=True)
class TopicConfig:
    topic_name: str | None = None
    read_queue_nums: int = DEFAULT_QUEUE_NUMS
    write_queue_nums: int = DEFAULT_QUEUE_NUMS
    perm: int = 6
    topic_filter_type: str = "SINGLE_TAG"
    topic_sys_flag: int = 0
    order: bool = False
    attributes: dict[str, str] = field(default_factory=dict)

    def to_text(self) -> str:
        """The space-separated form the compressed REGISTER_BROKER body carries for each topic:
        ``name read write perm filterType attributesJson`` (sysFlag and order are not carried)."""
        head = f"{self.topic_name} {self.read_queue_nums} {self.write_queue_nums} {self.perm} {self.topic_filter_type} "
        if self.attributes is None:
            return head
        return head + fastjson.dumps(self.attributes).decode()

    @classmethod
    def from_text(cls, text: str) -> "TopicConfig":
        parts = text.split(" ")
        if len(parts) < 5:
            raise BodyError(f"topic config text {text!r} has {len(parts)} space-separated parts, expected at least 5")
        try:
            config = cls(parts[0], int(parts[1]), int(parts[2]), int(parts[3]), parts[4])
        except ValueError:
            raise BodyError(f"topic config text {text!r}: queue numbers and perm must be integers") from None
        if len(parts) >= 6 and parts[5]:
            try:  # Java ignores unreadable attributes too (values may contain spaces)
                attributes = fastjson.loads(" ".join(parts[5:]))
                if isinstance(attributes, dict):
                    config.attributes = {str(k): str(v) for k, v in attributes.items()}
            except BodyError:
                pass
        return config


@body
@dataclass(slots=True)
class TopicConfigSerializeWrapper:
    """A broker's topic table; 5.x brokers add the static-topic mapping members (kept as raw JSON)."""

    topic_config_table: dict[str, TopicConfig] = field(default_factory=dict)
    data_version: DataVersion = field(default_factory=DataVersion)
    topic_queue_mapping_info_map: dict[str, Any] | None = None
    topic_queue_mapping_detail_map: dict[str, Any] | None = None
    mapping_data_version: DataVersion | None = None


_I32 = struct.Struct(">i")


@body
@dataclass(slots=True)
class RegisterBrokerBody:
    """REGISTER_BROKER body: JSON, or (header ``compressed=true``) the zlib binary form of bodies.md §9."""

    topic_config_serialize_wrapper: TopicConfigSerializeWrapper = field(default_factory=TopicConfigSerializeWrapper)
    filter_server_list: list[str] = field(default_factory=list)

    def encode(self, standard_json: bool = True, *, compressed: bool = False) -> bytes:
        if not compressed:
            return fastjson.dumps(self.to_json(), quote_int_keys=standard_json)
        wrapper = self.topic_config_serialize_wrapper
        parts: list[bytes] = []

        def put(blob: bytes) -> None:
            parts.append(_I32.pack(len(blob)))
            parts.append(blob)

        put(wrapper.data_version.encode())
        parts.append(_I32.pack(len(wrapper.topic_config_table)))
        for config in wrapper.topic_config_table.values():
            put(config.to_text().encode())
        put(fastjson.dumps(self.filter_server_list))
        mappings = wrapper.topic_queue_mapping_info_map or {}
        parts.append(_I32.pack(len(mappings)))
        for info in mappings.values():
            put(fastjson.dumps(info))
        return zlib.compress(b"".join(parts), 9)

    @classmethod
    def decode(cls, data: bytes, compressed: bool = False) -> "RegisterBrokerBody":
        if not compressed:
            if not data:
                raise BodyError("RegisterBrokerBody body is empty")
            return cls.from_json(fastjson.loads(data))
        try:
            raw = zlib.decompress(data)
        except zlib.error as exc:
            raise BodyError(f"compressed RegisterBrokerBody is not a zlib stream: {exc}") from None
        reader = _Reader(raw)
        try:
            data_version = DataVersion.decode(reader.blob())
            table: dict[str, TopicConfig] = {}
            for _ in range(reader.int32()):
                config = TopicConfig.from_text(reader.blob().decode())
                table[config.topic_name] = config
            filters = fastjson.loads(reader.blob())
            mappings = None
            if reader.remaining():  # brokers >= 5.0 append the static-topic mappings
                mappings = {}
                for _ in range(reader.int32()):
                    info = fastjson.loads(reader.blob())
                    mappings[info.get("topic") if isinstance(info, dict) else str(len(mappings))] = info
        except (struct.error, UnicodeDecodeError) as exc:
            raise BodyError(f"compressed RegisterBrokerBody is truncated or garbled: {exc}") from None
        if not isinstance(filters, list):
            raise BodyError("compressed RegisterBrokerBody: filter server list should be a JSON array")
        wrapper = TopicConfigSerializeWrapper(table, data_version, topic_queue_mapping_info_map=mappings or None)
        return cls(wrapper, [str(f) for f in filters])


class _Reader:
    __slots__ = ("data", "pos")

    def __init__(self, data: bytes):
        self.data = data
        self.pos = 0

    def remaining(self) -> int:
        return len(self.data) - self.pos

    def int32(self) -> int:
        (value,) = _I32.unpack_from(self.data, self.pos)
        self.pos += 4
        return value

    def blob(self) -> bytes:
        size = self.int32()
        if size < 0 or size > self.remaining():
            raise BodyError(f"compressed RegisterBrokerBody: length {size} at byte {self.pos - 4} overruns the data")
        blob = self.data[self.pos : self.pos + size]
        self.pos += size
        return blob


@body
@dataclass(slots=True)
class QueueData:
    broker_name: str | None = None
    read_queue_nums: int = 0
    write_queue_nums: int = 0
    perm: int = 0
    topic_sys_flag: int = 0


@body
@dataclass(slots=True)
class BrokerData:
    cluster: str | None = None
    broker_name: str | None = None
    broker_addrs: dict[int, str] = field(default_factory=dict)
    enable_acting_master: bool = False
    zone_name: str | None = None


@body
@dataclass(slots=True)
class TopicRouteData:
    """GET_ROUTEINFO_BY_TOPIC answer. ``encode(standard_json=False)`` is the legacy form (bare broker
    ids) for requesters older than 4.0.1 (Go sends 317); both forms are compact, as Go's hand parser needs."""

    queue_datas: list[QueueData] = field(default_factory=list)
    broker_datas: list[BrokerData] = field(default_factory=list)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)
    order_topic_conf: str | None = None
    topic_queue_mapping_by_broker: dict[str, Any] | None = None


@body
@dataclass(slots=True)
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData] = field(default_factory=dict)
    cluster_addr_table: dict[str, list[str]] = field(default_factory=dict)


@body
@dataclass(slots=True)
class KVTable:
    table: dict[str, str] = field(default_factory=dict)


@body
@dataclass(slots=True)
class TopicList:
    topic_list: list[str] = field(default_factory=list)
    broker_addr: str | None = None
