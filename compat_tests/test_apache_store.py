"""Where the Apache broker's store goes: Apache refuses every write on a partition over 90 % used."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat_tests import apache


def test_ratio_matches_df(tmp_path):
    ratio = apache.disk_used_ratio(tmp_path)
    assert 0.0 <= ratio <= 1.0


def test_store_stays_home_when_there_is_room(tmp_path, monkeypatch):
    monkeypatch.setattr(apache, "disk_used_ratio", lambda p: 0.5)
    assert apache.store_root(tmp_path) == tmp_path / "store"


def test_store_moves_to_tmpfs_when_the_partition_is_nearly_full(tmp_path, monkeypatch):
    tmpfs = tmp_path / "shm"
    tmpfs.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setattr(apache, "TMPFS", tmpfs)
    monkeypatch.setattr(apache, "disk_used_ratio", lambda p: 0.1 if Path(p) == tmpfs else 0.93)
    store = apache.store_root(home)
    assert store.parent == tmpfs and store.is_dir()
    store.joinpath("commitlog").mkdir()
    apache._remove_if_outside(store, home)
    assert not store.exists()


def test_no_room_anywhere_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(apache, "TMPFS", tmp_path)
    monkeypatch.setattr(apache, "disk_used_ratio", lambda p: 0.95)
    with pytest.raises(RuntimeError, match="95% used.*refuses every write above 90%"):
        apache.store_root(tmp_path)
