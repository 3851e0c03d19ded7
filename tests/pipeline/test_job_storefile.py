"""The storefile job: a store's commit-log files read offline give the rows, and the records, the broker
serves for the same offsets."""

from __future__ import annotations

import dataclasses
import shutil
import struct

import pytest
from pyspark.errors import AnalysisException

from ferrymq.pipeline.jobs.storefile import StoreFileSpec, store_frame
from ferrymq.pipeline.store_files import segment_messages, segment_paths
from ferrymq.sdk import Message
from ferrymq.wire.message import MessageConst

from .conftest import send
from .test_write import pull_all

#: what the pull consumer adds to every message it hands over (the queue's bounds at the pull)
CLIENT_PROPERTIES = {MessageConst.MIN_OFFSET, MessageConst.MAX_OFFSET}


def served(message) -> dict:
    return {k: v for k, v in message.properties.items() if k not in CLIENT_PROPERTIES}


def messages(topic: str) -> list[Message]:
    out = [Message(topic, f"body {i}".encode(), tags=f"T{i % 2}", keys=[f"k{i}", "all"]) for i in range(6)]
    out[1].put_user_property("price", "12")
    out.append(Message(topic, b"compressible " * 800, tags="big"))  # over 4 KiB: the producer compresses it
    return out


def test_store_files_hold_the_records_and_rows_the_broker_serves(spark, server, topic):
    send(server, messages(topic))
    pulled = {(m.queue_id, m.queue_offset): m for m in pull_all(server, topic)}
    assert len(pulled) == 7 and any(m.sys_flag & 1 for m in pulled.values())  # the big one is stored compressed

    stored = {(m.queue_id, m.queue_offset): m for path in segment_paths(str(server.home / "store"))
              for m in segment_messages(path) if m.topic == topic}
    assert stored.keys() == pulled.keys()
    for key, m in stored.items():
        # every field of the record, offsetMsgId and commit-log offset included, the body inflated
        theirs = pulled[key]
        assert dataclasses.replace(m, properties=served(m)) == dataclasses.replace(theirs, properties=served(theirs))
        assert m.offset_msg_id == pulled[key].offset_msg_id and m.msg_id == pulled[key].msg_id

    from_files = store_frame(spark, StoreFileSpec(str(server.home / "store"), "broker-a", (topic,))).collect()
    from_broker = spark.read.format("rocketmq").options(nameServer=server.namesrv_addr, topic=topic).load().collect()

    def comparable(row) -> dict:
        d = row.asDict()
        return {**d, "properties": {k: v for k, v in d["properties"].items() if k not in CLIENT_PROPERTIES}}

    key = lambda d: (d["queueId"], d["queueOffset"])  # noqa: E731
    assert sorted(map(comparable, from_files), key=key) == sorted(map(comparable, from_broker), key=key)


def test_a_segment_ends_at_a_record_that_does_not_decode(server, topic, tmp_path):
    send(server, [Message(topic, f"m{i}".encode()) for i in range(3)])
    source = next(p for p in segment_paths(str(server.home / "store"))
                  if any(m.topic == topic for m in segment_messages(p)))
    ours = list(segment_messages(source))
    copy = tmp_path / source.name
    shutil.copyfile(source, copy)
    third = ours[-2]  # the second-to-last record: the ones before it stay readable, it and the last do not
    with open(copy, "r+b") as f:
        f.seek(third.commitlog_offset - int(source.name) + 4)
        f.write(struct.pack(">I", 0x12345678))  # its magic
    assert [m.commitlog_offset for m in segment_messages(copy)] == [m.commitlog_offset for m in ours[:-2]]


def test_a_path_without_segments_fails_at_load(spark, tmp_path):
    with pytest.raises(AnalysisException, match="rocketmq option path: .* holds no commit-log segment"):
        spark.read.format("rocketmq-store").load(str(tmp_path))
