"""The message record: one layout for a commit-log entry, a pull-response element and a viewed message.

Layout (big-endian; see shared/protocol/message.md §1)::

    TOTALSIZE i32 | MAGICCODE u32 | BODYCRC i32 | QUEUEID i32 | FLAG i32 | QUEUEOFFSET i64 |
    PHYSICALOFFSET i64 | SYSFLAG i32 | BORNTIMESTAMP i64 | BORNHOST 4|16 + port i32 |
    STORETIMESTAMP i64 | STOREHOST 4|16 + port i32 | RECONSUMETIMES i32 | PREPAREDTXOFFSET i64 |
    BODYLEN i32 + BODY | TOPICLEN (u8 in V1, i16 in V2) + TOPIC | PROPLEN i16 + PROPERTIES

Two codecs describe it: :data:`RECORD` (``construct``, the readable specification) and the
precompiled ``struct`` codec used on hot paths (:func:`encode_record`, :func:`decode_record`,
:func:`peek_record`, :func:`record_parts` + :func:`write_record`, :func:`build_record` +
:func:`patch_record`). Tests hold them byte-for-byte equal, and re-encode records stored by Apache
RocketMQ to the same bytes.

The store's append path never builds a :class:`MessageExt` or an intermediate buffer: it computes
:func:`record_parts` from the send header's fields, learns where the record goes, and
:func:`write_record` encodes it straight into the commit log's mapping with QUEUEOFFSET,
PHYSICALOFFSET and STORETIMESTAMP already known. :func:`build_record` + :func:`patch_record` serve
callers that need the bytes first and the position later.
"""

from __future__ import annotations

import functools
import ipaddress
import socket
import struct
import zlib
from dataclasses import dataclass, field
from typing import Iterator, NamedTuple

import construct as c

from . import native
from .errors import BodyError

_crc = native.load("ferrymq.wire._crc")  # zlib's CRC-32, folded with PCLMULQDQ
_crc32 = zlib.crc32 if _crc is None else _crc.crc32

# ---------------------------------------------------------------------------------------------
# Magic codes, sizes, field positions
# ---------------------------------------------------------------------------------------------

MAGIC_V1 = 0xDAA320A7  #: 1-byte topic length; what every client can read
MAGIC_V2 = 0xDAA320AB  #: 2-byte topic length; Java only (Go ignores the magic and misreads it)
BLANK_MAGIC = 0xCBD43194  #: end-of-segment marker in the commit log: ``int32 remaining | BLANK_MAGIC``

#: Apache ``autoMessageVersionOnTopicLen``: V2 only for topics whose UTF-8 form exceeds this.
V1_MAX_TOPIC_LEN = 127
MAX_PROPERTIES_LEN = 32767  #: PROPLEN is a signed int16
#: Apache ``maxMessageSize`` default: the largest record the broker stores.
DEFAULT_MAX_MESSAGE_SIZE = 4 * 1024 * 1024

# Byte positions the store patches at append time (identical for every host family: they precede
# BORNHOST). STORETIMESTAMP follows BORNHOST, so its position depends on the BORNHOST_V6 bit.
POS_TOTALSIZE = 0
POS_MAGIC = 4
POS_BODYCRC = 8
POS_QUEUEID = 12
POS_QUEUEOFFSET = 20
POS_PHYSICALOFFSET = 28
POS_SYSFLAG = 36
POS_BORNHOST = 48
POS_STORETIMESTAMP_V4 = 56
POS_STORETIMESTAMP_V6 = 68


class RecordError(BodyError):
    """A record cannot be read at ``offset`` (bad magic, bad length, truncated)."""

    def __init__(self, message: str, offset: int, decoded: list | None = None):
        super().__init__(f"{message} at byte offset {offset}")
        self.reason = message  #: the message without the offset
        self.offset = offset
        #: records successfully decoded before the bad one (for :func:`decode_records`)
        self.decoded = decoded if decoded is not None else []


# ---------------------------------------------------------------------------------------------
# System flag bits and property names
# ---------------------------------------------------------------------------------------------


class MessageSysFlag:
    """Bits of SYSFLAG (Apache ``MessageSysFlag``)."""

    COMPRESSED_FLAG = 0x1
    MULTI_TAGS_FLAG = 0x2
    TRANSACTION_NOT_TYPE = 0x0
    TRANSACTION_PREPARED_TYPE = 0x4
    TRANSACTION_COMMIT_TYPE = 0x8
    TRANSACTION_ROLLBACK_TYPE = 0xC
    TRANSACTION_MASK = 0xC
    BORNHOST_V6_FLAG = 0x10
    STOREHOSTADDRESS_V6_FLAG = 0x20
    NEED_UNWRAP_FLAG = 0x40
    INNER_BATCH_FLAG = 0x80
    COMPRESSION_TYPE_MASK = 0x700
    COMPRESSION_TYPE_SHIFT = 8
    COMPRESSION_LZ4 = 0x100
    COMPRESSION_ZSTD = 0x200
    COMPRESSION_ZLIB = 0x300

    @staticmethod
    def transaction_type(sys_flag: int) -> int:
        return sys_flag & 0xC


class MessageConst:
    """Property names (Apache ``MessageConst``); the string is what travels on the wire."""

    KEYS = "KEYS"
    TAGS = "TAGS"
    WAIT_STORE_MSG_OK = "WAIT"
    DELAY_TIME_LEVEL = "DELAY"
    RETRY_TOPIC = "RETRY_TOPIC"
    REAL_TOPIC = "REAL_TOPIC"
    REAL_QUEUE_ID = "REAL_QID"
    TRANSACTION_PREPARED = "TRAN_MSG"
    PRODUCER_GROUP = "PGROUP"
    MIN_OFFSET = "MIN_OFFSET"
    MAX_OFFSET = "MAX_OFFSET"
    BUYER_ID = "BUYER_ID"
    ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
    TRANSFER_FLAG = "TRANSFER_FLAG"
    CORRECTION_FLAG = "CORRECTION_FLAG"
    MQ2_FLAG = "MQ2_FLAG"
    RECONSUME_TIME = "RECONSUME_TIME"
    MSG_REGION = "MSG_REGION"
    TRACE_SWITCH = "TRACE_ON"
    UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
    UNIQ_KEY = "UNIQ_KEY"  # short alias
    EXTEND_UNIQ_INFO = "EXTEND_UNIQ_INFO"
    MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
    CONSUME_START_TIMESTAMP = "CONSUME_START_TIME"
    INNER_NUM = "INNER_NUM"
    INNER_BASE = "INNER_BASE"
    DUP_INFO = "DUP_INFO"
    CHECK_IMMUNITY_TIME_IN_SECONDS = "CHECK_IMMUNITY_TIME_IN_SECONDS"
    TRANSACTION_PREPARED_QUEUE_OFFSET = "TRAN_PREPARED_QUEUE_OFFSET"
    TRANSACTION_ID = "__transactionId__"
    TRANSACTION_CHECK_TIMES = "TRANSACTION_CHECK_TIMES"
    INSTANCE_ID = "INSTANCE_ID"
    CORRELATION_ID = "CORRELATION_ID"
    MESSAGE_REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
    MESSAGE_TTL = "TTL"
    REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
    PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
    CLUSTER = "CLUSTER"
    MESSAGE_TYPE = "MSG_TYPE"
    POP_CK = "POP_CK"
    POP_CK_OFFSET = "POP_CK_OFFSET"
    FIRST_POP_TIME = "1ST_POP_TIME"
    SHARDING_KEY = "__SHARDINGKEY"
    SHARDING_KEY_GO = "SHARDING_KEY"  # what the Go client sets instead
    FORWARD_QUEUE_ID = "PROPERTY_FORWARD_QUEUE_ID"
    REDIRECT = "REDIRECT"
    INNER_MULTI_DISPATCH = "INNER_MULTI_DISPATCH"
    INNER_MULTI_QUEUE_OFFSET = "INNER_MULTI_QUEUE_OFFSET"
    TRACE_CONTEXT = "TRACE_CONTEXT"
    TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
    TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
    TIMER_DELAY_MS = "TIMER_DELAY_MS"
    TIMER_ENQUEUE_MS = "TIMER_ENQUEUE_MS"
    TIMER_DEQUEUE_MS = "TIMER_DEQUEUE_MS"
    TIMER_ROLL_TIMES = "TIMER_ROLL_TIMES"
    TIMER_OUT_MS = "TIMER_OUT_MS"
    TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
    TIMER_DELAY_LEVEL = "TIMER_DELAY_LEVEL"
    BORN_HOST = "__BORNHOST"
    BORN_TIMESTAMP = "BORN_TIMESTAMP"
    TRANSIENT_PREFIX = "__RMQ.TRANSIENT."
    TRANSIENT_TOPIC_CONFIG = "__RMQ.TRANSIENT.TOPIC_SYS_FLAG"
    TRANSIENT_GROUP_CONFIG = "__RMQ.TRANSIENT.GROUP_SYS_FLAG"
    CRC32 = "__CRC32#"
    DLQ_ORIGIN_TOPIC = "DLQ_ORIGIN_TOPIC"
    DLQ_ORIGIN_MESSAGE_ID = "DLQ_ORIGIN_MESSAGE_ID"
    START_DELIVER_TIME = "__STARTDELIVERTIME"

    KEY_SEPARATOR = " "


#: Every property name the broker and the clients use themselves (Java's ``MessageConst.STRING_HASH_SET``,
#: and more): what is left of a message's properties are its user properties.
SYSTEM_PROPERTIES = frozenset(v for k, v in vars(MessageConst).items() if k.isupper() and isinstance(v, str))

#: The property names Java's ``MessageConst.STRING_HASH_SET`` holds: Apache's gRPC proxy refuses them as a
#: sent message's user properties and leaves them out of a received one's. The other names the broker
#: uses (``__SHARDINGKEY``, ``__transactionId__``, ``TRACE_CONTEXT``, ...) are user properties to it.
RESERVED_PROPERTIES = frozenset({
    MessageConst.TRACE_SWITCH, MessageConst.MSG_REGION, MessageConst.KEYS, MessageConst.TAGS,
    MessageConst.WAIT_STORE_MSG_OK, MessageConst.DELAY_TIME_LEVEL, MessageConst.RETRY_TOPIC, MessageConst.REAL_TOPIC,
    MessageConst.REAL_QUEUE_ID, MessageConst.TRANSACTION_PREPARED, MessageConst.PRODUCER_GROUP,
    MessageConst.MIN_OFFSET, MessageConst.MAX_OFFSET, MessageConst.BUYER_ID, MessageConst.ORIGIN_MESSAGE_ID,
    MessageConst.TRANSFER_FLAG, MessageConst.CORRECTION_FLAG, MessageConst.MQ2_FLAG, MessageConst.RECONSUME_TIME,
    MessageConst.UNIQ_KEY, MessageConst.MAX_RECONSUME_TIMES, MessageConst.CONSUME_START_TIMESTAMP,
    MessageConst.POP_CK, MessageConst.POP_CK_OFFSET, MessageConst.FIRST_POP_TIME,
    MessageConst.TRANSACTION_PREPARED_QUEUE_OFFSET, MessageConst.DUP_INFO, MessageConst.EXTEND_UNIQ_INFO,
    MessageConst.INSTANCE_ID, MessageConst.CORRELATION_ID, MessageConst.MESSAGE_REPLY_TO_CLIENT,
    MessageConst.MESSAGE_TTL, MessageConst.REPLY_MESSAGE_ARRIVE_TIME, MessageConst.PUSH_REPLY_TIME,
    MessageConst.CLUSTER, MessageConst.MESSAGE_TYPE, MessageConst.INNER_MULTI_QUEUE_OFFSET,
    MessageConst.TIMER_DELAY_MS, MessageConst.TIMER_DELAY_SEC, MessageConst.TIMER_DELIVER_MS,
    MessageConst.TIMER_ENQUEUE_MS, MessageConst.TIMER_DEQUEUE_MS, MessageConst.TIMER_ROLL_TIMES,
    MessageConst.TIMER_OUT_MS, MessageConst.TIMER_DEL_UNIQKEY, MessageConst.TIMER_DELAY_LEVEL,
    MessageConst.BORN_HOST, MessageConst.BORN_TIMESTAMP, MessageConst.DLQ_ORIGIN_TOPIC,
    MessageConst.DLQ_ORIGIN_MESSAGE_ID, MessageConst.CRC32,
})


# ---------------------------------------------------------------------------------------------
# Properties string
# ---------------------------------------------------------------------------------------------

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"


def encode_properties(props: dict[str, str] | None) -> str:
    """``key\\x01value\\x02`` for every pair, as Java writes it (pairs with a ``None`` value skipped)."""
    if not props:
        return ""
    return "".join(f"{k}\x01{v}\x02" for k, v in props.items() if v is not None)


def decode_properties(text: str) -> dict[str, str]:
    """Read a properties string the way the Java client does (lenient, what consumers will see).

    Segments are split on 0x02; within one, the key runs to the first 0x01 and the value is the rest
    (it may contain 0x01). A segment with an empty key or an empty value, or no 0x01, is silently
    dropped, as Java's ``string2messageProperties`` does; a later duplicate key wins. Go keeps empty
    values; use :func:`decode_properties_go` to see what a Go consumer sees.
    """
    props: dict[str, str] = {}
    if not text:
        return props
    for seg in text.split("\x02"):
        sep = seg.find("\x01")
        if sep >= 1 and sep < len(seg) - 1:
            props[seg[:sep]] = seg[sep + 1 :]
    return props


def decode_properties_go(text: str) -> dict[str, str]:
    """The Go client's reading: split on 0x02 then 0x01; keep pairs of exactly two parts."""
    props: dict[str, str] = {}
    for seg in text.split("\x02"):
        parts = seg.split("\x01")
        if len(parts) == 2:
            props[parts[0]] = parts[1]
    return props


# ---------------------------------------------------------------------------------------------
# Hashes, CRC, compression
# ---------------------------------------------------------------------------------------------


def java_string_hash(s: str) -> int:
    """Java ``String.hashCode``: ``h = 31*h + c`` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    if s.isascii():
        for ch in s.encode("ascii"):
            h = (31 * h + ch) & 0xFFFFFFFF
    else:
        data = s.encode("utf-16-be")
        for (cu,) in struct.iter_unpack(">H", data):
            h = (31 * h + cu) & 0xFFFFFFFF
    return h - 0x100000000 if h & 0x80000000 else h


@functools.lru_cache(maxsize=4096)
def tags_code(tags: str | None) -> int:
    """The consume-queue tag code of a TAGS value: its Java hash, 0 when absent or empty."""
    return java_string_hash(tags) if tags else 0


def body_crc(body: bytes | bytearray | memoryview) -> int:
    """BODYCRC: ``CRC32 & 0x7FFFFFFF`` (java.util.zip.CRC32 is zlib's CRC-32)."""
    return _crc32(body) & 0x7FFFFFFF


def compress_body(body: bytes, level: int = 5) -> tuple[bytes, int]:
    """zlib-compress ``body`` as the Java producer does; returns (compressed, SYSFLAG bits to OR in)."""
    return zlib.compress(body, level), MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB


def decompress_body(body: bytes, sys_flag: int) -> bytes:
    """Inflate a body whose SYSFLAG has COMPRESSED_FLAG, by the compression-type bits.

    Type 0 means zlib too (old clients set no type). LZ4 (frame format) and ZSTD need the optional
    ``lz4`` / ``zstandard`` packages; a clear error says which is missing.
    """
    if not sys_flag & MessageSysFlag.COMPRESSED_FLAG:
        return body
    ctype = sys_flag & MessageSysFlag.COMPRESSION_TYPE_MASK
    if ctype in (0, MessageSysFlag.COMPRESSION_ZLIB):
        return zlib.decompress(body)
    if ctype == MessageSysFlag.COMPRESSION_LZ4:
        try:
            import lz4.frame  # type: ignore[import-not-found]
        except ImportError:
            raise BodyError("body is LZ4-compressed; install the 'lz4' package to inflate it") from None
        return lz4.frame.decompress(body)
    if ctype == MessageSysFlag.COMPRESSION_ZSTD:
        try:
            import zstandard  # type: ignore[import-not-found]
        except ImportError:
            raise BodyError("body is ZSTD-compressed; install the 'zstandard' package to inflate it") from None
        return zstandard.ZstdDecompressor().decompressobj().decompress(body)
    raise BodyError(f"unknown compression type {ctype >> 8} in SYSFLAG 0x{sys_flag:x}")


# ---------------------------------------------------------------------------------------------
# Hosts
# ---------------------------------------------------------------------------------------------

Host = tuple[str, int]  #: (ip text, port)


@functools.lru_cache(maxsize=1024)
def pack_host(host: Host) -> bytes:
    """``ip bytes (4 or 16) | int32 port``; cached because a connection reuses its address."""
    ip, port = host
    try:
        raw = socket.inet_pton(socket.AF_INET, ip)
    except OSError:
        try:
            raw = ipaddress.IPv6Address(ip.split("%", 1)[0]).packed
        except ValueError:
            raise ValueError(f"host address {ip!r} is neither IPv4 nor IPv6") from None
    return raw + struct.pack(">i", port)


def unpack_host(raw: bytes, port: int) -> Host:
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw), port
    return str(ipaddress.IPv6Address(bytes(raw))), port


_unpack_host_cached = functools.lru_cache(maxsize=1024)(unpack_host)


# ---------------------------------------------------------------------------------------------
# The record: struct codec
# ---------------------------------------------------------------------------------------------

_TOTAL_MAGIC = struct.Struct(">iI")
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")
_U8 = struct.Struct(">B")
_Q = struct.Struct(">q")


def _fixed(born_v6: bool, store_v6: bool) -> struct.Struct:
    bh = "16s" if born_v6 else "4s"
    sh = "16s" if store_v6 else "4s"
    return struct.Struct(f">iIiiiqqiq{bh}iq{sh}iiqi")


#: fixed prefix (through BODYLEN) indexed by (sys_flag >> 4) & 3
_FIXED = [_fixed(False, False), _fixed(True, False), _fixed(False, True), _fixed(True, True)]


def store_timestamp_pos(sys_flag: int) -> int:
    """Where STORETIMESTAMP sits in a record with this SYSFLAG."""
    return POS_STORETIMESTAMP_V6 if sys_flag & MessageSysFlag.BORNHOST_V6_FLAG else POS_STORETIMESTAMP_V4


def record_size(body_len: int, topic_len: int, props_len: int, sys_flag: int = 0, v2: bool = False) -> int:
    """TOTALSIZE of a record from its variable parts (UTF-8 byte lengths)."""
    return _FIXED[(sys_flag >> 4) & 3].size + body_len + (2 if v2 else 1) + topic_len + 2 + props_len


@dataclass(slots=True)
class MessageExt:
    """A decoded record (Apache ``MessageExt``). Hosts are ``(ip, port)``; IPv6 sets the V6 SYSFLAG bits."""

    topic: str
    body: bytes = b""
    flag: int = 0
    properties: dict[str, str] = field(default_factory=dict)
    queue_id: int = 0
    queue_offset: int = 0
    commitlog_offset: int = 0
    sys_flag: int = 0
    born_timestamp: int = 0
    born_host: Host = ("127.0.0.1", 0)
    store_timestamp: int = 0
    store_host: Host = ("127.0.0.1", 0)
    reconsume_times: int = 0
    prepared_transaction_offset: int = 0
    body_crc: int = 0
    store_size: int = 0
    magic: int = MAGIC_V1

    @property
    def tags(self) -> str | None:
        return self.properties.get(MessageConst.TAGS)

    @property
    def keys(self) -> list[str]:
        return [k for k in self.properties.get(MessageConst.KEYS, "").split(" ") if k]

    @property
    def uniq_key(self) -> str | None:
        return self.properties.get(MessageConst.UNIQ_KEY)

    @property
    def offset_msg_id(self) -> str:
        from .msgid import create_offset_msg_id

        return create_offset_msg_id(self.store_host, self.commitlog_offset)

    @property
    def msg_id(self) -> str:
        """What the Java client calls msgId: UNIQ_KEY if present, else the offset message id."""
        return self.uniq_key or self.offset_msg_id


@functools.lru_cache(maxsize=4096)
def _topic_field(topic: str, version: int | None) -> tuple[int, bytes]:
    """(magic, TOPICLEN + TOPIC bytes) for a topic; cached because a broker has few topics."""
    tb = topic.encode()
    magic = version if version is not None else (MAGIC_V2 if len(tb) > V1_MAX_TOPIC_LEN else MAGIC_V1)
    if magic == MAGIC_V1:
        if len(tb) > 255:
            raise ValueError(f"topic is {len(tb)} bytes; a V1 record holds at most 255")
        return magic, _U8.pack(len(tb)) + tb
    if magic == MAGIC_V2:
        if len(tb) > 32767:
            raise ValueError(f"topic is {len(tb)} bytes; a V2 record holds at most 32767")
        return magic, _I16.pack(len(tb)) + tb
    raise ValueError(f"unknown record magic 0x{magic:08X}")


def record_parts(
    topic: str,
    body: bytes,
    properties: str | dict[str, str] = "",
    born_host: Host = ("127.0.0.1", 0),
    store_host: Host = ("127.0.0.1", 0),
    sys_flag: int = 0,
    version: int | None = None,
) -> tuple:
    """Everything of a record that does not depend on where it is appended, for :func:`write_record`.

    Returns ``(size, fixed_struct, magic, sys_flag, born_ip, born_port, store_ip, store_port, tail)``
    (an opaque tuple: unpacking is cheaper than attributes on this path). The V6 bits of SYSFLAG are
    set from the host families; the magic is V2 only when the topic is longer than 127 UTF-8 bytes
    (unless ``version`` forces one). Raises ValueError when the topic or properties exceed their length
    fields.
    """
    pb = (encode_properties(properties) if isinstance(properties, dict) else properties).encode()
    if len(pb) > MAX_PROPERTIES_LEN:
        raise ValueError(f"properties are {len(pb)} bytes; the record allows at most {MAX_PROPERTIES_LEN}")
    magic, topic_field = _topic_field(topic, version)
    tail = b"".join((topic_field, _I16.pack(len(pb)), pb))
    bh = pack_host(born_host)
    sh = pack_host(store_host)
    sys_flag &= ~0x30
    if len(bh) == 20:
        sys_flag |= MessageSysFlag.BORNHOST_V6_FLAG
    if len(sh) == 20:
        sys_flag |= MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    fixed = _FIXED[(sys_flag >> 4) & 3]
    size = fixed.size + len(body) + len(tail)
    return size, fixed, magic, sys_flag, bh[:-4], born_host[1], sh[:-4], store_host[1], tail


def record_template(
    topic: str, queue_id: int, sys_flag: int, born_timestamp: int, born_host: Host, store_timestamp: int,
    store_host: Host, reconsume_times: int = 0,
) -> tuple[bytes, bytes]:
    """(fixed part, TOPICLEN+TOPIC field) of records that share everything but their body, properties,
    FLAG and offsets: the fixed part has those fields zero, for :func:`wire.batch.write` to fill in.
    Raises ValueError as :func:`record_parts` does."""
    _size, fixed, magic, sys_flag, bip, bport, sip, sport, tail = record_parts(
        topic, b"", "", born_host, store_host, sys_flag)
    template = fixed.pack(0, magic, 0, queue_id, 0, 0, 0, sys_flag, born_timestamp, bip, bport, store_timestamp,
                          sip, sport, reconsume_times, 0, 0)
    return template, tail[:-2]


def write_record(
    buf, pos: int, parts: tuple, body: bytes, queue_id: int, flag: int, queue_offset: int,
    commitlog_offset: int, born_timestamp: int, store_timestamp: int, reconsume_times: int = 0,
    prepared_transaction_offset: int = 0, crc: int | None = None,
) -> int:
    """Write the record described by ``parts`` (from :func:`record_parts`) at ``buf[pos:]`` — a
    bytearray or a writable mmap, so the store encodes straight into the commit log. Returns its size."""
    size, fixed, magic, sys_flag, bip, bport, sip, sport, tail = parts
    blen = len(body)
    fixed.pack_into(
        buf, pos, size, magic, (_crc32(body) & 0x7FFFFFFF) if crc is None else crc, queue_id, flag,
        queue_offset, commitlog_offset, sys_flag, born_timestamp, bip, bport, store_timestamp, sip, sport,
        reconsume_times, prepared_transaction_offset, blen,
    )
    p = pos + fixed.size
    buf[p : p + blen] = body
    p += blen
    buf[p : pos + size] = tail
    return size


def build_record(
    topic: str,
    body: bytes,
    properties: str | dict[str, str] = "",
    *,
    queue_id: int = 0,
    flag: int = 0,
    sys_flag: int = 0,
    born_timestamp: int = 0,
    born_host: Host = ("127.0.0.1", 0),
    store_host: Host = ("127.0.0.1", 0),
    reconsume_times: int = 0,
    prepared_transaction_offset: int = 0,
    queue_offset: int = 0,
    commitlog_offset: int = 0,
    store_timestamp: int = 0,
    version: int | None = None,
) -> bytearray:
    """Encode a record from send-header fields; :func:`patch_record` fills the append-time fields later.

    BODYCRC is computed here; see :func:`record_parts` for SYSFLAG's V6 bits and the magic.
    """
    parts = record_parts(topic, body, properties, born_host, store_host, sys_flag, version)
    out = bytearray(parts[0])
    write_record(out, 0, parts, body, queue_id, flag, queue_offset, commitlog_offset, born_timestamp,
                 store_timestamp, reconsume_times, prepared_transaction_offset)
    return out


def patch_record(buf, pos: int, queue_offset: int, commitlog_offset: int, store_timestamp: int) -> None:
    """Fill the three append-time fields of the record at ``buf[pos:]`` (a bytearray or a writable mmap)."""
    _Q.pack_into(buf, pos + POS_QUEUEOFFSET, queue_offset)
    _Q.pack_into(buf, pos + POS_PHYSICALOFFSET, commitlog_offset)
    (sys_flag,) = _I32.unpack_from(buf, pos + POS_SYSFLAG)
    _Q.pack_into(buf, pos + store_timestamp_pos(sys_flag), store_timestamp)


def encode_record(msg: MessageExt, version: int | None = None) -> bytes:
    """The record bytes of ``msg`` (BODYCRC recomputed, TOTALSIZE and V6 bits derived)."""
    return bytes(
        build_record(
            msg.topic, msg.body, msg.properties, queue_id=msg.queue_id, flag=msg.flag, sys_flag=msg.sys_flag,
            born_timestamp=msg.born_timestamp, born_host=msg.born_host, store_host=msg.store_host,
            reconsume_times=msg.reconsume_times, prepared_transaction_offset=msg.prepared_transaction_offset,
            queue_offset=msg.queue_offset, commitlog_offset=msg.commitlog_offset,
            store_timestamp=msg.store_timestamp, version=version,
        )
    )


class RecordInfo(NamedTuple):
    """What dispatch and recovery need from a record, read without copying the body."""

    size: int
    queue_id: int
    queue_offset: int
    commitlog_offset: int
    sys_flag: int
    store_timestamp: int
    body_crc: int
    body_pos: int  #: offset of BODY relative to the record start
    body_len: int
    topic: str
    properties: str


def _parse(buf, pos: int) -> tuple:
    """(total, magic, fixed fields, fixed size, body_len, topic, properties) of the record at ``pos``."""
    n = len(buf)
    if n - pos < 8:
        raise RecordError(f"truncated record: {n - pos} bytes left, need at least 8", pos)
    total, magic = _TOTAL_MAGIC.unpack_from(buf, pos)
    if magic != MAGIC_V1 and magic != MAGIC_V2:
        raise RecordError(f"bad record magic 0x{magic:08X} (expected 0x{MAGIC_V1:08X} or 0x{MAGIC_V2:08X})", pos)
    if total < 0 or total > n - pos:
        raise RecordError(f"record TOTALSIZE {total} exceeds the {n - pos} bytes available", pos)
    try:
        (sys_flag,) = _I32.unpack_from(buf, pos + POS_SYSFLAG)
        fixed = _FIXED[(sys_flag >> 4) & 3]
        f = fixed.unpack_from(buf, pos)
        body_len = f[-1]
        p = pos + fixed.size + body_len
        if body_len < 0 or p > pos + total:
            raise RecordError(f"BODYLEN {body_len} does not fit in TOTALSIZE {total}", pos)
        if magic == MAGIC_V1:
            tl = buf[p]
            p += 1
        else:
            (tl,) = _I16.unpack_from(buf, p)
            p += 2
        topic = str(buf[p : p + tl], "utf-8")
        p += tl
        (pl,) = _I16.unpack_from(buf, p)
        p += 2
        props = str(buf[p : p + pl], "utf-8")
        p += pl
    except (struct.error, IndexError, UnicodeDecodeError) as exc:
        raise RecordError(f"malformed record ({exc})", pos) from None
    if p - pos != total or pl < 0 or tl < 0:
        raise RecordError(f"record fields add up to {p - pos} bytes but TOTALSIZE says {total}", pos)
    return total, magic, f, fixed.size, body_len, topic, props


def peek_record(buf, pos: int = 0) -> RecordInfo:
    """Parse the dispatch-relevant fields of the record at ``buf[pos:]`` without copying the body;
    raises :class:`RecordError` (a BLANK_MAGIC marker too: check :func:`read_magic` first if expected)."""
    total, _magic, f, fixed_size, body_len, topic, props = _parse(buf, pos)
    return RecordInfo(total, f[3], f[5], f[6], f[7], f[11], f[2], fixed_size, body_len, topic, props)


def read_magic(buf, pos: int = 0) -> tuple[int, int]:
    """(TOTALSIZE, MAGIC) at ``pos``: enough to tell a record from a blank marker."""
    return _TOTAL_MAGIC.unpack_from(buf, pos)


def decode_record(buf, offset: int = 0) -> tuple[MessageExt, int]:
    """Decode the record at ``buf[offset:]``; returns (message, its size). Raises :class:`RecordError`."""
    total, magic, f, fixed_size, body_len, topic, props = _parse(buf, offset)
    bstart = offset + fixed_size
    msg = MessageExt(
        topic, bytes(buf[bstart : bstart + body_len]), f[4], decode_properties(props), f[3], f[5], f[6], f[7],
        f[8], _unpack_host_cached(f[9], f[10]), f[11], _unpack_host_cached(f[12], f[13]), f[14], f[15], f[2],
        total, magic,
    )
    return msg, total


def iter_records(buf) -> Iterator[MessageExt]:
    """Yield the records of a pull body in order; raises :class:`RecordError` at the first bad one."""
    pos, n = 0, len(buf)
    while pos < n:
        msg, size = decode_record(buf, pos)
        yield msg
        pos += size


def decode_records(buf) -> list[MessageExt]:
    """All records of a pull body. On a bad record raises :class:`RecordError` whose ``offset`` names
    where and whose ``decoded`` holds the records before it (the Java client stops at the same point)."""
    out: list[MessageExt] = []
    try:
        for msg in iter_records(buf):
            out.append(msg)
    except RecordError as exc:
        exc.decoded = out
        raise
    return out


def blank_record(remaining: int) -> bytes:
    """The commit log's end-of-segment marker: ``int32 remaining | BLANK_MAGIC`` (8 bytes)."""
    return _TOTAL_MAGIC.pack(remaining, BLANK_MAGIC)


# ---------------------------------------------------------------------------------------------
# The record: construct specification (readable; tested equal to the struct codec)
# ---------------------------------------------------------------------------------------------

_Host4or16 = lambda bit: c.IfThenElse(c.this.sys_flag & bit, c.Bytes(16), c.Bytes(4))  # noqa: E731

RECORD = c.Struct(
    "total_size" / c.Int32sb,
    "magic" / c.Int32ub,
    "body_crc" / c.Int32sb,
    "queue_id" / c.Int32sb,
    "flag" / c.Int32sb,
    "queue_offset" / c.Int64sb,
    "commitlog_offset" / c.Int64sb,
    "sys_flag" / c.Int32sb,
    "born_timestamp" / c.Int64sb,
    "born_host" / _Host4or16(MessageSysFlag.BORNHOST_V6_FLAG),
    "born_port" / c.Int32sb,
    "store_timestamp" / c.Int64sb,
    "store_host" / _Host4or16(MessageSysFlag.STOREHOSTADDRESS_V6_FLAG),
    "store_port" / c.Int32sb,
    "reconsume_times" / c.Int32sb,
    "prepared_transaction_offset" / c.Int64sb,
    "body" / c.Prefixed(c.Int32sb, c.GreedyBytes),
    "topic" / c.IfThenElse(
        c.this.magic == MAGIC_V2, c.PascalString(c.Int16sb, "utf8"), c.PascalString(c.Int8ub, "utf8")
    ),
    "properties" / c.PascalString(c.Int16sb, "utf8"),
)

#: commit-log end-of-segment marker
BLANK = c.Struct("remaining" / c.Int32sb, "magic" / c.Const(BLANK_MAGIC, c.Int32ub))

# ---------------------------------------------------------------------------------------------
# Batch send body (SEND_BATCH_MESSAGE): TOTALSIZE | MAGIC(0) | BODYCRC(0) | FLAG | BODYLEN+BODY | PROPLEN+PROPS
# ---------------------------------------------------------------------------------------------

_BATCH_HEAD = struct.Struct(">iiiii")  # total, magic, crc, flag, bodylen


class BatchEntry(NamedTuple):
    flag: int
    body: bytes
    properties: str  #: raw properties string (parse with :func:`decode_properties`)


BATCH_ENTRY = c.Struct(
    "total_size" / c.Int32sb,
    "magic" / c.Int32sb,
    "body_crc" / c.Int32sb,
    "flag" / c.Int32sb,
    "body" / c.Prefixed(c.Int32sb, c.GreedyBytes),
    "properties" / c.PascalString(c.Int16sb, "utf8"),
)


def encode_batch(entries: list[tuple[int, bytes, str | dict[str, str]]]) -> bytes:
    """A batch body from (flag, body, properties) entries, as the Java producer writes it."""
    parts = []
    for flag, body, props in entries:
        pb = (encode_properties(props) if isinstance(props, dict) else props).encode()
        total = 20 + len(body) + 2 + len(pb)
        parts.append(_BATCH_HEAD.pack(total, 0, 0, flag, len(body)))
        parts.append(body)
        parts.append(_I16.pack(len(pb)))
        parts.append(pb)
    return b"".join(parts)


def iter_batch(buf: bytes | memoryview) -> Iterator[tuple[int, int, memoryview, bytes]]:
    """(offset, FLAG, body, properties bytes) of each entry of a batch body, the properties checked to be
    UTF-8; raises :class:`RecordError` naming the offset of a bad entry."""
    buf = memoryview(buf)
    pos, n = 0, len(buf)
    while pos < n:
        if n - pos < 22:
            raise RecordError(f"truncated batch entry: {n - pos} bytes left", pos)
        _total, _magic, _crc, flag, blen = _BATCH_HEAD.unpack_from(buf, pos)
        p = pos + 20
        if blen < 0 or p + blen + 2 > n:
            raise RecordError(f"batch entry BODYLEN {blen} runs past the end of the body", pos)
        body = buf[p : p + blen]
        p += blen
        (pl,) = _I16.unpack_from(buf, p)
        p += 2
        if pl < 0 or p + pl > n:
            raise RecordError(f"batch entry PROPLEN {pl} runs past the end of the body", pos)
        props = bytes(buf[p : p + pl])
        try:
            props.decode()
        except UnicodeDecodeError:
            raise RecordError("batch entry properties are not UTF-8", pos) from None
        # TOTALSIZE is not checked: the Java broker walks the entry by its length fields too.
        yield pos, flag, body, props
        pos = p + pl


def decode_batch(buf: bytes) -> list[BatchEntry]:
    """Split a batch body into entries; raises :class:`RecordError` naming the offset of a bad one."""
    return [BatchEntry(flag, bytes(body), props.decode()) for _at, flag, body, props in iter_batch(buf)]
