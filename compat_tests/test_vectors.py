"""Golden vectors: frames captured from the official Java (5.5.0, 4.9.8) and Go (2.1.2) clients and from
Apache RocketMQ 5.5.0 (see vectors/README.md). FerryMQ's codecs must read every one of them, and write
them back byte for byte where the original's layout is the canonical one.

Needs no Java or Go: the bytes are committed.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from ferrymq.wire.codes import LanguageCode, RequestCode, ResponseCode, SerializeType
from ferrymq.wire.frame import FrameDecoder, encode

HERE = Path(__file__).resolve().parent / "vectors"
MANIFEST = orjson.loads((HERE / "manifest.json").read_bytes())
VECTORS = MANIFEST["vectors"]


def _ids(v: dict) -> str:
    return v["file"].removesuffix(".bin")


def _decode_one(raw: bytes):
    decoder = FrameDecoder()
    commands = decoder.feed(raw)
    assert len(commands) == 1 and decoder.buffered == 0
    return commands[0]


def test_manifest_covers_what_issue_2_asks():
    kinds = {(v["run"], v["code"], v["direction"]) for v in VECTORS}
    for run in ("java-5.5.0", "java-4.9.8", "java-5.5.0-rocketmq"):
        for code in (RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE, RequestCode.HEART_BEAT,
                     RequestCode.GET_ROUTEINFO_BY_TOPIC):
            assert (run, code, "client-to-server") in kinds, (run, code)
    for code in (RequestCode.SEND_MESSAGE, RequestCode.PULL_MESSAGE, RequestCode.HEART_BEAT,
                 RequestCode.GET_ROUTEINFO_BY_TOPIC):
        assert ("go-2.1.2", code, "client-to-server") in kinds, code
    pulls = [v for v in VECTORS if v["answers_request_code"] == RequestCode.PULL_MESSAGE and v["body_size"] > 0]
    assert pulls, "no PULL_MESSAGE response with messages"


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_frame_decodes(vector):
    raw = (HERE / vector["file"]).read_bytes()
    cmd = _decode_one(raw)
    assert cmd.code == vector["code"]
    assert cmd.serialize_type == SerializeType[vector["serialize"]]
    assert cmd.language == LanguageCode[vector["language"]]
    assert cmd.version == vector["version"]
    assert len(cmd.body) == vector["body_size"]
    assert cmd.is_response == (vector["direction"] == "server-to-client")

    # The same stream cut into 1-byte reads gives the same command.
    decoder = FrameDecoder()
    pieces = [c for i in range(len(raw)) for c in decoder.feed(raw[i:i + 1])]
    assert pieces == [cmd]


@pytest.mark.parametrize("vector", VECTORS, ids=_ids)
def test_frame_reencodes(vector):
    """Java (fastjson: alphabetical keys) and ROCKETMQ headers come back byte for byte; Go writes JSON
    keys in struct order, so for Go the re-encoded frame must decode to the same command instead."""
    raw = (HERE / vector["file"]).read_bytes()
    cmd = _decode_one(raw)
    again = encode(cmd)
    if vector["language"] == "GO" and vector["serialize"] == "JSON":
        assert _decode_one(again) == cmd
        assert again != raw  # if Go ever writes fastjson order, this vector can move to the exact group
    else:
        assert again == raw


# ------------------------------------------------------------ typed headers, bodies, message records

def _vector(run: str, code: int, direction: str = "client-to-server") -> list[dict]:
    return [v for v in VECTORS if v["run"] == run and v["code"] == code and v["direction"] == direction]


def _cmd(vector: dict):
    return _decode_one((HERE / vector["file"]).read_bytes())


REQUESTS = [v for v in VECTORS if v["direction"] == "client-to-server"]
ANSWERS = [v for v in VECTORS if v["direction"] == "server-to-client" and v["code"] == ResponseCode.SUCCESS]


@pytest.mark.parametrize("vector", REQUESTS, ids=_ids)
def test_request_header_is_typed(vector):
    from ferrymq.wire.requests import decode_request_header

    cmd = _cmd(vector)
    hdr = decode_request_header(cmd)
    if cmd.code in (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2):
        assert hdr.topic == vector["topic"]
        assert hdr.default_topic == "TBW102"
        assert hdr.producer_group in ("compat_java_producer", "goharness_producer")
        assert cmd.body == f"golden vector from {vector['run']} #0".encode()
    elif cmd.code == RequestCode.PULL_MESSAGE:
        assert (hdr.topic, hdr.consumer_group) == (vector["topic"], vector["group"])
        assert hdr.queue_offset >= 0 and hdr.max_msg_nums > 0
    elif cmd.code == RequestCode.GET_ROUTEINFO_BY_TOPIC:
        assert hdr.topic == vector["topic"]
    elif cmd.code == RequestCode.REGISTER_BROKER:
        assert (hdr.broker_name, hdr.cluster_name, hdr.broker_id) == ("compat-broker-a", "CompatCluster", 0)


@pytest.mark.parametrize("vector", [v for v in ANSWERS if v["answers_request_code"] in
                                    (RequestCode.SEND_MESSAGE, RequestCode.SEND_MESSAGE_V2, RequestCode.PULL_MESSAGE)],
                         ids=_ids)
def test_response_header_is_typed(vector):
    from ferrymq.wire.requests import decode_response_header

    cmd = _cmd(vector)
    hdr = decode_response_header(vector["answers_request_code"], cmd)
    if vector["answers_request_code"] == RequestCode.PULL_MESSAGE:
        assert hdr.next_begin_offset > 0 and hdr.max_offset >= hdr.next_begin_offset
        assert hdr.suggest_which_broker_id == 0
    else:
        assert hdr.queue_id >= 0 and hdr.queue_offset >= 0
        assert len(hdr.msg_id) == 32  # offset message id of an IPv4 store host


@pytest.mark.parametrize("vector", [v for v in REQUESTS if v["code"] == RequestCode.HEART_BEAT], ids=_ids)
def test_heartbeat_body(vector):
    from ferrymq.wire.bodies import HeartbeatData

    data = HeartbeatData.decode(_cmd(vector).body)
    assert data.client_id
    groups = {c.group_name for c in data.consumer_data_set}
    assert vector["group"] in groups
    (consumer,) = [c for c in data.consumer_data_set if c.group_name == vector["group"]]
    topics = {s.topic for s in consumer.subscription_data_set}
    assert {vector["topic"], f"%RETRY%{vector['group']}"} <= topics


@pytest.mark.parametrize("vector", [v for v in ANSWERS if v["answers_request_code"] == RequestCode.GET_ROUTEINFO_BY_TOPIC],
                         ids=_ids)
def test_route_body(vector):
    from ferrymq.wire.bodies import TopicRouteData

    route = TopicRouteData.decode(_cmd(vector).body)
    (broker,) = route.broker_datas
    assert (broker.cluster, broker.broker_name) == ("CompatCluster", "compat-broker-a")
    assert broker.broker_addrs[0].startswith("127.0.0.2:")
    assert {q.broker_name for q in route.queue_datas} == {"compat-broker-a"}


def test_register_broker_body_from_apache_broker():
    from ferrymq.wire.bodies import RegisterBrokerBody

    (vector,) = _vector("apache-broker-5.5.0", RequestCode.REGISTER_BROKER)
    cmd = _cmd(vector)
    body = RegisterBrokerBody.decode(cmd.body, compressed=cmd.ext("compressed") == "true")
    topics = body.topic_config_serialize_wrapper.topic_config_table
    assert "TBW102" in topics and "SCHEDULE_TOPIC_XXXX" in topics


@pytest.mark.parametrize("vector", [v for v in ANSWERS if v["answers_request_code"] == RequestCode.PULL_MESSAGE],
                         ids=_ids)
def test_pull_response_messages(vector):
    from ferrymq.wire.message import decode_records

    messages = decode_records(_cmd(vector).body)
    assert messages
    for msg in messages:
        assert msg.topic == vector["topic"]
        assert msg.body.startswith(f"golden vector from {vector['run']} #".encode())
        assert msg.tags == "TagA" and msg.keys == ["KeyA"]
        assert msg.uniq_key and msg.store_host[0] == "127.0.0.2"
