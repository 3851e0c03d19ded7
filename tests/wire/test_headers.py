"""Typed headers: round trips (ext dict and full frames, both serializations), required fields, types, speed."""

from __future__ import annotations

import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferrymq.wire import frame, headers
from ferrymq.wire.codes import RequestCode, SerializeType
from ferrymq.wire.command import request
from ferrymq.wire.errors import BadField, FieldError, MissingField
from ferrymq.wire.headers import (
    GetMaxOffsetRequestHeader,
    PullMessageRequestHeader,
    SendMessageRequestHeader,
    SendMessageResponseHeader,
    UnregisterClientRequestHeader,
)
from ferrymq.wire.requests import REQUESTS, decode_request_header, decode_response_header, encode_request_header

#: request code -> its header class, for the codes whose requests (or answers) have fields.
REQUEST_HEADERS = {code: r.header for code, r in REQUESTS.items() if r.header is not None}
RESPONSE_HEADERS = {code: r.response for code, r in REQUESTS.items() if r.response is not None}
V2_SEND_CODES = {code for code, r in REQUESTS.items() if r.short_keys}

HEADER_CLASSES = sorted(
    {obj for obj in vars(headers).values() if isinstance(obj, type) and hasattr(obj, "FIELDS")},
    key=lambda cls: cls.__name__,
)

_VALUES = {
    str: st.text(st.characters(codec="utf-8"), max_size=12),
    int: st.integers(-(2**63), 2**63 - 1),
    bool: st.booleans(),
}


def instances(cls) -> st.SearchStrategy:
    kwargs = {}
    for f in cls.FIELDS:
        value = _VALUES[f.kind]
        kwargs[f.attr] = value if (f.required or f.default is not None) else (st.none() | value)
    return st.builds(cls, **kwargs)


def test_every_code_and_named_header_is_registered():
    expected = {
        "SendMessageRequestHeader", "SendMessageResponseHeader", "PullMessageRequestHeader", "PullMessageResponseHeader",
        "QueryConsumerOffsetRequestHeader", "QueryConsumerOffsetResponseHeader", "UpdateConsumerOffsetRequestHeader",
        "GetMaxOffsetRequestHeader", "GetMaxOffsetResponseHeader", "GetMinOffsetRequestHeader", "GetMinOffsetResponseHeader",
        "GetEarliestMsgStoretimeRequestHeader", "GetEarliestMsgStoretimeResponseHeader", "SearchOffsetRequestHeader",
        "SearchOffsetResponseHeader", "HeartbeatRequestHeader", "UnregisterClientRequestHeader",
        "GetConsumerListByGroupRequestHeader", "ConsumerSendMsgBackRequestHeader", "RegisterBrokerRequestHeader",
        "RegisterBrokerResponseHeader", "UnRegisterBrokerRequestHeader", "GetRouteInfoRequestHeader",
        "PutKVConfigRequestHeader", "GetKVConfigRequestHeader", "GetKVConfigResponseHeader", "DeleteKVConfigRequestHeader",
        "GetKVListByNamespaceRequestHeader", "WipeWritePermOfBrokerRequestHeader", "WipeWritePermOfBrokerResponseHeader",
        "AddWritePermOfBrokerRequestHeader", "AddWritePermOfBrokerResponseHeader", "DeleteTopicFromNamesrvRequestHeader",
        "GetTopicsByClusterRequestHeader", "QueryDataVersionRequestHeader", "QueryDataVersionResponseHeader",
        "EndTransactionRequestHeader", "CheckTransactionStateRequestHeader", "NotifyConsumerIdsChangedRequestHeader",
        "ResetOffsetRequestHeader", "GetConsumerStatusRequestHeader", "GetConsumerRunningInfoRequestHeader",
        "ConsumeMessageDirectlyResultRequestHeader", "CreateTopicRequestHeader", "DeleteTopicRequestHeader",
        "GetTopicStatsInfoRequestHeader", "GetConsumerConnectionListRequestHeader", "GetProducerConnectionListRequestHeader",
        "GetConsumeStatsRequestHeader", "DeleteSubscriptionGroupRequestHeader", "ViewMessageRequestHeader",
        "QueryMessageRequestHeader", "QueryMessageResponseHeader", "GetBrokerConfigResponseHeader",
        "QueryTopicConsumeByWhoRequestHeader", "GetAllTopicConfigRequestHeader", "GetAllSubscriptionGroupRequestHeader",
    }
    assert expected <= {cls.__name__ for cls in HEADER_CLASSES}
    registered = set(REQUEST_HEADERS.values()) | set(RESPONSE_HEADERS.values())
    assert set(HEADER_CLASSES) == registered  # so the frame round-trip tests below cover every class


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
def test_ext_round_trip(cls):
    @settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(instances(cls))
    def check(hdr):
        ext = hdr.to_ext()
        assert all(isinstance(k, str) and isinstance(v, str) for k, v in ext.items())
        assert cls.from_ext(ext) == hdr
        if hasattr(cls, "to_ext_v2"):
            assert cls.from_ext_v2(hdr.to_ext_v2()) == hdr

    check()


def _through_frame(cmd, stype):
    cmd.serialize_type = stype
    data = frame.encode(cmd)
    decoder = frame.FrameDecoder()
    out = []
    for i in range(0, len(data), 7):  # any split of the stream
        out += decoder.feed(data[i : i + 7])
    (decoded,) = out
    return decoded


# the ROCKETMQ header holds the code in a short: codes past 0x7FFF (POP's) travel as JSON only, as Java's do
@pytest.mark.parametrize("code, stype", [
    pytest.param(code, stype, id=f"{RequestCode(code).name}-{stype.name.lower()}")
    for stype in (SerializeType.JSON, SerializeType.ROCKETMQ)
    for code in sorted(REQUEST_HEADERS) if stype is SerializeType.JSON or code <= 0x7FFF])
def test_request_headers_survive_a_full_frame(code, stype):
    cls = REQUEST_HEADERS[code]

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(instances(cls))
    def check(hdr):
        cmd = request(code, encode_request_header(code, hdr))
        decoded = _through_frame(cmd, stype)
        assert decode_request_header(decoded) == hdr

    check()


@pytest.mark.parametrize("stype", [SerializeType.JSON, SerializeType.ROCKETMQ], ids=["json", "rocketmq"])
@pytest.mark.parametrize("code", sorted(RESPONSE_HEADERS), ids=lambda c: RequestCode(c).name)
def test_response_headers_survive_a_full_frame(code, stype):
    cls = RESPONSE_HEADERS[code]

    @settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(instances(cls))
    def check(hdr):
        cmd = request(code).response(0, ext_fields=hdr.to_ext())
        assert decode_response_header(code, _through_frame(cmd, stype)) == hdr

    check()


def _sample(cls):
    """A valid ext dict for ``cls`` with every field present."""
    values = {str: "x", int: "7", bool: "true"}
    return {f.wire: values[f.kind] for f in cls.FIELDS}


@pytest.mark.parametrize("cls", [c for c in HEADER_CLASSES if any(f.required for f in c.FIELDS)], ids=lambda c: c.__name__)
def test_each_missing_required_field_is_named(cls):
    full = _sample(cls)
    cls.from_ext(full)
    for f in cls.FIELDS:
        partial = {k: v for k, v in full.items() if k != f.wire}
        if f.required:
            with pytest.raises(MissingField) as info:
                cls.from_ext(partial)
            assert info.value.field == f.wire
            assert cls.__name__ in str(info.value)
        else:
            cls.from_ext(partial)
    with pytest.raises(MissingField):
        cls.from_ext(None)


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
def test_wrongly_typed_fields_are_named(cls):
    full = _sample(cls)
    for f in cls.FIELDS:
        if f.kind is not int:  # strings take anything; booleans read as Java's parseBoolean
            continue
        with pytest.raises(BadField) as info:
            cls.from_ext({**full, f.wire: "12abc"})
        assert info.value.field == f.wire


def test_booleans_read_as_javas_parse_boolean():
    ext = {"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "0", "f": "0", "g": "1", "h": "0", "k": "0", "m": "TrUe"}
    hdr = decode_request_header(request(RequestCode.SEND_MESSAGE_V2, ext))  # the C++ client's spelling
    assert hdr.unit_mode is False and hdr.batch is True


def test_java_send_message_v2_header():
    ext = {
        "a": "pg", "b": "TopicTest", "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1732200000000", "h": "0",
        "i": "KEYS\x01k1\x02UNIQ_KEY\x01C0A8\x02WAIT\x01true\x02TAGS\x01TagA\x02", "j": "0", "k": "false", "m": "false",
        "n": "broker-a",
    }
    hdr = decode_request_header(request(RequestCode.SEND_MESSAGE_V2, ext))
    assert hdr == SendMessageRequestHeader(
        "pg", "TopicTest", "TBW102", 4, 2, 0, 1732200000000, 0, ext["i"], 0, False, None, False, "broker-a"
    )
    assert hdr.to_ext_v2() == ext
    batch = decode_request_header(request(RequestCode.SEND_BATCH_MESSAGE, {**ext, "m": "true"}))
    assert batch.batch is True


def test_go_send_message_long_header():
    """Go sends code 10 with long names and empty strings where it has nothing to say."""
    ext = {
        "producerGroup": "pg", "topic": "T", "queueId": "1", "sysFlag": "0", "bornTimestamp": "1732200000000",
        "flag": "0", "reconsumeTimes": "0", "unitMode": "false", "maxReconsumeTimes": "0", "defaultTopic": "TBW102",
        "defaultTopicQueueNums": "4", "batch": "false", "properties": "", "bname": "",
    }
    hdr = decode_request_header(request(RequestCode.SEND_MESSAGE, ext))
    assert (hdr.topic, hdr.queue_id, hdr.batch, hdr.properties, hdr.broker_name, hdr.max_reconsume_times) == ("T", 1, False, "", "", 0)


def test_empty_optional_number_counts_as_absent():
    hdr = PullMessageRequestHeader.from_ext(
        {"consumerGroup": "g", "topic": "T", "queueId": "0", "queueOffset": "0", "maxMsgNums": "32", "sysFlag": "2",
         "commitOffset": "0", "suspendTimeoutMillis": "20000", "subVersion": "0", "maxMsgBytes": "", "subscription": ""}
    )
    assert hdr.max_msg_bytes is None and hdr.subscription == ""


def test_primitive_defaults_are_written_and_read():
    assert GetMaxOffsetRequestHeader("T", 3).to_ext() == {"topic": "T", "queueId": "3", "committed": "true"}
    assert GetMaxOffsetRequestHeader.from_ext({"topic": "T", "queueId": "3"}).committed is True


def test_explicit_wire_names():
    assert UnregisterClientRequestHeader("1.2.3.4@1").to_ext() == {"clientID": "1.2.3.4@1"}
    ext = SendMessageResponseHeader("0A00", 1, 5, msg_region="DefaultRegion", trace_on=True).to_ext()
    assert ext == {"msgId": "0A00", "queueId": "1", "queueOffset": "5", "MSG_REGION": "DefaultRegion", "TRACE_ON": "true"}


def test_v2_codes_use_short_keys():
    hdr = SendMessageRequestHeader("pg", "T", "TBW102", 4, 0, 0, 1, 0)
    assert V2_SEND_CODES == {RequestCode.SEND_MESSAGE_V2, RequestCode.SEND_BATCH_MESSAGE, RequestCode.SEND_REPLY_MESSAGE_V2}
    for code in V2_SEND_CODES:
        assert set(encode_request_header(code, hdr)) == set("abcdefgh")
    assert "producerGroup" in encode_request_header(RequestCode.SEND_MESSAGE, hdr)


def test_codes_without_fields_decode_to_none():
    assert decode_request_header(request(RequestCode.GET_BROKER_CLUSTER_INFO)) is None


def test_send_v2_decode_is_fast():
    """Hot path: a few microseconds at most (generous bound for a shared CI machine)."""
    ext = SendMessageRequestHeader("pg", "TopicTest", "TBW102", 4, 1, 0, 1732200000000, 0, "UNIQ_KEY\x01x\x02", 0, False, None, False, "b").to_ext_v2()
    decode = SendMessageRequestHeader.from_ext_v2
    n = 20000
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(n):
            decode(ext)
        best = min(best, (time.perf_counter() - start) / n)
    assert best < 10e-6, f"SEND_MESSAGE_V2 header decode took {best * 1e6:.2f} µs"


@pytest.mark.parametrize("cls", HEADER_CLASSES, ids=lambda c: c.__name__)
def test_arbitrary_ext_fields_give_a_header_or_a_field_error(cls):
    keys = st.sampled_from([f.wire for f in cls.FIELDS] + ["x", "bname"]) if cls.FIELDS else st.just("x")
    values = st.sampled_from(["", "0", "-1", "true", "false", "9" * 25, "1.5", " 3", "TRUE"]) | st.text(max_size=4)

    @settings(max_examples=40, deadline=None)
    @given(st.dictionaries(keys, values, max_size=len(cls.FIELDS) + 2))
    def check(ext):
        try:
            hdr = cls.from_ext(ext)
        except FieldError as exc:
            assert exc.field is not None and (exc.field in ext or isinstance(exc, MissingField))
            return
        assert cls.from_ext(hdr.to_ext()) == hdr

    check()
