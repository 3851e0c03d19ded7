"""Message record codec: struct codec vs construct spec, worked examples from message.md, ids."""

from __future__ import annotations

import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferrymq.wire.message import (
    BLANK,
    MAGIC_V1,
    MAGIC_V2,
    RECORD,
    MessageConst,
    MessageExt,
    MessageSysFlag,
    RecordError,
    blank_record,
    body_crc,
    build_record,
    compress_body,
    decode_batch,
    decode_properties,
    decode_properties_go,
    decode_record,
    decode_records,
    decompress_body,
    encode_batch,
    encode_properties,
    encode_record,
    java_string_hash,
    pack_host,
    patch_record,
    peek_record,
    record_size,
    store_timestamp_pos,
    tags_code,
)
from ferrymq.wire.msgid import UniqKeyGenerator, create_offset_msg_id, parse_offset_msg_id, parse_uniq_key

i32 = st.integers(-(2**31), 2**31 - 1)
i64 = st.integers(-(2**63), 2**63 - 1)
port = st.integers(0, 65535)
ipv4 = st.ip_addresses(v=4).map(str)
ipv6 = st.ip_addresses(v=6).map(str)
host = st.tuples(st.one_of(ipv4, ipv6), port)
prop_text = st.text(st.characters(blacklist_characters="\x01\x02", blacklist_categories=("Cs",)), min_size=1, max_size=20)
props = st.dictionaries(prop_text, prop_text, max_size=6)
topic = st.text(st.characters(whitelist_categories=("Lu", "Ll", "Nd")) | st.sampled_from("%_-|"), min_size=1, max_size=200)


@st.composite
def messages(draw):
    return MessageExt(
        topic=draw(topic),
        body=draw(st.binary(max_size=300)),
        flag=draw(i32),
        properties=draw(props),
        queue_id=draw(i32),
        queue_offset=draw(i64),
        commitlog_offset=draw(i64),
        sys_flag=draw(st.integers(0, 0x7FF)) & ~0x30,
        born_timestamp=draw(i64),
        born_host=draw(host),
        store_timestamp=draw(i64),
        store_host=draw(host),
        reconsume_times=draw(i32),
        prepared_transaction_offset=draw(i64),
    )


def _construct_build(m: MessageExt, magic: int) -> bytes:
    bh, sh = pack_host(m.born_host), pack_host(m.store_host)
    sys_flag = m.sys_flag | (0x10 if len(bh) == 20 else 0) | (0x20 if len(sh) == 20 else 0)
    props = encode_properties(m.properties)
    size = record_size(len(m.body), len(m.topic.encode()), len(props.encode()), sys_flag, magic == MAGIC_V2)
    return RECORD.build(dict(
        total_size=size, magic=magic, body_crc=zlib.crc32(m.body) & 0x7FFFFFFF, queue_id=m.queue_id, flag=m.flag,
        queue_offset=m.queue_offset, commitlog_offset=m.commitlog_offset, sys_flag=sys_flag,
        born_timestamp=m.born_timestamp, born_host=bh[:-4], born_port=m.born_host[1],
        store_timestamp=m.store_timestamp, store_host=sh[:-4], store_port=m.store_host[1],
        reconsume_times=m.reconsume_times, prepared_transaction_offset=m.prepared_transaction_offset,
        body=m.body, topic=m.topic, properties=props,
    ))


@settings(max_examples=150, deadline=None)
@given(messages())
def test_struct_codec_agrees_with_construct_spec(m):
    magic = MAGIC_V2 if len(m.topic.encode()) > 127 else MAGIC_V1
    raw = encode_record(m)
    assert raw == _construct_build(m, magic)
    parsed = RECORD.parse(raw)
    assert parsed.total_size == len(raw)
    assert parsed.topic == m.topic and parsed.body == m.body
    back, size = decode_record(raw)
    assert size == len(raw)
    for name in ("topic", "body", "flag", "properties", "queue_id", "queue_offset", "commitlog_offset",
                 "born_timestamp", "store_timestamp", "reconsume_times", "prepared_transaction_offset"):
        assert getattr(back, name) == getattr(m, name), name
    assert back.sys_flag & ~0x30 == m.sys_flag
    assert pack_host(back.born_host) == pack_host(m.born_host)
    assert pack_host(back.store_host) == pack_host(m.store_host)
    assert back.body_crc == body_crc(m.body) and back.magic == magic


@settings(max_examples=60, deadline=None)
@given(messages(), st.sampled_from([MAGIC_V1, MAGIC_V2]))
def test_forced_version_round_trips(m, magic):
    if magic == MAGIC_V1 and len(m.topic.encode()) > 255:
        return
    raw = encode_record(m, version=magic)
    assert raw == _construct_build(m, magic)
    assert decode_record(raw)[0].topic == m.topic


def test_v1_layout_offsets_and_size():
    m = MessageExt(topic="T", body=b"abc", properties={"TAGS": "x"}, born_host=("127.0.0.1", 1234),
                   store_host=("10.0.0.1", 10911))
    raw = encode_record(m)
    props_len = len("TAGS\x01x\x02")
    assert len(raw) == 91 + 3 + 1 + props_len
    assert struct.unpack_from(">I", raw, 4)[0] == MAGIC_V1
    assert raw[84:88] == b"\x00\x00\x00\x03" and raw[88:91] == b"abc" and raw[91] == 1  # V1: 1-byte topic len


def test_ipv6_hosts_widen_fields_and_set_flags():
    m = MessageExt(topic="T", body=b"x", born_host=("::1", 5), store_host=("fe80::1", 10911))
    raw = encode_record(m)
    assert len(raw) == 91 + 1 + 1 + 24
    back, _ = decode_record(raw)
    assert back.sys_flag & 0x30 == 0x30
    assert back.born_host == ("::1", 5) and back.store_host == ("fe80::1", 10911)
    m2 = MessageExt(topic="T", body=b"x", born_host=("::1", 5), store_host=("1.2.3.4", 1))
    back2, _ = decode_record(encode_record(m2))
    assert back2.sys_flag & 0x30 == 0x10


def test_v2_for_long_topics():
    m = MessageExt(topic="t" * 200, body=b"b")
    raw = encode_record(m)
    assert struct.unpack_from(">I", raw, 4)[0] == MAGIC_V2
    assert len(raw) == 92 + 1 + 200
    assert decode_record(raw)[0].topic == "t" * 200


@pytest.mark.parametrize("born", [("1.2.3.4", 9), ("::2", 9)])
def test_build_and_patch_in_place(born):
    rec = build_record("TopicA", b"hello", {"TAGS": "TagA", "KEYS": "k1 k2"}, queue_id=3, flag=7,
                       born_timestamp=111, born_host=born, store_host=("127.0.0.1", 10911))
    buf = bytearray(10) + rec
    patch_record(buf, 10, queue_offset=42, commitlog_offset=4096, store_timestamp=999)
    m, size = decode_record(buf, 10)
    assert size == len(rec)
    assert (m.queue_offset, m.commitlog_offset, m.store_timestamp, m.born_timestamp) == (42, 4096, 999, 111)
    assert store_timestamp_pos(m.sys_flag) == (68 if born[0] == "::2" else 56)
    info = peek_record(buf, 10)
    assert (info.topic, info.queue_id, info.queue_offset, info.store_timestamp) == ("TopicA", 3, 42, 999)
    assert decode_properties(info.properties) == {"TAGS": "TagA", "KEYS": "k1 k2"}
    assert bytes(buf[10 + info.body_pos: 10 + info.body_pos + info.body_len]) == b"hello"


def test_decode_records_stops_at_bad_magic_naming_offset():
    a = encode_record(MessageExt(topic="A", body=b"1"))
    b = encode_record(MessageExt(topic="B", body=b"22"))
    junk = bytearray(b)
    junk[4:8] = b"\x00\x00\x00\x01"
    with pytest.raises(RecordError) as ei:
        decode_records(a + b + bytes(junk))
    assert ei.value.offset == len(a) + len(b)
    assert str(len(a) + len(b)) in str(ei.value)
    assert [m.topic for m in ei.value.decoded] == ["A", "B"]
    assert [m.topic for m in decode_records(a + b)] == ["A", "B"]


def test_truncated_and_inconsistent_records_are_errors():
    raw = encode_record(MessageExt(topic="A", body=b"xyz", properties={"a": "b"}))
    with pytest.raises(RecordError):
        decode_record(raw[:-1])
    bad = bytearray(raw)
    struct.pack_into(">i", bad, 84, 1000)  # BODYLEN beyond the record
    with pytest.raises(RecordError):
        decode_record(bytes(bad))
    with pytest.raises(RecordError):
        decode_record(blank_record(100))


def test_blank_marker_layout():
    raw = blank_record(1234)
    assert raw == struct.pack(">iI", 1234, 0xCBD43194)
    assert BLANK.parse(raw).remaining == 1234


# --- properties -------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(props)
def test_properties_round_trip(p):
    s = encode_properties(p)
    assert decode_properties(s) == p
    assert decode_properties_go(s) == p


def test_java_reader_drops_empty_keys_and_values_go_keeps_empty_values():
    s = "A\x01\x02\x01v\x02B\x01x\x02C\x01y\x01z\x02junk\x02"
    assert decode_properties(s) == {"B": "x", "C": "y\x01z"}
    assert decode_properties_go(s) == {"A": "", "": "v", "B": "x"}
    assert encode_properties({"a": "1", "b": None}) == "a\x011\x02"


def test_property_names():
    assert MessageConst.UNIQ_CLIENT_MESSAGE_ID_KEYIDX == "UNIQ_KEY"
    assert MessageConst.WAIT_STORE_MSG_OK == "WAIT"
    assert MessageConst.REAL_QUEUE_ID == "REAL_QID"
    assert MessageConst.TRANSACTION_PREPARED == "TRAN_MSG"
    assert MessageConst.PRODUCER_GROUP == "PGROUP"


# --- hashes, CRC, compression -----------------------------------------------------------------


def test_tag_hash_examples():
    assert java_string_hash("TagA") == 2598919
    assert java_string_hash("TagB") == 2598920
    assert java_string_hash("*") == 42
    assert java_string_hash("Hello world") == -832992604
    assert tags_code(None) == 0 and tags_code("") == 0
    # UTF-16 code units: U+1F600 is the surrogate pair D83D DE00
    assert java_string_hash("\U0001F600") == ((31 * 0xD83D + 0xDE00) & 0xFFFFFFFF)
    assert java_string_hash("é") == 0xE9


@settings(deadline=None)
@given(st.text(max_size=30))
def test_java_hash_is_signed_32_bit(s):
    h = java_string_hash(s)
    assert -(2**31) <= h < 2**31


def test_body_crc_masked():
    assert body_crc(b"hello") == zlib.crc32(b"hello") & 0x7FFFFFFF
    assert body_crc(b"\xff" * 10) < 2**31


def test_compression_helpers():
    data = b"x" * 5000
    comp, bits = compress_body(data)
    assert bits == MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.COMPRESSION_ZLIB
    assert decompress_body(comp, bits) == data
    assert decompress_body(comp, MessageSysFlag.COMPRESSED_FLAG) == data  # type 0 = zlib (old clients)
    assert decompress_body(b"raw", 0) == b"raw"


# --- batch body -------------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(i32, st.binary(max_size=100), props), max_size=5))
def test_batch_round_trip(entries):
    raw = encode_batch(entries)
    back = decode_batch(raw)
    assert [(e.flag, e.body, decode_properties(e.properties)) for e in back] == entries


def test_batch_layout():
    raw = encode_batch([(5, b"ab", "k\x01v\x02")])
    assert raw == struct.pack(">iiiii", 20 + 2 + 2 + 4, 0, 0, 5, 2) + b"ab" + struct.pack(">h", 4) + b"k\x01v\x02"
    with pytest.raises(RecordError) as ei:
        decode_batch(raw + raw[:10])
    assert ei.value.offset == len(raw)


# --- ids --------------------------------------------------------------------------------------


def test_offset_msg_id_example():
    assert create_offset_msg_id(("127.0.0.1", 10911), 0x1A2) == "7F00000100002A9F00000000000001A2"
    assert parse_offset_msg_id("7f00000100002a9f00000000000001a2") == (("127.0.0.1", 10911), 0x1A2)


@settings(deadline=None)
@given(host, st.integers(0, 2**63 - 1))
def test_offset_msg_id_round_trip(h, off):
    mid = create_offset_msg_id(h, off)
    assert len(mid) == (32 if ":" not in h[0] else 56)
    (ip, p), o = parse_offset_msg_id(mid)
    assert pack_host((ip, p)) == pack_host(h) and o == off


def test_offset_msg_id_rejects_wrong_length():
    with pytest.raises(ValueError):
        parse_offset_msg_id("ABC")


def test_message_ext_ids():
    m = MessageExt(topic="T", store_host=("127.0.0.1", 10911), commitlog_offset=0x1A2)
    assert m.msg_id == m.offset_msg_id == "7F00000100002A9F00000000000001A2"
    m.properties[MessageConst.UNIQ_KEY] = "ABC"
    assert m.msg_id == "ABC"


def test_uniq_key_layout_and_parse():
    gen = UniqKeyGenerator(ip=bytes([10, 1, 2, 3]), pid=0x1234, class_hash=0xCAFEBABE)
    import time as _t

    now = int(_t.time() * 1000)
    k1, k2 = gen.next(now), gen.next(now)
    assert len(k1) == 32 and k1 == k1.upper() and k1 != k2
    assert k1.startswith("0A010203" + "1234" + "CAFEBABE")
    info = parse_uniq_key(k2, now_ms=now + 1)
    assert (info.ip, info.pid, info.class_hash, info.counter) == ("10.1.2.3", 0x1234, 0xCAFEBABE, 1)
    assert info.time_ms == now
    # Go's lowercase tail parses the same
    assert parse_uniq_key(k2[:20] + k2[20:].lower(), now_ms=now + 1) == info


# --- records stored by Apache RocketMQ 5.5.0 (golden pull responses, compat_tests/vectors) ------

def test_apache_stored_records_decode_and_re_encode_byte_for_byte():
    import glob
    import os

    from ferrymq.wire.frame import FrameDecoder

    here = os.path.dirname(os.path.abspath(__file__))
    paths = sorted(glob.glob(os.path.join(here, "..", "..", "compat_tests", "vectors", "*PULL_MESSAGE-response-with-messages.bin")))
    assert paths, "golden pull responses missing from compat_tests/vectors"
    for path in paths:
        with open(path, "rb") as f:
            (cmd,) = FrameDecoder().feed(f.read())
        msgs = decode_records(cmd.body)
        assert msgs, path
        pos = 0
        for m in msgs:
            assert m.properties["TAGS"] == "TagA" and m.properties["KEYS"] == "KeyA"
            assert m.body_crc == body_crc(m.body)
            assert encode_record(m, version=m.magic) == cmd.body[pos : pos + m.store_size], path
            pos += m.store_size


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(i32, st.binary(max_size=50), props), max_size=4))
def test_batch_struct_codec_agrees_with_construct_spec(entries):
    from ferrymq.wire.message import BATCH_ENTRY

    expected = b"".join(
        BATCH_ENTRY.build(dict(total_size=20 + len(b) + 2 + len(encode_properties(p).encode()), magic=0, body_crc=0,
                               flag=f, body=b, properties=encode_properties(p)))
        for f, b, p in entries
    )
    assert encode_batch(entries) == expected
