"""One dispatch step for every writer: records re-dispatched by recovery, or received by a slave, get the
consume-queue units and index entries their puts made."""

from __future__ import annotations

import shutil

from ferrymq.server.store import PutMessageStatus as P
from ferrymq.wire.message import MessageSysFlag

from .conftest import simulate_crash

SCHEDULE = "SCHEDULE_TOPIC_XXXX"


def fill(store) -> list[str]:
    """Puts of every kind, across commit-log and consume-queue segments; returns the keys they index."""
    keys = []
    for i in range(70):
        r = store.put_message("T", i % 2, b"single %d" % i * 120,
                              {"TAGS": f"tag{i % 3}", "KEYS": f"k{i} kk{i}", "UNIQ_KEY": f"U{i}"})
        assert r.status is P.PUT_OK
        keys += [f"k{i}", f"U{i}"]
    for i in range(12):
        entries = [(0, b"batch %d.%d" % (i, j) * 40, {"TAGS": "same" if i % 2 else f"t{j}", "KEYS": f"b{i}.{j}"})
                   for j in range(9)]
        assert store.put_messages("T", 1, entries).status is P.PUT_OK
        keys.append(f"b{i}.{i % 9}")
    assert store.put_message("T", 0, b"no tags", {}).status is P.PUT_OK
    assert store.put_message(SCHEDULE, 2, b"later", {"DELAY": "3", "REAL_TOPIC": "T", "REAL_QID": "0"}).ok
    later = [(0, b"later %d" % j, {"DELAY": str(j + 1), "REAL_TOPIC": "T", "REAL_QID": "0"}) for j in range(4)]
    assert store.put_messages(SCHEDULE, 3, later).status is P.PUT_OK
    prepared = store.put_message("T", 0, b"half", {"KEYS": "half"}, sys_flag=MessageSysFlag.TRANSACTION_PREPARED_TYPE)
    assert prepared.status is P.PUT_OK
    keys.append("half")
    assert store.put_message("T", 0, b"after", {"TAGS": "tag1"}).status is P.PUT_OK
    return keys


def units_of(store) -> dict[tuple[str, int], bytes]:
    """Every consume queue's units, byte for byte."""
    out = {}
    for cq in store._all_cqs():
        out[cq.topic, cq.queue_id] = b"".join(bytes(mf.mm[: mf.wrote]) for mf in cq.queue.files)
    return out


def lookups(store, keys: list[str]) -> dict[str, list[int]]:
    topic_of = {"half": "T"}
    return {k: store.query_message(topic_of.get(k, "T"), k, 10, 0, 2**62).commitlog_offsets for k in keys}


def test_recovery_rebuilds_the_units_and_index_the_puts_made(make_store, tmp_path):
    root = tmp_path / "r"
    s = make_store(root=root)
    keys = fill(s)
    assert len(s.commitlog.queue.files) > 2 and len(s.find_consume_queue("T", 1).queue.files) > 2
    units, found = units_of(s), lookups(s, keys)
    assert all(found.values())
    cfg = s.config
    simulate_crash(s)
    # nothing but the commit log survives: recovery re-dispatches every record
    shutil.rmtree(cfg.consume_queue_dir)
    shutil.rmtree(cfg.index_dir)
    (root / "checkpoint").unlink()
    again = make_store(root=root)
    assert again.recovery_report["scan_from"] == 0
    assert units_of(again) == units
    assert lookups(again, keys) == found


def test_a_slave_dispatches_the_units_and_index_the_master_made(make_store, tmp_path):
    master = make_store(root=tmp_path / "m")
    slave = make_store(root=tmp_path / "s", brokerRole="SLAVE")
    keys = fill(master)
    offset = 0
    while offset < master.get_max_phy_offset():
        chunk = master.get_commitlog_data(offset, 5000)
        slave.append_to_commitlog(offset, bytes(chunk))
        offset += len(chunk)
    assert slave.dispatched_offset == master.get_max_phy_offset()
    assert units_of(slave) == units_of(master)
    assert lookups(slave, keys) == lookups(master, keys)
