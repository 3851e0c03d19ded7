"""Listening ports for the servers under test come from outside the kernel's ephemeral range."""

from __future__ import annotations

from pathlib import Path

import pytest

from compat_tests import processes

RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")


@pytest.mark.skipif(not RANGE_FILE.exists(), reason="no /proc/sys/net/ipv4/ip_local_port_range (not Linux)")
def test_ports_avoid_the_ephemeral_range():
    ephemeral_low, ephemeral_high = map(int, RANGE_FILE.read_text().split())
    for _ in range(20):
        port = processes.free_port(also_free=(-2, 1))
        if ephemeral_low - 10000 >= 5000:
            assert port + 1 < ephemeral_low
        assert processes._bindable(port) and processes._bindable(port - 2)


def test_a_narrow_gap_below_the_ephemeral_range_falls_back(monkeypatch, tmp_path):
    fake = tmp_path / "range"
    fake.write_text("12000\t60999\n")
    monkeypatch.setattr(processes, "Path", lambda p: fake)
    assert processes._listen_range() == processes._FALLBACK_RANGE
