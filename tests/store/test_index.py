"""Index files: Apache layout, chains per hash slot, time ranges, roll-over to a new file."""

from __future__ import annotations

import os
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ferrymq.server.store import index as index_module
from ferrymq.server.store.index import HEADER, HEADER_SIZE, ITEM, ITEM_SIZE, IndexFile, IndexService, key_hash, key_items
from ferrymq.wire.batch import INDEX_ITEM


def test_index_file_layout(tmp_path):
    f = IndexFile(str(tmp_path / "i"), 8, 16, create=True, begin_ts=1000)
    assert os.path.getsize(f.path) == HEADER_SIZE + 8 * 4 + 16 * ITEM_SIZE
    h = key_hash("T#k")
    assert f.put(h, 500, 3000) and f.put(h, 900, 7000)
    f.flush()  # the header is written at flush
    begin_ts, end_ts, begin_phy, end_phy, slots, count = HEADER.unpack_from(f.mm, 0)
    assert (begin_ts, end_ts, begin_phy, end_phy, slots, count) == (3000, 7000, 500, 900, 1, 3)
    (slot,) = struct.unpack_from(">i", f.mm, HEADER_SIZE + (h % 8) * 4)
    assert slot == 2  # newest item
    assert ITEM.unpack_from(f.mm, HEADER_SIZE + 32 + 2 * ITEM_SIZE) == (h, 900, 4, 1)  # 4 s later, prev = 1
    out = []
    f.select(h, 10, 0, 10**13, out)
    assert out == [900, 500]
    out = []
    f.select(h, 10, 6000, 8000, out)
    assert out == [900]
    f.close()
    again = IndexFile(f.path, 8, 16)
    out = []
    again.select(h, 10, 0, 10**13, out)
    assert out == [900, 500] and again.index_count == 3
    again.close()


def test_index_file_full_and_service_rolls(tmp_path):
    svc = IndexService(str(tmp_path / "index"), 4, 5)  # 4 usable items per file
    for i in range(10):
        svc.add_items(key_items("T", f"k{i}", None, i * 100), 1000 + i)
    assert len(svc.files) == 3
    for i in range(10):
        offsets, _, last_phy = svc.query("T", f"k{i}", 10, 0, 10**13)
        assert i * 100 in offsets
    assert last_phy == 900
    assert svc.query("Other", "k1", 10, 0, 10**13)[0] == []  # different topic, different key string
    assert svc.delete_expired(500) == 1 and len(svc.files) == 2
    svc.close()


def test_collisions_return_only_equal_hashes(tmp_path):
    svc = IndexService(str(tmp_path / "index"), 1, 100)  # one slot: every key collides
    for i in range(20):
        svc.add_items(key_items("T", f"k{i} shared", f"U{i}", i), 1000)
    assert svc.query("T", "k7", 50, 0, 10**13)[0] == [7]
    assert sorted(svc.query("T", "shared", 50, 0, 10**13)[0]) == list(range(20))
    assert svc.query("T", "shared", 5, 0, 10**13)[0] == [19, 18, 17, 16, 15]
    svc.close()


def test_header_lagging_items_is_recounted(tmp_path):
    """After a crash the header may predate the last items; loading counts them back in."""
    f = IndexFile(str(tmp_path / "i"), 8, 16, create=True)
    h = key_hash("T#a")
    f.put(h, 10, 5000)
    f.flush()
    f.put(h, 20, 9000)
    f.put(key_hash("T#b"), 30, 9000)
    os.close(f.fd)  # "killed": no header write
    f.fd = -1
    f.mm.close()
    again = IndexFile(f.path, 8, 16)
    assert again.index_count == 4 and again.end_phy == 30 and again.end_ts == 9000
    out = []
    again.select(h, 10, 0, 10**13, out)
    assert out == [20, 10]
    again.close()


_item_runs = st.lists(st.lists(st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**40)), max_size=12), max_size=5)


@pytest.mark.parametrize("fast", [pytest.param(True, id="c"), pytest.param(False, id="python")])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(runs=_item_runs, start_ts=st.integers(0, 10**13))
def test_put_many_writes_what_put_does_item_by_item(tmp_path_factory, monkeypatch, fast, runs, start_ts):
    if fast and index_module._put_items is None:
        pytest.skip("server.store._indexc not built (no C compiler at install)")
    if not fast:
        monkeypatch.setattr(index_module, "_put_items", None)
    d = tmp_path_factory.mktemp("idx")
    one = IndexFile(str(d / "one"), 7, 20, create=True, begin_ts=start_ts)
    many = IndexFile(str(d / "many"), 7, 20, create=True, begin_ts=start_ts)
    for k, run in enumerate(runs):
        ts = start_ts + k * 1500 - 700
        packed = b"".join(INDEX_ITEM.pack(h, phys) for h, phys in run)
        stopped = many.put_many(packed, 0, ts)
        added = 0
        for h, phys in run:
            if not one.put(h, phys, ts):
                break
            added += 1
        assert stopped == added
    one.flush()
    many.flush()
    assert bytes(many.mm) == bytes(one.mm)
    fields = ("begin_ts", "end_ts", "begin_phy", "end_phy", "slot_count", "index_count")
    assert [getattr(many, a) for a in fields] == [getattr(one, a) for a in fields]
    one.close()
    many.close()


def test_add_items_rolls_over_to_a_new_file(tmp_path):
    svc = IndexService(str(tmp_path), slot_num=4, index_num=6)
    items = b"".join(INDEX_ITEM.pack(key_hash(f"T#k{i}"), i * 10) for i in range(12))
    svc.add_items(items, 5000)
    assert [f.index_count for f in svc.files] == [6, 6, 3]  # 5 items per file (item 0 is reserved)
    assert svc.query("T", "k11", 10, 0, 10**13)[0] == [110]
    svc.close()
