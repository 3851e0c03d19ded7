"""Replay the official clients' recorded frames (compat_tests/vectors) through the broker's processors and
compare the answers with what Apache RocketMQ 5.5.0 answered to the very same frames."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferrymq.remoting import dispatch
from ferrymq.remoting.pending import PROMISES
from ferrymq.wire.bodies import GetConsumerListByGroupResponseBody, HeartbeatData
from ferrymq.wire.codes import ResponseCode
from ferrymq.wire.frame import FrameDecoder
from ferrymq.wire.message import decode_records

VECTORS = Path(__file__).resolve().parents[2] / "compat_tests" / "vectors"
RUNS = ["java-5.5.0", "java-5.5.0-rocketmq", "java-4.9.8", "go-2.1.2"]


def frame(name: str):
    path = VECTORS / name
    if not path.exists():
        pytest.skip(f"golden vector {name} is not in compat_tests/vectors")
    return FrameDecoder().feed(path.read_bytes())[0]


def answer(bk, cmd):
    result = dispatch(bk.table, cmd, bk.channel)
    if isinstance(result, PROMISES):
        box = []
        result.addCallback(lambda r: box.append(r) or r)
        bk.clock.advance(30)
        return box[0]
    return result


@pytest.mark.parametrize("run", RUNS)
def test_send_heartbeat_pull_answers_match_apache(bk, run):
    send_name = f"{run}-SEND_MESSAGE{'' if run.startswith('go') else '_V2'}"
    send_req, send_apache = frame(f"{send_name}-request.bin"), frame(f"{send_name}-response.bin")
    ours = answer(bk, send_req)
    assert ours.code == send_apache.code == 0, ours.remark
    assert set(ours.ext_fields) == set(send_apache.ext_fields)
    for key in ("queueId", "queueOffset", "transactionId", "MSG_REGION", "TRACE_ON"):
        assert ours.ext_fields[key] == send_apache.ext_fields[key], key
    assert len(ours.ext_fields["msgId"]) == len(send_apache.ext_fields["msgId"]) == 32

    hb_req, hb_apache = frame(f"{run}-HEART_BEAT-request.bin"), frame(f"{run}-HEART_BEAT-response.bin")
    hb = answer(bk, hb_req)
    assert hb.code == hb_apache.code == 0 and hb.ext_fields is not None
    assert set(hb.ext_fields) == set(hb_apache.ext_fields)

    pull_req = frame(f"{run}-PULL_MESSAGE-request.bin")
    pull_apache = frame(f"{run}-PULL_MESSAGE-response-with-messages.bin")
    # Java bumps subVersion when rebalance assigns queues, then heartbeats again: only the first heartbeat
    # was recorded, so replay it with the version the pull carries (an older one is answered 25, as Apache).
    topic, version = pull_req.ext_fields["topic"], int(pull_req.ext_fields["subVersion"])
    data = HeartbeatData.decode(hb_req.body)
    for consumer in data.consumer_data_set:
        for sub in consumer.subscription_data_set:
            if sub.topic == topic and sub.sub_version < version:
                assert answer(bk, pull_req).code == ResponseCode.SUBSCRIPTION_NOT_LATEST
                sub.sub_version = version
    hb_req.body = data.encode()
    assert answer(bk, hb_req).code == 0
    if pull_req.ext_fields["queueId"] != send_req.ext_fields.get("e", send_req.ext_fields.get("queueId")):
        # the recorded pull read another queue than the recorded send wrote: feed that queue first
        bk.send(pull_req.ext_fields["topic"], b"filler", tags="TagA", queue_id=int(pull_req.ext_fields["queueId"]))
    pulled = answer(bk, pull_req)
    assert pulled.code == pull_apache.code == 0 and pulled.remark == pull_apache.remark == "FOUND"
    assert set(pulled.ext_fields) == set(pull_apache.ext_fields)
    for key in ("nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId", "topicSysFlag", "groupSysFlag"):
        assert pulled.ext_fields[key] == pull_apache.ext_fields[key], key
    mine, theirs = decode_records(pulled.body), decode_records(pull_apache.body)
    assert len(mine) == len(theirs) == 1 and mine[0].tags == theirs[0].tags == "TagA"



@pytest.mark.parametrize("run", RUNS)
def test_consumer_list_offsets_and_unregister_match_apache(bk, run):
    test_send_heartbeat_pull_answers_match_apache(bk, run)
    listed_req = frame(f"{run}-GET_CONSUMER_LIST_BY_GROUP-request.bin")
    listed_apache = frame(f"{run}-GET_CONSUMER_LIST_BY_GROUP-response.bin")
    listed = answer(bk, listed_req)
    assert listed.code == listed_apache.code == 0
    assert len(GetConsumerListByGroupResponseBody.decode(listed.body).consumer_id_list) == 1

    query_req = frame(f"{run}-QUERY_CONSUMER_OFFSET-request.bin")
    query_apache = frame(f"{run}-QUERY_CONSUMER_OFFSET-response.bin")
    queried = answer(bk, query_req)
    assert queried.code == query_apache.code and queried.remark == query_apache.remark
    assert (queried.ext_fields or {}).get("offset") == (query_apache.ext_fields or {}).get("offset")

    update_req = frame(f"{run}-UPDATE_CONSUMER_OFFSET-request.bin")
    assert answer(bk, update_req).code == 0  # (Java sends it oneway: the transport drops the answer)
    e = update_req.ext_fields
    assert bk.ctx.offsets.query(e["consumerGroup"], e["topic"], int(e["queueId"])) == int(e["commitOffset"])

    name = f"{run}-UNREGISTER_CLIENT-request.bin"
    if (VECTORS / name).exists():
        unregistered = answer(bk, frame(name))
        assert unregistered.code == frame(f"{run}-UNREGISTER_CLIENT-response.bin").code == 0
