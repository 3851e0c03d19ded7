"""KV config persistence: Apache's kvConfig.json format, atomic replacement, clear errors."""

from __future__ import annotations

import json
import os

import pytest

from ferrymq.server.namesrv.kvconfig import KVConfigStore, atomic_write


def test_loads_an_apache_kv_config_file(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_text('{"configTable":{"ORDER_TOPIC_CONFIG":{"T":"broker-a:4;broker-b:4"}}}')
    store = KVConfigStore(path)
    store.load()
    assert store.get("ORDER_TOPIC_CONFIG", "T") == "broker-a:4;broker-b:4"
    assert store.list_namespace("ORDER_TOPIC_CONFIG").encode() == b'{"table":{"T":"broker-a:4;broker-b:4"}}'
    assert store.list_namespace("missing") is None


def test_put_delete_persist_and_reload(tmp_path):
    path = tmp_path / "sub" / "kvConfig.json"
    store = KVConfigStore(path)
    store.load()  # missing file: empty table
    store.put("ns", "a", "1")
    store.put("ns", "b", "2")
    store.delete("ns", "a")
    assert json.loads(path.read_text()) == {"configTable": {"ns": {"b": "2"}}}
    again = KVConfigStore(path)
    again.load()
    assert again.table == {"ns": {"b": "2"}}
    assert [p.name for p in path.parent.iterdir()] == ["kvConfig.json"]  # no temp files left


def test_failed_write_keeps_old_content(tmp_path, monkeypatch):
    path = tmp_path / "kvConfig.json"
    atomic_write(path, b"old")

    def broken_fsync(fd):
        raise OSError("disk on fire")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    with pytest.raises(OSError):
        atomic_write(path, b"new")
    assert path.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["kvConfig.json"]


def test_unreadable_file_is_reported_with_its_path(tmp_path):
    path = tmp_path / "kvConfig.json"
    path.write_text("{not json")
    with pytest.raises(ValueError, match="kvConfig.json"):
        KVConfigStore(path).load()
