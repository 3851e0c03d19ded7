"""A program started through ``ferrymq.testing.pdeathsig`` dies with the process that started it."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

#: starts ``sleep 60`` through the wrapper, says its pid, then waits to be killed
_PARENT = """
import os, subprocess, sys
child = subprocess.Popen([sys.executable, "-m", "ferrymq.testing.pdeathsig", str(os.getpid()), "sleep", "60"])
print(child.pid, flush=True)
child.wait()
"""


def _program(pid: int) -> bytes:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0")[0]
    except FileNotFoundError:
        return b""


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1][0] != "Z"  # a zombie waiting for its reaper is dead
    except FileNotFoundError:
        return False


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_program_is_killed_when_its_parent_dies():
    parent = subprocess.Popen([sys.executable, "-c", _PARENT], stdout=subprocess.PIPE, text=True)
    try:
        child = int(parent.stdout.readline())
        deadline = time.monotonic() + 10
        while _program(child) != b"sleep":  # exec'd: past the wrapper's check of its parent
            assert time.monotonic() < deadline, "the wrapper did not exec its program"
            time.sleep(0.02)
        assert _alive(child)
        parent.kill()
        parent.wait()
        deadline = time.monotonic() + 5
        while _alive(child):
            assert time.monotonic() < deadline, "the program outlived the process that started it"
            time.sleep(0.02)
    finally:
        parent.kill()
        parent.wait()


def test_a_parent_already_gone_means_no_program():
    gone = subprocess.run([sys.executable, "-m", "ferrymq.testing.pdeathsig", "1", "sleep", "60"], timeout=30)
    assert gone.returncode == 1
