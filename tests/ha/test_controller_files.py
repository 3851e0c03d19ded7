"""The files of controller mode in Apache's formats: the epoch file and the broker identity."""

from __future__ import annotations

import zlib

import pytest
from ferrymq.server.ha.autoswitch.epoch import EpochFile
from ferrymq.server.ha.controller.identity import BrokerIdentity, IdentityFiles
from ferrymq.wire.bodies import EpochEntry
from ferrymq.wire.bodies.controller import OPEN_END


def test_the_epoch_file_is_apaches_checkpoint_format(tmp_path):
    epochs = EpochFile(tmp_path / "epochFileCheckpoint")
    epochs.append(1, 0)
    epochs.append(3, 4096)
    lines = "1-0\n3-4096\n"
    assert (tmp_path / "epochFileCheckpoint").read_text() == f"2\n{zlib.crc32(lines.encode()) & 0x7FFFFFFF}\n{lines}"
    again = EpochFile(tmp_path / "epochFileCheckpoint").load()
    assert again.entries == [EpochEntry(1, 0, 4096), EpochEntry(3, 4096, OPEN_END)]
    assert again.last_epoch == 3


def test_a_damaged_epoch_file_is_read_from_its_backup(tmp_path):
    path = tmp_path / "epochFileCheckpoint"
    epochs = EpochFile(path)
    epochs.append(1, 0)
    epochs.append(2, 100)  # the file before this write is the backup
    path.write_text("2\n12345\n1-0\n2-100\n")  # checksum wrong
    assert EpochFile(path).load().entries == [EpochEntry(1, 0, OPEN_END)]


def test_an_epoch_elected_again_replaces_the_later_entries(tmp_path):
    epochs = EpochFile(tmp_path / "e")
    epochs.append(1, 0)
    epochs.append(2, 50)
    epochs.append(2, 70)
    assert epochs.entries == [EpochEntry(1, 0, 70), EpochEntry(2, 70, OPEN_END)]
    with pytest.raises(ValueError):
        epochs.append(3, 10)


def test_truncating_drops_the_epochs_that_start_past_the_cut(tmp_path):
    epochs = EpochFile(tmp_path / "e")
    for epoch, start in ((1, 0), (2, 100), (3, 200)):
        epochs.append(epoch, start)
    epochs.truncate_from_offset(150)
    assert epochs.entries == [EpochEntry(1, 0, 100), EpochEntry(2, 100, OPEN_END)]
    assert EpochFile(tmp_path / "e").load().entries == epochs.entries


def test_the_identity_is_claimed_in_a_temp_file_then_kept(tmp_path):
    files = IdentityFiles(tmp_path / "brokerIdentity")
    assert files.read() is None and files.read_temp() is None
    files.write_temp(BrokerIdentity("C", "b", 3, "127.0.0.1:10911;1700000000000"))
    assert (tmp_path / "brokerIdentity-temp").read_text() == "C#b#3#127.0.0.1:10911;1700000000000"
    assert files.read_temp().broker_id == 3
    kept = files.confirm(files.read_temp())
    assert (tmp_path / "brokerIdentity").read_text() == "C#b#3"
    assert not (tmp_path / "brokerIdentity-temp").exists()
    assert files.read() == kept == BrokerIdentity("C", "b", 3)
