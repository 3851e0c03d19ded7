"""Offset stores and the process queue: what offset a consumer commits, and where it keeps it."""

from __future__ import annotations

from twisted.internet import defer

from ferrymq.sdk.consumer.offset_store import LocalFileOffsetStore, ReadOffsetType, RemoteOffsetStore
from ferrymq.sdk.consumer.process_queue import ProcessQueue
from ferrymq.wire.bodies import MessageQueue
from ferrymq.wire.message import MessageExt

MQ0 = MessageQueue("T", "b", 0)
MQ1 = MessageQueue("T", "b", 1)


def result(d: defer.Deferred):
    out = []
    d.addBoth(out.append)
    assert out, "Deferred did not fire synchronously"
    if hasattr(out[0], "raiseException"):
        out[0].raiseException()
    return out[0]


def msgs(*offsets: int) -> list[MessageExt]:
    return [MessageExt("T", b"x", queue_offset=o) for o in offsets]


# ------------------------------------------------------------------ process queue


def test_commit_offset_never_passes_a_message_still_in_flight():
    pq = ProcessQueue()
    m = msgs(10, 11, 12, 13)
    pq.put(m)
    assert pq.remove([m[2], m[3]]) == 10, "12 and 13 done, 10 still running: commit stays at 10"
    assert pq.remove([m[0]]) == 11
    assert pq.remove([m[1]]) == 14, "all done: one past the highest pulled"
    assert pq.remove([m[1]]) == -1, "nothing held"


def test_orderly_take_commit_and_retry():
    pq = ProcessQueue()
    pq.put(msgs(5, 3, 4))
    taken = pq.take(2)
    assert [m.queue_offset for m in taken] == [3, 4] and pq.msg_count == 3
    pq.make_available(taken)
    again = pq.take(2)
    assert [m.queue_offset for m in again] == [3, 4], "the same messages come back, in order"
    assert pq.commit() == 5
    assert [m.queue_offset for m in pq.take(5)] == [5] and pq.commit() == 6
    assert pq.commit() == -1


# ------------------------------------------------------------------ local store (BROADCASTING)


def test_local_store_writes_java_offsets_json_and_reads_it_back(tmp_path):
    store = LocalFileOffsetStore("g", "10.0.0.1@1", tmp_path)
    store.update_offset(MQ0, 7)
    store.update_offset(MQ0, 5, increase_only=True)
    store.update_offset(MQ1, 3)
    result(store.persist_all([MQ0, MQ1]))
    text = store.path.read_text()
    assert store.path == tmp_path / "10.0.0.1@1" / "g" / "offsets.json"
    assert text.startswith('{"offsetTable":{{"brokerName":"b","queueId":0,"topic":"T"}:7'), text

    again = LocalFileOffsetStore("g", "10.0.0.1@1", tmp_path)
    assert result(again.read_offset(MQ0, ReadOffsetType.READ_FROM_MEMORY)) == -1, "nothing loaded yet"
    assert result(again.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE)) == 7
    again.load()
    assert again.table == {MQ0: 7, MQ1: 3}


def test_local_store_falls_back_to_its_backup(tmp_path):
    store = LocalFileOffsetStore("g", "c", tmp_path)
    store.update_offset(MQ0, 1)
    result(store.persist_all([MQ0]))
    store.update_offset(MQ0, 2)
    result(store.persist_all([MQ0]))
    store.path.write_text("{not json")
    fresh = LocalFileOffsetStore("g", "c", tmp_path)
    fresh.load()
    assert fresh.table == {MQ0: 1}, "the corrupt file is skipped for the previous version"


# ------------------------------------------------------------------ remote store (CLUSTERING)


class FakeAPI:
    def __init__(self, stored: dict):
        self.stored = stored
        self.updates: list[tuple] = []

    def query_consumer_offset(self, addr, group, mq):
        return defer.succeed(self.stored.get(mq, -1))

    def update_consumer_offset(self, addr, group, mq, offset, *, oneway=True):
        self.updates.append((addr, group, mq, offset, oneway))
        return defer.succeed(None)


def test_remote_store_reads_from_broker_and_persists_owned_queues_only():
    api = FakeAPI({MQ0: 42})
    store = RemoteOffsetStore("g", api, lambda mq: defer.succeed("10.0.0.9:10911"))
    assert result(store.read_offset(MQ0, ReadOffsetType.READ_FROM_STORE)) == 42
    assert result(store.read_offset(MQ1, ReadOffsetType.READ_FROM_STORE)) == -1, "22 from the broker"
    assert result(store.read_offset(MQ0, ReadOffsetType.READ_FROM_MEMORY)) == 42
    store.update_offset(MQ1, 9)
    result(store.persist_all([MQ0]))
    assert api.updates == [("10.0.0.9:10911", "g", MQ0, 42, True)], "oneway, and only the owned queue"
    assert MQ1 not in store.table, "offsets of queues no longer owned are forgotten"
    result(store.persist(MQ0))
    assert api.updates[-1][-1] is False, "a single persist waits for the broker"

