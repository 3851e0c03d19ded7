"""fastjson-compatible JSON: compact output, bare/quoted int keys, object keys, lenient input."""

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ferrymq.wire import fastjson
from ferrymq.wire.errors import BodyError
from ferrymq.wire.fastjson import FrozenObject

MQ = {"brokerName": "b", "queueId": 0, "topic": "T"}


def test_compact_output_has_no_whitespace():
    assert fastjson.dumps({"a": [1, 2], "b": {"c": "d"}}) == b'{"a":[1,2],"b":{"c":"d"}}'


def test_int_keys_quoted_in_standard_mode_and_bare_in_legacy_mode():
    assert fastjson.dumps({0: "x", 1: "y"}) == b'{"0":"x","1":"y"}'
    assert fastjson.dumps({0: "x", 1: "y"}, quote_int_keys=False) == b'{0:"x",1:"y"}'
    nested = {"t": [{"m": {0: "a"}}]}
    assert fastjson.dumps(nested, quote_int_keys=False) == b'{"t":[{"m":{0:"a"}}]}'


def test_object_keys_are_written_as_objects_in_both_modes():
    key = FrozenObject(MQ)
    expected = b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5}}'
    assert fastjson.dumps({"offsetTable": {key: 5}}) == expected
    assert fastjson.dumps({"offsetTable": {key: 5}}, quote_int_keys=False) == expected


def test_string_escapes_survive_the_hand_writer():
    value = {FrozenObject({"k": 'q"\\\n\u00e9\x01'}): ['x"y', None, True, 1.5]}
    text = fastjson.dumps(value)
    assert fastjson.loads(text) == value


def test_lenient_reader_accepts_bare_numeric_keys_as_strings():
    assert fastjson.loads(b'{0:"a",-1:"b"}') == {"0": "a", "-1": "b"}
    assert fastjson.loads(b'{"0":"a"}') == {"0": "a"}


def test_lenient_reader_accepts_object_keys():
    parsed = fastjson.loads(b'{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:5,{"brokerName":"b","queueId":1,"topic":"T"}:6}}')
    table = parsed["offsetTable"]
    assert table[FrozenObject(MQ)] == 5
    assert table[FrozenObject({**MQ, "queueId": 1})] == 6
    assert len(table) == 2


def test_lenient_reader_accepts_whitespace_single_quotes_identifier_keys_and_trailing_commas():
    assert fastjson.loads(" { a : 'x' , 7 : [1 , 2 ,] , } ") == {"a": "x", "7": [1, 2]}


@pytest.mark.parametrize(
    "bad",
    [b"", b"{", b'{"a":}', b"{0 1}", b"[1 2]", b'{"a":1}x', b"nope", b'{"a":"unterminated}', b"\xff\xfe"],
)
def test_garbage_raises_body_error_with_position(bad):
    with pytest.raises(BodyError):
        fastjson.loads(bad)


def test_error_names_the_position():
    with pytest.raises(BodyError, match="character"):
        fastjson.loads(b"{0:1,")


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(_json)
def test_plain_json_round_trips_and_matches_stdlib(value):
    text = fastjson.dumps(value)
    assert fastjson.loads(text) == value
    assert json.loads(text) == value


@settings(max_examples=150, deadline=None)
@given(st.dictionaries(st.integers(-(2**40), 2**40), st.text(max_size=10), max_size=5), st.booleans())
def test_int_keyed_maps_read_back_in_both_modes(table, quoted):
    text = fastjson.dumps({"m": table}, quote_int_keys=quoted)
    assert {int(k): v for k, v in fastjson.loads(text)["m"].items()} == table


@settings(max_examples=100, deadline=None)
@given(
    st.dictionaries(
        st.builds(lambda b, q, t: FrozenObject({"brokerName": b, "queueId": q, "topic": t}), st.text(max_size=6), st.integers(0, 64), st.text(max_size=6)),
        st.integers(-(2**63), 2**63 - 1),
        max_size=5,
    )
)
def test_object_keyed_maps_round_trip(table):
    assert fastjson.loads(fastjson.dumps({"offsetTable": table}))["offsetTable"] == table


def test_body_objects_inside_plain_values_use_their_wire_names():
    from ferrymq.wire.bodies import MessageQueue, QueueData

    mq = MessageQueue("T", "b", 1)
    assert fastjson.dumps({"mq": mq}) == b'{"mq":{"brokerName":"b","queueId":1,"topic":"T"}}'
    assert fastjson.dumps([QueueData("b", 1, 2, 6, 0)]) == b'[{"brokerName":"b","perm":6,"readQueueNums":1,"topicSysFlag":0,"writeQueueNums":2}]'
    assert fastjson.dumps({mq: mq}, quote_int_keys=False) == b'{{"brokerName":"b","queueId":1,"topic":"T"}:{"brokerName":"b","queueId":1,"topic":"T"}}'


def test_unsupported_values_raise_type_error():
    with pytest.raises(TypeError):
        fastjson.dumps({"x": object()})
    with pytest.raises(TypeError):
        fastjson.dumps({object(): 1})
