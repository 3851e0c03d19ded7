"""Framing and header codecs: round trips in both serializations, any split of a stream, bad input."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferrymq.wire import frame, layouts
from ferrymq.wire.codes import LanguageCode, SerializeType
from ferrymq.wire.command import RemotingCommand, parts_response
from ferrymq.wire.errors import FrameError, FrameTooLarge, HeaderError
from ferrymq.wire.serialization import decode_json_header, encode_rocketmq_header

text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
commands = st.builds(
    RemotingCommand,
    code=st.integers(-32768, 32767),
    opaque=st.integers(-(2**31), 2**31 - 1),
    flag=st.integers(0, 3),
    language=st.sampled_from(list(LanguageCode)),
    version=st.integers(0, 32767),
    remark=st.one_of(st.none(), text.filter(bool)),
    ext_fields=st.one_of(st.none(), st.dictionaries(text.filter(bool), text.filter(bool), min_size=1, max_size=8)),
    body=st.binary(max_size=300),
    serialize_type=st.sampled_from(list(SerializeType)),
)


def roundtrip(cmd: RemotingCommand) -> RemotingCommand:
    decoded = frame.FrameDecoder().feed(frame.encode(cmd))
    assert len(decoded) == 1
    return decoded[0]


@given(commands)
def test_every_command_round_trips(cmd):
    assert roundtrip(cmd) == cmd


@given(commands, st.lists(st.binary(max_size=100), max_size=6))
def test_a_body_in_parts_encodes_as_the_joined_body(cmd, chunks):
    """A pull answer's body is views of the commit log written straight into the frame: same bytes on the
    wire as the joined body, and ``body`` still reads as the whole."""
    mapping = bytearray(b"".join(chunks))
    views, pos = [], 0
    for c in chunks:
        views.append(memoryview(mapping)[pos : pos + len(c)])
        pos += len(c)
    parts = parts_response(cmd, 0, cmd.remark, cmd.ext_fields, views)
    whole = cmd.response(0, cmd.remark, cmd.ext_fields, bytes(mapping))
    assert frame.encode(parts) == frame.encode(whole)
    assert parts.body == bytes(mapping) and parts == whole and whole == parts
    assert roundtrip(parts) == whole


@given(st.lists(commands, min_size=1, max_size=5), st.data())
def test_any_split_of_a_stream_yields_the_same_commands(cmds, data):
    stream = b"".join(frame.encode(c) for c in cmds)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    decoder = frame.FrameDecoder()
    out = []
    last = 0
    for cut in cuts + [len(stream)]:
        out += decoder.feed(stream[last:cut])
        last = cut
    assert out == cmds
    assert decoder.buffered == 0


def test_json_worked_example_from_the_reference():
    cmd = RemotingCommand(code=105, opaque=7, version=479, ext_fields={"topic": "TopicTest"})
    expected = bytes.fromhex("0000008700000083") + (
        b'{"code":105,"extFields":{"topic":"TopicTest"},"flag":0,"language":"JAVA","opaque":7,'
        b'"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    assert frame.encode(cmd) == expected


def test_rocketmq_worked_example_from_the_reference():
    cmd = RemotingCommand(
        code=105, opaque=7, version=479, ext_fields={"topic": "TopicTest"}, serialize_type=SerializeType.ROCKETMQ
    )
    expected = bytes.fromhex(
        "0000002d01000029" "0069" "00" "01df" "00000007" "00000000" "00000000" "00000014"
        "0005" + b"topic".hex() + "00000009" + b"TopicTest".hex()
    )
    assert frame.encode(cmd) == expected


@settings(max_examples=150)
@given(commands.filter(lambda c: c.serialize_type == SerializeType.ROCKETMQ))
def test_struct_codec_agrees_with_construct_spec(cmd):
    header = encode_rocketmq_header(cmd)
    spec = layouts.RocketMQHeader.build(
        dict(
            code=cmd.code,
            language=int(cmd.language),
            version=cmd.version,
            opaque=cmd.opaque,
            flag=cmd.flag,
            remark=cmd.remark or "",
            ext_fields=[dict(key=k, value=v) for k, v in (cmd.ext_fields or {}).items()],
        )
    )
    assert header == spec
    whole = frame.encode(cmd)
    parsed = layouts.Frame.parse(whole)
    assert parsed.word.serialize_type == 1
    assert parsed.header == header
    assert parsed.body == cmd.body


def test_go_style_json_header_is_read_leniently():
    raw = b'{"code":34,"language":"GO","version":317,"opaque":12,"flag":0,"remark":"","extFields":{"n":5,"b":true}}'
    cmd = decode_json_header(raw)
    assert cmd.language == LanguageCode.GO
    assert cmd.ext_fields == {"n": "5", "b": "true"}
    assert decode_json_header(b'{"code":1,"language":9}').language == LanguageCode.GO


def test_oversized_frame_is_refused_before_buffering():
    decoder = frame.FrameDecoder(max_frame_size=1024)
    with pytest.raises(FrameTooLarge, match="exceeds the limit of 1024"):
        decoder.feed(struct.pack(">i", 1025))
    with pytest.raises(FrameError):
        decoder.feed(b"more")  # a failed decoder stays failed


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">ii", 4, 10),  # header length beyond the frame
        struct.pack(">ii", 6, 0x05000002) + b"{}",  # unknown serialization type
        struct.pack(">ii", 7, 3) + b"{x}",  # JSON header that is not JSON
        struct.pack(">ii", 6, 2) + b"[]",  # JSON header that is not an object
        struct.pack(">ii", 14, 0x0100000A) + b"\x00" * 10,  # ROCKETMQ header shorter than its fixed part
        struct.pack(">i", 2) + b"\x00\x00",  # frame shorter than the header word
    ],
)
def test_malformed_frames_raise_frame_errors(payload):
    with pytest.raises(FrameError):
        frame.FrameDecoder().feed(payload)


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_anything_but_frame_errors(data):
    try:
        frame.FrameDecoder().feed(data)
    except FrameError:
        pass


@given(commands, st.data())
def test_mutated_frames_raise_only_frame_errors(cmd, data):
    raw = bytearray(frame.encode(cmd))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(raw) - 1))
        raw[i] = data.draw(st.integers(0, 255))
    try:
        frame.FrameDecoder().feed(bytes(raw))
    except FrameError:
        pass


def test_rocketmq_ext_field_overrun_is_a_header_error():
    cmd = RemotingCommand(code=1, ext_fields={"k": "v"}, serialize_type=SerializeType.ROCKETMQ)
    raw = bytearray(frame.encode(cmd))
    raw[-5:-1] = struct.pack(">i", 99)  # value length larger than what remains
    with pytest.raises(HeaderError):
        frame.FrameDecoder().feed(bytes(raw))
