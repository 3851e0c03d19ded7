"""wire.batch: a batch body written as commit-log records, by the Python specification and the C code.

The Python functions are checked against the record codec of wire.message (what decoding each entry,
merging the container's properties and encoding a record gave); the C functions are checked byte for
byte against the Python ones on generated batches, errors included.
"""

from __future__ import annotations

import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferrymq.wire import batch
from ferrymq.wire.message import (
    MAX_PROPERTIES_LEN,
    RecordError,
    decode_properties,
    decode_record,
    encode_batch,
    encode_properties,
    record_template,
    tags_code,
)

IMPLS = [pytest.param((batch.py_measure, batch.py_write), id="python")]
if batch.C_FUNCTIONS is not None:  # the C extension is built at install time when a C compiler is present
    IMPLS.append(pytest.param(batch.C_FUNCTIONS, id="c"))
needs_c = pytest.mark.skipif(batch.C_FUNCTIONS is None, reason="wire._batchc not built (no C compiler at install)")
c_measure = batch.C_FUNCTIONS[0] if batch.C_FUNCTIONS else None

TOPIC = "TopicTest"
STORE = ("10.0.0.7", 10911)
BORN = ("192.168.1.20", 50001)
ID_PREFIX = "0A0000070000"


def layout(queue_id=3, sys_flag=0, born=BORN, store=STORE):
    template, tail = record_template(TOPIC, queue_id, sys_flag, 1700000000123, born, 1700000000456, store, 2)
    return template, tail, len(template) + len(tail) + 2


def run(impls, body, container, *, pos=16, queue_offset=100, index=True, born=BORN):
    measure, write = impls
    s = batch.stamp(container)
    template, tail, overhead = layout(born=born)
    count, total, wait = measure(body, s, overhead)
    buf = bytearray(pos + total + 8)
    phys = 1 << 33
    out = write(buf, pos, body, s, template, tail, queue_offset, phys, f"{TOPIC}#".encode() if index else None,
                ID_PREFIX)
    return (count, total, wait), bytes(buf), out


def test_records_are_what_decoding_merging_and_encoding_gave():
    entries = [
        (1, b"a" * 10, {"KEYS": "k1 k2", "TAGS": "tagA", "UNIQ_KEY": "U1", "WAIT": "false"}),
        (2, b"", "TAGS\x01\xe4\xb8\xad\xf0\x9f\x98\x80".encode("latin-1").decode("utf-8")),  # non-ASCII tag
        (3, b"xyz", ""),
        (4, b"q", "CLUSTER\x01own\x02"),  # has a container key already: keeps its own value
    ]
    container = {"WAIT": "true", "CLUSTER": "DefaultCluster"}
    (count, total, wait), buf, (end, units, items, ids, uniqs) = run(IMPLS[0].values[0], encode_batch(entries), container)
    assert (count, wait) == (4, False)
    assert end == 16 + total
    pos, phys = 16, 1 << 33
    unit_list = list(batch.unit_items(units))
    expected_items = []
    for i, (flag, body, props) in enumerate(entries):
        msg, size = decode_record(buf, pos)
        own = decode_properties(props) if isinstance(props, str) else props
        merged = {**{k: v for k, v in container.items() if k not in own}, **own}
        assert msg.properties == merged
        assert (msg.topic, msg.body, msg.flag, msg.queue_id, msg.queue_offset) == (TOPIC, body, flag, 3, 100 + i)
        assert (msg.commitlog_offset, msg.born_host, msg.store_host, msg.reconsume_times) == (phys, BORN, STORE, 2)
        assert (msg.born_timestamp, msg.store_timestamp) == (1700000000123, 1700000000456)
        assert msg.body_crc == zlib.crc32(body) & 0x7FFFFFFF
        assert unit_list[i] == (phys, size, tags_code(merged.get("TAGS")))
        for key in ([merged["UNIQ_KEY"]] if merged.get("UNIQ_KEY") else []) + merged.get("KEYS", "").split(" "):
            if key:
                expected_items.append((zlib.crc32(f"{TOPIC}#{key}".encode()) & 0x7FFFFFFF, phys))
        pos += size
        phys += size
    assert pos == end
    assert list(batch.index_items(items)) == expected_items
    assert ids == ",".join(f"{ID_PREFIX}{p:016X}" for p, _s, _t in unit_list)
    assert uniqs == "U1"
    assert buf[end:] == bytes(8)


def test_stored_properties_keep_the_entry_string_verbatim():
    own = "B\x012\x02A\x011"  # no trailing separator, key order not sorted
    (_m, buf, _out) = run(IMPLS[0].values[0], encode_batch([(0, b"x", own)]), {"CLUSTER": "c"})
    template, tail, _ = layout()
    stored_at = 16 + len(template) + 1 + len(tail) + 2
    stored = (own + "\x02CLUSTER\x01c\x02").encode()
    assert buf[stored_at - 2 : stored_at + len(stored)] == len(stored).to_bytes(2, "big") + stored


_key = st.sampled_from(["TAGS", "KEYS", "UNIQ_KEY", "WAIT", "CLUSTER", "a", "é", "k\x01x", ""])
_value = st.one_of(st.sampled_from(["", "false", "true", "t1 t2  t3", " ", "\U0001f600"]), st.text(max_size=6))
_props = st.lists(st.tuples(_key, _value), max_size=6).map(
    lambda pairs: "".join(f"{k}\x01{v}\x02" for k, v in pairs))
_entry = st.tuples(st.integers(-(2**31), 2**31 - 1), st.binary(max_size=40),
                   st.one_of(_props, _props.map(lambda s: s.rstrip("\x02")), st.text(max_size=8)))
_container = st.dictionaries(st.sampled_from(["WAIT", "CLUSTER", "TAGS", "KEYS", "x", "UNIQ_KEY"]),
                             st.sampled_from(["true", "false", "c1", "k9 k8"]), max_size=4)


@needs_c
@settings(max_examples=300, deadline=None)
@given(entries=st.lists(_entry, min_size=1, max_size=6), container=_container, index=st.booleans(),
       v6=st.booleans())
def test_c_and_python_write_the_same_bytes(entries, container, index, v6):
    body = encode_batch(entries)
    born = ("::1", 7) if v6 else BORN
    py = run(IMPLS[0].values[0], body, container, index=index, born=born)
    c = run(IMPLS[1].values[0], body, container, index=index, born=born)
    assert c == py


def _error(fn):
    try:
        fn()
    except Exception as exc:  # noqa: BLE001 - the comparison is the point
        return type(exc), str(exc)
    return None


@needs_c
@settings(max_examples=300, deadline=None)
@given(entries=st.lists(_entry, min_size=1, max_size=3), cut=st.integers(0, 200), junk=st.binary(max_size=30))
def test_c_and_python_refuse_the_same_bodies(entries, cut, junk):
    body = encode_batch(entries)
    body = body[: len(body) - cut % (len(body) + 1)] + junk
    s = batch.stamp({"WAIT": "true"})
    _t, _tail, overhead = layout()
    py = _error(lambda: batch.py_measure(body, s, overhead))
    assert _error(lambda: c_measure(body, s, overhead)) == py
    if py is None:
        assert c_measure(body, s, overhead) == batch.py_measure(body, s, overhead)


@pytest.mark.parametrize("impls", IMPLS)
@pytest.mark.parametrize("raw, reason", [
    (b"\x00" * 10, "truncated batch entry: 10 bytes left"),
    (encode_batch([(0, b"abc", "")])[:-3], "batch entry BODYLEN 3 runs past the end of the body"),
    (encode_batch([(0, b"", "AB")])[:-1], "batch entry PROPLEN 2 runs past the end of the body"),
])
def test_malformed_entries_are_refused_with_their_offset(impls, raw, reason):
    body = encode_batch([(0, b"ok", "")]) + raw
    with pytest.raises(RecordError) as err:
        impls[0](body, batch.stamp({}), 100)
    assert err.value.reason == reason
    assert err.value.offset == 24


@pytest.mark.parametrize("impls", IMPLS)
@pytest.mark.parametrize("bad", [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"a\xe4\xb8"])
def test_properties_that_are_not_utf8_are_refused(impls, bad):
    body = encode_batch([(0, b"", "")])[:-2] + len(bad).to_bytes(2, "big") + bad
    with pytest.raises(RecordError, match="not UTF-8"):
        impls[0](body, batch.stamp({}), 100)


@pytest.mark.parametrize("impls", IMPLS)
def test_properties_too_long_once_stamped_are_refused(impls):
    own = "K\x01" + "v" * (MAX_PROPERTIES_LEN - 4) + "\x02"  # fits alone
    body = encode_batch([(0, b"", own)])
    assert impls[0](body, batch.stamp({}), 100)[0] == 1
    with pytest.raises(batch.PropertiesTooLong, match="at most 32767"):
        impls[0](body, batch.stamp({"CLUSTER": "c"}), 100)


@pytest.mark.parametrize("impls", IMPLS)
def test_a_buffer_too_small_is_refused(impls):
    body = encode_batch([(0, b"x" * 100, "")])
    template, tail, _ = layout()
    with pytest.raises(ValueError, match="does not fit"):
        impls[1](bytearray(120), 0, body, batch.stamp({}), template, tail, 0, 0, None, ID_PREFIX)


def test_the_container_may_carry_a_bounded_number_of_properties():
    assert len(batch.stamp({f"k{i}": "v" for i in range(batch.MAX_CONTAINER_KEYS)}).suffixes) == 4096
    with pytest.raises(ValueError, match="at most 12"):
        batch.stamp({f"k{i}": "v" for i in range(batch.MAX_CONTAINER_KEYS + 1)})


def test_the_stamp_appends_what_an_entry_lacks():
    s = batch.stamp({"WAIT": "true", "CLUSTER": "c"})
    assert s.suffixes == (encode_properties({"WAIT": "true", "CLUSTER": "c"}).encode(), b"CLUSTER\x01c\x02",
                          b"WAIT\x01true\x02", b"")
