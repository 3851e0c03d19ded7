"""MessageStore facade: put/get semantics, batches, filters, listeners, lookups, restart."""

from __future__ import annotations

import os
import struct
import time

import pytest

from ferrymq.server.store import GetMessageStatus as G
from ferrymq.server.store import PutMessageStatus as P
from ferrymq.server.store import StoreLockedError, TagsCodeFilter
from ferrymq.server.store.consume_queue import UNIT, UNIT_SIZE
from ferrymq.wire.message import (
    BLANK_MAGIC,
    MessageSysFlag,
    decode_record,
    decode_records,
    java_string_hash,
)
from ferrymq.wire.msgid import parse_offset_msg_id

from .conftest import simulate_crash


def put(store, topic="T", qid=0, body=b"x" * 100, **props):
    r = store.put_message(topic, qid, body, props or {}, born_timestamp=123, born_host=("10.0.0.9", 5555))
    assert r.status is P.PUT_OK, r.remark
    return r


def test_put_and_get_round_trip(make_store):
    s = make_store()
    r1 = put(s, body=b"one", TAGS="TagA", KEYS="k1 k2")
    r2 = put(s, body=b"two", TAGS="TagB")
    assert (r1.queue_offset, r2.queue_offset) == (0, 1)
    assert r1.commitlog_offset == 0 and r2.commitlog_offset == r1.wrote_bytes
    assert parse_offset_msg_id(r2.msg_id) == (("127.0.0.1", 10911), r2.commitlog_offset)
    g = s.get_message("g", "T", 0, 0, 32)
    assert g.status is G.FOUND and g.next_begin_offset == 2 and (g.min_offset, g.max_offset) == (0, 2)
    msgs = decode_records(g.body())
    assert [m.body for m in msgs] == [b"one", b"two"]
    m = msgs[0]
    assert m.queue_offset == 0 and m.commitlog_offset == 0 and m.store_host == ("127.0.0.1", 10911)
    assert m.born_host == ("10.0.0.9", 5555) and m.born_timestamp == 123
    assert abs(m.store_timestamp - time.time() * 1000) < 5000
    assert m.properties == {"TAGS": "TagA", "KEYS": "k1 k2"}
    assert isinstance(g.messages[0], memoryview) and g.messages[0].readonly
    assert g.queue_offsets == [0, 1]


def test_get_statuses(make_store):
    s = make_store()
    assert s.get_message("g", "none", 0, 0, 32).status is G.NO_MATCHED_LOGIC_QUEUE
    for _ in range(3):
        put(s)
    g = s.get_message("g", "T", 0, 3, 32)
    assert (g.status, g.next_begin_offset) == (G.OFFSET_OVERFLOW_ONE, 3)
    g = s.get_message("g", "T", 0, 10, 32)
    assert (g.status, g.next_begin_offset) == (G.OFFSET_OVERFLOW_BADLY, 3)
    g = s.get_message("g", "T", 0, 1, 1)
    assert (g.status, g.next_begin_offset, g.message_count) == (G.FOUND, 2, 1)
    assert (s.get_min_offset("T", 0), s.get_max_offset("T", 0)) == (0, 3)
    assert s.get_max_offset("none", 0) == 0


def test_tag_filter_advances_past_unmatched(make_store):
    s = make_store()
    put(s, TAGS="a")
    put(s, TAGS="b")
    put(s, TAGS="a")
    f = TagsCodeFilter([java_string_hash("b")])
    g = s.get_message("g", "T", 0, 0, 32, message_filter=f)
    assert g.status is G.FOUND and g.queue_offsets == [1] and g.next_begin_offset == 3
    g = s.get_message("g", "T", 0, 2, 32, message_filter=f)
    assert (g.status, g.next_begin_offset) == (G.NO_MATCHED_MESSAGE, 3)
    neg = "Hello world"  # negative hash: compared as a signed int
    put(s, TAGS=neg)
    g = s.get_message("g", "T", 0, 3, 32, message_filter=TagsCodeFilter([-832992604]))
    assert g.queue_offsets == [3]


class _BodyFilter:
    """A commit-log filter (as SQL92 is): keeps records whose body is not ``skip``."""

    def is_matched_by_consume_queue(self, tags_code: int) -> bool:
        return True

    def is_matched_by_commit_log(self, record: memoryview) -> bool:
        return decode_record(record)[0].body != b"skip"


def test_records_back_to_back_go_out_as_one_span(make_store):
    """Records of a queue that lie next to each other in the commit log are one view; anything between
    them (another queue's record, a filtered-out one) starts the next span."""
    s = make_store()
    for body, qid, tags in [(b"a0", 0, "x"), (b"a1", 0, "x"), (b"a2", 0, "x"), (b"b0", 1, "x"), (b"a3", 0, "x"),
                            (b"skip", 0, "x"), (b"a5", 0, "y"), (b"a6", 0, "x")]:
        put(s, qid=qid, body=body, TAGS=tags)
    g = s.get_message("g", "T", 0, 0, 32)
    assert [m.body for m in decode_records(g.body())] == [b"a0", b"a1", b"a2", b"a3", b"skip", b"a5", b"a6"]
    assert len(g.spans) == 2 and g.message_count == 7 and g.queue_offsets == list(range(7))
    assert [decode_record(v)[0].body for v in g.messages] == [b"a0", b"a1", b"a2", b"a3", b"skip", b"a5", b"a6"]
    assert g.buffer_total_size == sum(len(v) for v in g.messages) == len(g.body())

    by_tag = s.get_message("g", "T", 0, 0, 32, message_filter=TagsCodeFilter([java_string_hash("x")]))
    assert [m.body for m in decode_records(by_tag.body())] == [b"a0", b"a1", b"a2", b"a3", b"skip", b"a6"]
    assert len(by_tag.spans) == 3 and by_tag.queue_offsets == [0, 1, 2, 3, 4, 6]

    by_body = s.get_message("g", "T", 0, 0, 32, message_filter=_BodyFilter())
    assert [m.body for m in decode_records(by_body.body())] == [b"a0", b"a1", b"a2", b"a3", b"a5", b"a6"]
    assert len(by_body.spans) == 3 and by_body.queue_offsets == [0, 1, 2, 3, 5, 6]

    two = s.get_message("g", "T", 0, 1, 2)  # a span ends where the count limit does
    assert [m.body for m in decode_records(two.body())] == [b"a1", b"a2"] and two.next_begin_offset == 3


def test_pull_limits_in_memory(make_store):
    s = make_store(maxTransferCountOnMessageInMemory=4, maxTransferBytesOnMessageInMemory=1000)
    for _ in range(10):
        put(s, body=b"y" * 100)
    g = s.get_message("g", "T", 0, 0, 32)
    assert g.message_count == 4 and g.next_begin_offset == 4
    g = s.get_message("g", "T", 0, 0, 32, max_total_bytes=250)  # raised to >= 100, then by size
    assert g.message_count == 1
    s2 = make_store(root=s.config.storePathRootDir + "2", maxTransferBytesOnMessageInMemory=10)
    put(s2, body=b"z" * 500)
    g = s2.get_message("g", "T", 0, 0, 32)
    assert g.message_count == 1  # the first message always goes, even if larger than the limit


def test_segment_rollover_blank_records_and_reads_across(make_store):
    s = make_store()
    seg = s.config.mappedFileSizeCommitLog
    results = [put(s, body=bytes([i % 251]) * 3000) for i in range(60)]  # ~3.1 KB each, several segments
    files = s.commitlog.queue.files
    assert len(files) >= 3
    for mf in files[:-1]:
        # every full segment ends with a blank marker covering the rest exactly
        pos = 0
        while True:
            total, magic = struct.unpack_from(">iI", mf.mm, pos)
            if magic == BLANK_MAGIC:
                assert pos + total == mf.size
                break
            pos += total
        assert os.path.basename(mf.path) == f"{mf.start:020d}"
    for r in results:  # no record spans a segment
        assert r.commitlog_offset // seg == (r.commitlog_offset + r.wrote_bytes - 1) // seg
    offset, got = 0, []
    while True:
        g = s.get_message("g", "T", 0, offset, 32)
        if g.status is not G.FOUND:
            break
        got += decode_records(g.body())
        offset = g.next_begin_offset
    assert [m.body[0] for m in got] == [i % 251 for i in range(60)]
    assert [m.commitlog_offset for m in got] == [r.commitlog_offset for r in results]
    # consume queue crossed its own segments too (50 units per file)
    assert len(s.find_consume_queue("T", 0).queue.files) == 2


def test_message_too_large_and_bad_properties(make_store):
    s = make_store()
    r = s.put_message("T", 0, b"x" * 40000, {})
    assert r.status is P.MESSAGE_ILLEGAL and "maxMessageSize" in r.remark
    r = s.put_message("T", 0, b"x", {"k": "v" * 40000})
    assert r.status is P.PROPERTIES_SIZE_EXCEEDED


def test_batch_put(make_store):
    s = make_store()
    put(s)
    r = s.put_messages("T", 0, [(1, b"a", {"KEYS": "bk"}), (2, b"b", "TAGS\x01x\x02")], born_host=("::1", 7))
    assert r.status is P.PUT_OK and r.queue_offset == 1 and r.msg_num == 2
    ids = r.msg_id.split(",")
    assert len(ids) == 2 and parse_offset_msg_id(ids[1])[1] > parse_offset_msg_id(ids[0])[1]
    msgs = decode_records(s.get_message("g", "T", 0, 1, 32).body())
    assert [(m.flag, m.body, m.queue_offset) for m in msgs] == [(1, b"a", 1), (2, b"b", 2)]
    assert msgs[1].properties == {"TAGS": "x"} and msgs[0].born_host == ("::1", 7)
    assert msgs[0].sys_flag & MessageSysFlag.BORNHOST_V6_FLAG
    assert s.query_message("T", "bk", 10, 0, 2**62).commitlog_offsets == [parse_offset_msg_id(ids[0])[1]]


def test_transaction_types_not_dispatched(make_store):
    s = make_store()
    r = s.put_message("T", 0, b"half", {}, sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE)
    assert r.ok and r.queue_offset == 0
    assert s.get_max_offset("T", 0) == 0
    put(s)
    m = s.look_message_by_offset(r.commitlog_offset)
    assert m.body == b"half" and m.sys_flag & 0xC == 4


def test_listener_called_with_new_max_offset(make_store):
    s = make_store()
    seen = []
    s.add_arriving_listener(lambda *a: seen.append(a[:4]))
    put(s, TAGS="TagA")
    put(s, qid=3)
    assert seen == [("T", 0, 1, 2598919), ("T", 3, 1, 0)]


def test_listener_told_once_per_batch_with_the_shared_tag_code(make_store):
    s = make_store()
    seen = []
    s.add_arriving_listener(lambda *a: seen.append(a[:4]))
    s.put_messages("T", 0, [(0, b"a", {"TAGS": "TagA"}), (0, b"b", {"TAGS": "TagA"})])
    s.put_messages("T", 0, [(0, b"c", {"TAGS": "TagA"}), (0, b"d", {"TAGS": "TagB"}), (0, b"e", {})])
    # one call per batch: the queue's new max, and the tag code when every message shares it
    assert seen == [("T", 0, 2, 2598919), ("T", 0, 5, None)]


def test_query_by_key_and_uniq_key(make_store):
    s = make_store()
    r1 = put(s, KEYS="order-1 order-2", UNIQ_KEY="U1")
    put(s, topic="Other", KEYS="order-1")
    r3 = put(s, KEYS="order-1")
    q = s.query_message("T", "order-1", 10, 0, 2**62)
    assert q.commitlog_offsets == [r1.commitlog_offset, r3.commitlog_offset]  # commit-log order, topic filtered
    assert q.index_last_update_phyoffset == r3.commitlog_offset
    assert s.query_message("T", "U1", 10, 0, 2**62).commitlog_offsets == [r1.commitlog_offset]
    assert s.query_message("T", "order-2", 10, 0, 2**62).commitlog_offsets == [r1.commitlog_offset]
    assert s.query_message("T", "order-1", 1, 0, 2**62).commitlog_offsets == [r3.commitlog_offset]  # the newest
    now = int(time.time() * 1000)
    assert s.query_message("T", "order-1", 10, now + 10_000, now + 20_000).commitlog_offsets == []
    assert decode_record(q.messages[-1])[0].commitlog_offset == r3.commitlog_offset


def test_search_offset_by_time(make_store):
    s = make_store()
    stamps = []
    for _ in range(5):
        stamps.append(put(s).store_timestamp)
        time.sleep(0.003)
    assert s.search_offset_by_time("T", 0, 0) == 0
    assert s.search_offset_by_time("T", 0, stamps[2]) == 2
    assert s.search_offset_by_time("T", 0, stamps[2] + 1) == 3
    assert s.search_offset_by_time("T", 0, stamps[-1] + 1000) == 5  # after all: max offset
    assert s.search_offset_by_time("T", 0, stamps[2], boundary="UPPER") == 2
    assert s.get_earliest_store_time("T", 0) == stamps[0]
    assert s.get_store_time("T", 0, 4) == stamps[4]
    assert s.get_earliest_message_time() == stamps[0]


def test_view_by_offset_and_store_lock(make_store, tmp_path):
    s = make_store()
    r = put(s, body=b"view me")
    raw = s.select_one_message_by_offset(r.commitlog_offset)
    assert decode_record(raw)[0].body == b"view me"
    assert s.select_one_message_by_offset(r.commitlog_offset + 1) is None
    from ferrymq.server.store import MessageStore

    other = MessageStore(s.config)
    with pytest.raises(StoreLockedError):
        other.start()


def test_clean_restart_keeps_everything(make_store, tmp_path):
    root = tmp_path / "r"
    s = make_store(root=root)
    rs = [put(s, body=b"%d" % i * 700, KEYS=f"k{i}") for i in range(100)]
    s.shutdown()
    assert not os.path.exists(s.config.abort_path)
    s2 = make_store(root=root)
    assert s2.recovery_report["clean"] and s2.recovery_report["redispatched"] == 0
    assert s2.get_max_offset("T", 0) == 100
    assert s2.get_max_phy_offset() == rs[-1].commitlog_offset + rs[-1].wrote_bytes
    r = put(s2, body=b"after")
    assert r.queue_offset == 100 and r.commitlog_offset == rs[-1].commitlog_offset + rs[-1].wrote_bytes
    assert s2.query_message("T", "k42", 5, 0, 2**62).commitlog_offsets == [rs[42].commitlog_offset]


def test_recovery_truncates_torn_tail_and_rebuilds_queue(make_store, tmp_path):
    root = tmp_path / "c"
    s = make_store(root=root)
    rs = [put(s, body=b"m%03d" % i * 50, KEYS=f"k{i}") for i in range(40)]
    end = s.get_max_phy_offset()
    mf = s.commitlog.queue.files[-1]
    # a torn record: the first 150 bytes of a copy of the last one, written after the end
    last = bytes(s.select_one_message_by_offset(rs[-1].commitlog_offset))
    pos = end - mf.start
    mf.mm[pos : pos + 150] = last[:150]
    # consume queue claims it (as if the unit was written before the kill)
    cq = s.find_consume_queue("T", 0)
    cq.append(40, UNIT.pack(end, len(last), 0))
    assert cq.max_offset == 41
    simulate_crash(s)
    s2 = make_store(root=root)
    rep = s2.recovery_report
    assert not rep["clean"] and rep["end"] == end and rep["cq_units_dropped"] == 1
    assert "invalid record" in rep["stop_reason"] or "CRC" in rep["stop_reason"]
    assert s2.get_max_offset("T", 0) == 40 and s2.get_max_phy_offset() == end
    # stale bytes are gone: a new, shorter record followed by garbage can never appear
    mf2 = s2.commitlog.queue.files[-1]
    assert bytes(mf2.mm[pos : pos + 150]) == bytes(150)
    r = put(s2, body=b"new")
    assert r.queue_offset == 40 and r.commitlog_offset == end
    got = decode_records(s2.get_message("g", "T", 0, 38, 32).body())
    assert [m.body for m in got] == [rs[38] and b"m038" * 50, b"m039" * 50, b"new"]


def test_recovery_redispatches_units_missing_from_consume_queue(make_store, tmp_path):
    root = tmp_path / "d"
    s = make_store(root=root, flushIntervalConsumeQueue=600000, flushIntervalCommitLog=600000)
    for i in range(30):
        put(s, qid=i % 3, body=b"%d" % i, KEYS=f"key{i}")
    # lose the tail of queue 1 (as if its unit writes never reached the file)
    cq = s.find_consume_queue("T", 1)
    keep = 4
    f = cq.queue.files[0]
    f.mm[keep * UNIT_SIZE : f.wrote] = bytes(f.wrote - keep * UNIT_SIZE)
    simulate_crash(s)
    s2 = make_store(root=root)
    assert s2.recovery_report["redispatched"] == 30  # no flush ever happened: full scan
    for q in range(3):
        assert s2.get_max_offset("T", q) == 10
        got = decode_records(s2.get_message("g", "T", q, 0, 32).body())
        assert [int(m.body) for m in got] == list(range(q, 30, 3))
        assert [m.queue_offset for m in got] == list(range(10))
    assert len(s2.query_message("T", "key7", 10, 0, 2**62).messages) == 1  # no duplicates either


def test_replication_primitives_master_to_slave(make_store, tmp_path):
    master = make_store(root=tmp_path / "m")
    slave = make_store(root=tmp_path / "s", brokerRole="SLAVE")
    assert slave.put_message("T", 0, b"x", {}).status is P.SERVICE_NOT_AVAILABLE
    woke = []
    slave.add_arriving_listener(lambda *a: woke.append(a[:3]))
    rs = [put(master, qid=i % 2, body=bytes([65 + i % 26]) * 2500, KEYS=f"k{i}") for i in range(40)]
    offset = 0
    rnd = __import__("random").Random(3)
    while offset < master.get_max_phy_offset():
        chunk = master.get_commitlog_data(offset, rnd.randint(1, 9000))  # arbitrary cuts, mid-record too
        slave.append_to_commitlog(offset, bytes(chunk))
        offset += len(chunk)
    assert slave.get_max_phy_offset() == master.get_max_phy_offset()
    assert slave.dispatched_offset == master.get_max_phy_offset()
    for q in range(2):
        assert slave.get_max_offset("T", q) == 20
        a = master.get_message("g", "T", q, 0, 32).body()
        b = slave.get_message("g", "T", q, 0, 32).body()
        assert a == b and a
    assert slave.query_message("T", "k7", 5, 0, 2**62).commitlog_offsets == [rs[7].commitlog_offset]
    assert len(woke) == 40 and woke[-1] == ("T", 1, 20)
    with pytest.raises(ValueError):
        slave.append_to_commitlog(offset + 10, b"gap")


def test_schedule_topic_unit_holds_delivery_time(make_store):
    s = make_store()
    r = s.put_message("SCHEDULE_TOPIC_XXXX", 2, b"later", {"DELAY": "3", "REAL_TOPIC": "T", "REAL_QID": "0"})
    phys, size, tags = s.get_queue_unit("SCHEDULE_TOPIC_XXXX", 2, 0)
    assert (phys, size) == (r.commitlog_offset, r.wrote_bytes)
    assert tags == r.store_timestamp + 10_000  # level 3 = 10 s
    assert s.get_queue_unit("SCHEDULE_TOPIC_XXXX", 2, 1) is None


def test_topic_that_is_not_a_directory_name_is_refused(make_store):
    s = make_store()
    assert s.put_message("../evil", 0, b"x", {}).status is P.MESSAGE_ILLEGAL
    assert s.put_messages("a/b", 0, [(0, b"x", "")]).status is P.MESSAGE_ILLEGAL


def test_ipv6_store_host(make_store):
    s = make_store(storeHost="[::1]:10911")
    r = put(s, body=b"six")
    assert len(r.msg_id) == 56 and parse_offset_msg_id(r.msg_id) == (("::1", 10911), r.commitlog_offset)
    m = decode_record(s.select_one_message_by_offset(r.commitlog_offset))[0]
    assert m.store_host == ("::1", 10911) and m.sys_flag & MessageSysFlag.STOREHOSTADDRESS_V6_FLAG
    assert s.get_store_time("T", 0, 0) == r.store_timestamp  # STORETIMESTAMP found behind the wider host fields


def test_truncate_to(make_store):
    s = make_store()
    rs = [put(s, qid=i % 2, body=b"%d" % i * 900) for i in range(30)]
    cut = rs[20].commitlog_offset
    s.truncate_to(cut)
    assert s.get_max_phy_offset() == cut
    assert s.get_max_offset("T", 0) == 10 and s.get_max_offset("T", 1) == 10
    r = put(s, qid=0, body=b"again")
    assert (r.commitlog_offset, r.queue_offset) == (cut, 10)
    assert decode_records(s.get_message("g", "T", 0, 10, 5).body())[0].body == b"again"


def test_failed_start_releases_the_lock(make_store, tmp_path):
    from ferrymq.server.store import MessageStore

    root = tmp_path / "bad"
    s = make_store(root=root)
    put(s)
    s.shutdown()
    seg = os.path.join(s.config.storePathCommitLog, "0" * 20)
    with open(seg, "ab") as f:  # a segment of the wrong size: start must fail with a clear error
        f.write(b"x")
    bad = MessageStore(s.config)
    with pytest.raises(ValueError, match="segment size"):
        bad.start()
    os.truncate(seg, s.config.mappedFileSizeCommitLog)
    good = make_store(root=root)  # the lock was released
    assert good.get_max_offset("T", 0) == 1
