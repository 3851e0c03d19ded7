"""An AutoSwitch master as a slave sees it: the epoch handshake, epoch-stamped transfer frames, and the
SYNC_MASTER wait for every slave of the sync state set (allAckInSyncStateSet)."""

from __future__ import annotations

from ferrymq.server.ha.autoswitch.master import (
    ALL_IN_SYNC_STATE_SET,
    AutoSwitchMaster,
    SlaveConnection,
)
from ferrymq.server.ha.autoswitch.protocol import (
    MasterFrameReader,
    encode_slave_handshake,
    encode_slave_report,
)
from twisted.internet.task import Clock
from twisted.internet.testing import MemoryReactorClock, StringTransport

from tests.ha.helpers import epoch_file


def test_a_slave_gets_the_epochs_then_frames_stamped_with_them_and_every_member_must_ack(tmp_path, make_store):
    store = make_store()
    store.put_message("T", 0, b"epoch 1", {})
    epochs = epoch_file(tmp_path / "epochs", (1, 0), (2, store.get_max_phy_offset()))
    store.put_message("T", 0, b"epoch 2", {})
    end = store.get_max_phy_offset()
    members = {2, 3}
    master = AutoSwitchMaster(store, epochs, Clock(), members=lambda: frozenset(members))
    conn = SlaveConnection(master)
    transport = StringTransport()
    conn.makeConnection(transport)
    reader = MasterFrameReader()

    conn.dataReceived(encode_slave_handshake(2))
    handshake, = reader.feed(transport.value())
    assert (handshake.max_offset, handshake.last_epoch) == (end, 2)
    assert [(e.epoch, e.start_offset) for e in handshake.entries] == [(1, 0), (2, epochs.entries[1].start_offset)]
    transport.clear()

    waits = [master.wait_for_replicas(end, ALL_IN_SYNC_STATE_SET, 3000)]
    conn.dataReceived(encode_slave_report(0))
    frames = reader.feed(transport.value())
    # one frame per epoch, each naming the epoch and where it started
    assert [(f.offset, f.epoch, f.epoch_start) for f in frames] == [(0, 1, 0), (epochs.entries[1].start_offset,
                                                                              2, epochs.entries[1].start_offset)]
    assert b"".join(bytes(f.data) for f in frames) == bytes(store.get_commitlog_data(0, end))
    assert not waits[0].called  # the slave has not acknowledged yet

    conn.dataReceived(encode_slave_report(end))
    assert not waits[0].called  # brokerId 3 is in the sync state set too and has not acknowledged
    members.discard(3)
    waits.append(master.wait_for_replicas(end, ALL_IN_SYNC_STATE_SET, 3000))
    assert waits[1].result is True
    conn.dataReceived(encode_slave_report(end))
    assert waits[0].result is True
    assert master.in_sync_slaves() == {2}

    # the housekeeping poll rolls the bytes sent per second (haStatus) on these connections too
    master._second -= 1.0
    master._poll()
    assert conn.sent_in_second == end and conn.sent == 0


def test_an_idle_slave_gets_heartbeats_naming_the_epoch_and_the_transfer_rate_rolls(tmp_path, make_store):
    """With nothing to send, the master's housekeeping heartbeats each haSendHeartbeatInterval (a slave closes
    a silent connection after haHousekeepingInterval), and its once-a-second roll of the bytes sent keeps
    running past the slave's transfer."""
    store = make_store()
    store.put_message("T", 0, b"epoch 1", {})
    end = store.get_max_phy_offset()
    epochs = epoch_file(tmp_path / "epochs", (1, 0))
    clock = MemoryReactorClock()
    master = AutoSwitchMaster(store, epochs, clock, heartbeat_ms=1000)
    master.listen(0, "127.0.0.1")
    try:
        conn = SlaveConnection(master)
        transport = StringTransport()
        conn.makeConnection(transport)
        reader = MasterFrameReader()
        conn.dataReceived(encode_slave_handshake(2))
        conn.dataReceived(encode_slave_report(0))
        reader.feed(transport.value())
        transport.clear()
        assert conn.sent == end
        conn.last_write -= 2  # idle for longer than the heartbeat interval
        master._second -= 2  # and a second has passed since the last roll
        clock.advance(1)
        heartbeat, = reader.feed(transport.value())
        assert (heartbeat.offset, heartbeat.epoch, heartbeat.epoch_start, bytes(heartbeat.data)) == (end, 1, 0, b"")
        assert (conn.sent_in_second, conn.sent) == (end, 0)
        assert master._loop.running
    finally:
        master.stop()


def test_a_slave_behind_a_steady_stream_joins_and_holds_all_ack_sends_until_it_has_them(tmp_path, make_store):
    """A non-member slave that reports all that was sent to it, while the master's end has moved on, joins:
    all-ack sends wait for it (so its next report reaches the end and it catches up); leaving (its connection
    closes, or the window passes without the controller adding it) answers the sends it held."""
    store = make_store()
    store.put_message("T", 0, b"first", {})
    epochs = epoch_file(tmp_path / "epochs", (1, 0))
    members: set[int] = set()
    caught_up = []
    master = AutoSwitchMaster(store, epochs, Clock(), members=lambda: frozenset(members),
                              on_caught_up=lambda: caught_up.append(True))
    conn = SlaveConnection(master)
    conn.makeConnection(StringTransport())
    conn.dataReceived(encode_slave_handshake(2))
    conn.dataReceived(encode_slave_report(0))
    sent = store.get_max_phy_offset()
    assert conn.sent_end == sent
    store.put_message("T", 0, b"arrived before the slave's report", {})  # not yet pumped to the slave
    end = store.get_max_phy_offset()
    assert master.wait_for_replicas(end, ALL_IN_SYNC_STATE_SET, 3000).result is True  # no member to wait for

    conn.dataReceived(encode_slave_report(sent))  # everything sent, not the end: it joins
    assert set(master.joining) == {2} and not caught_up
    held = master.wait_for_replicas(end, ALL_IN_SYNC_STATE_SET, 3000)
    assert not held.called
    conn.dataReceived(encode_slave_report(end))
    assert held.result is True and caught_up == [True] and master.in_sync_slaves() == {2}

    store.put_message("T", 0, b"held for the joining slave", {})
    held = master.wait_for_replicas(store.get_max_phy_offset(), ALL_IN_SYNC_STATE_SET, 3000)
    assert not held.called
    conn.connectionLost()
    assert held.result is True and not master.joining

    # a slave the controller never adds stops holding sends when its window ends
    master.joining[2] = 0.0
    master._poll()
    assert not master.joining
    members.add(2)  # a member is waited for as a member, never as a joining slave
    master.join(conn)
    assert not master.joining
