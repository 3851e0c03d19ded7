"""Listening ports for servers under test come from below the kernel's ephemeral range, so that no
client's outgoing connection takes one between the choice and the bind."""

from __future__ import annotations

from pathlib import Path

import pytest

from ferrymq.testing import ports

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@pytest.mark.skipif(not RANGE_FILE.exists(), reason="no /proc/sys/net/ipv4/ip_local_port_range (not Linux)")
@pytest.mark.parametrize("host", [ports.LOOPBACK, ""])
def test_ports_avoid_the_ephemeral_range(host):
    ephemeral_low, _ = map(int, RANGE_FILE.read_text().split())
    for _ in range(20):
        port = ports.free_port(host, also_free=(-2, 1))
        if ephemeral_low - 10000 >= 5000:
            assert port + 1 < ephemeral_low
        assert all(ports.bindable(port + d, host) for d in (-2, 0, 1))


def test_a_narrow_gap_below_the_ephemeral_range_falls_back(monkeypatch, tmp_path):
    fake = tmp_path / "range"
    fake.write_text("12000\t60999\n")
    monkeypatch.setattr(ports, "Path", lambda p: fake)
    assert ports.listen_range() == ports.FALLBACK_RANGE


def test_a_taken_port_is_not_bindable():
    import socket

    with socket.socket() as s:
        s.bind((ports.LOOPBACK, 0))
        s.listen()
        assert not ports.bindable(s.getsockname()[1])


def test_a_port_is_handed_out_once_even_while_nothing_binds_it(monkeypatch):
    """Servers started side by side pick their ports before any of them binds (a JVM takes seconds):
    every pick, with its neighbours, differs from every earlier one."""
    monkeypatch.setattr(ports, "listen_range", lambda: (10000, 10060))
    monkeypatch.setattr(ports, "bindable", lambda port, host=ports.LOOPBACK: True)
    monkeypatch.setattr(ports, "_handed_out", set())
    taken: set[int] = set()
    for _ in range(8):
        port = ports.free_port(also_free=(-2, 1))
        wanted = {port - 2, port, port + 1}
        assert not wanted & taken
        taken |= wanted
