"""The ROCKETMQ header in C (wire/_headerc.c) against its Python specification in wire/serialization.py:
the same bytes out, the same commands back, the same inputs refused."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ferrymq.wire import serialization
from ferrymq.wire.codes import LanguageCode, SerializeType
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.errors import HeaderError

try:
    from ferrymq.wire import _headerc
except ImportError:  # built at install only when a C compiler is present
    _headerc = None

pytestmark = pytest.mark.skipif(_headerc is None, reason="wire._headerc not built (no C compiler at install)")


@pytest.fixture(autouse=True)
def c_codec(monkeypatch):
    """The C codec even under FERRYMQ_PURE_PYTHON, which only stops the broker from using it."""
    monkeypatch.setattr(serialization, "_headerc", _headerc)


text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-32768, 32767),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(-(2**31), 2**31 - 1),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(-32768, 32767),
    remark=st.one_of(st.none(), text),
    ext_fields=st.one_of(st.none(), st.dictionaries(text, text, max_size=8)),
    serialize_type=st.just(SerializeType.ROCKETMQ),
)


def outcome(decode, data):
    try:
        return decode(data)
    except HeaderError:
        return HeaderError


@given(commands)
def test_c_writes_the_bytes_python_writes_and_reads_them_back(cmd):
    raw = serialization.encode_rocketmq_header(cmd)
    assert raw == serialization.encode_rocketmq_header_py(cmd)
    expected = serialization.decode_rocketmq_header_py(raw)
    assert serialization.decode_rocketmq_header(raw) == expected
    assert serialization.decode_rocketmq_header(memoryview(raw)) == expected


def test_values_that_are_not_str_are_written_as_fastjson_writes_them():
    cmd = RemotingCommand(code=10, ext_fields={"queueId": 3, "batch": False, "skip": None, "t": "x"},
                          serialize_type=SerializeType.ROCKETMQ)
    raw = serialization.encode_rocketmq_header(cmd)
    assert raw == serialization.encode_rocketmq_header_py(cmd)
    assert serialization.decode_rocketmq_header(raw).ext_fields == {"queueId": "3", "batch": "false", "t": "x"}


@given(commands, st.data())
def test_mutated_headers_are_refused_or_read_alike(cmd, data):
    raw = bytearray(serialization.encode_rocketmq_header_py(cmd))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(raw)))
    for candidate in (bytes(raw), bytes(raw[:cut])):
        assert outcome(serialization.decode_rocketmq_header, candidate) == outcome(
            serialization.decode_rocketmq_header_py, candidate)


@pytest.mark.parametrize(
    "raw, message",
    [
        (b"\x00" * 10, "shorter than its 21-byte fixed part"),
        (b"\x00" * 13 + struct.pack(">i", 50) + struct.pack(">i", 0), "remark length overruns"),
        (b"\x00" * 13 + struct.pack(">i", 0) + struct.pack(">i", 9), "extFields length overruns"),
        (b"\x00" * 13 + struct.pack(">i", 2) + b"\xff\xfe" + struct.pack(">i", 0), "remark is not UTF-8"),
        (b"\x00" * 13 + struct.pack(">ii", 0, 8) + b"\x00\x01k" + struct.pack(">i", 1) + b"\xff", "unreadable extFields"),
        (b"\x00" * 13 + struct.pack(">ii", 0, 8) + b"\x00\x01k" + struct.pack(">i", 7) + b"v", "value of 'k' overruns"),
        (b"\x00" * 13 + struct.pack(">ii", 0, 3) + b"\x00\x05k", "unreadable extFields"),
    ],
)
def test_bad_headers_name_what_is_wrong(raw, message):
    with pytest.raises(HeaderError, match=message):
        serialization.decode_rocketmq_header(raw)
    with pytest.raises(HeaderError):
        serialization.decode_rocketmq_header_py(raw)
