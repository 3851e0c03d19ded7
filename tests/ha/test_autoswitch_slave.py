"""An AutoSwitch slave that was master before: it cuts its commit log back to where the new master's
epochs agree with its own, then appends the new master's stream and records the new epoch."""

from __future__ import annotations

from ferrymq.server.ha.autoswitch.epoch import EpochFile
from ferrymq.server.ha.autoswitch.protocol import (
    encode_master_handshake,
    encode_slave_handshake,
    encode_slave_report,
    encode_transfer_header,
)
from ferrymq.server.ha.autoswitch.slave import AutoSwitchSlave, MasterConnection
from twisted.internet.task import Clock
from twisted.internet.testing import StringTransport

from tests.ha.helpers import epoch_file


def test_a_former_master_drops_what_the_new_master_never_had_then_follows_it(tmp_path, make_store):
    old = make_store(tmp_path / "old")
    new = make_store(tmp_path / "new")
    # epoch 1: the old master wrote two messages, which the new master holds too
    for i in range(2):
        old.put_message("T", 0, b"epoch 1, #%d" % i, {})
    agreed = old.get_max_phy_offset()
    new.append_to_commitlog(0, bytes(old.get_commitlog_data(0, agreed)))
    # the old master wrote one more that no slave got; the new master took over at epoch 2
    old.put_message("T", 0, b"never acknowledged", {})
    old_epochs = epoch_file(tmp_path / "old-epochs", (1, 0))
    new_epochs = epoch_file(tmp_path / "new-epochs", (1, 0), (2, agreed))
    new.put_message("T", 0, b"epoch 2", {})
    end = new.get_max_phy_offset()

    conn = MasterConnection(AutoSwitchSlave(old, old_epochs, Clock(), broker_id=2))
    transport = StringTransport()
    conn.makeConnection(transport)
    assert transport.value() == encode_slave_handshake(2)
    transport.clear()

    conn.dataReceived(encode_master_handshake(end, new_epochs.entries))
    assert old.get_max_phy_offset() == agreed
    assert [(e.epoch, e.start_offset) for e in old_epochs.entries] == [(1, 0)]
    assert transport.value() == encode_slave_report(agreed)
    transport.clear()

    data = bytes(new.get_commitlog_data(agreed, end - agreed))
    conn.dataReceived(encode_transfer_header(agreed, len(data), 2, agreed, end) + data)
    assert bytes(old.get_commitlog_data(0, end)) == bytes(new.get_commitlog_data(0, end))
    assert [(e.epoch, e.start_offset) for e in EpochFile(tmp_path / "old-epochs").load().entries] == \
        [(1, 0), (2, agreed)]
    assert transport.value() == encode_slave_report(end)
    assert old.get_message("g", "T", 0, 2, 32).body() == new.get_message("g", "T", 0, 2, 32).body()


def test_a_frame_that_does_not_start_at_the_slaves_end_closes_the_connection(tmp_path, make_store):
    store = make_store()
    store.put_message("T", 0, b"x", {})
    epochs = epoch_file(tmp_path / "e", (1, 0))
    conn = MasterConnection(AutoSwitchSlave(store, epochs, Clock(), broker_id=3))
    transport = StringTransport()
    conn.makeConnection(transport)
    end = store.get_max_phy_offset()
    conn.dataReceived(encode_master_handshake(end, epochs.entries))
    assert not transport.disconnecting
    conn.dataReceived(encode_transfer_header(end + 10, 1, 1, 0, end) + b"y")
    assert transport.disconnecting
    assert store.get_max_phy_offset() == end
