"""Loopback ports and child processes for the compatibility tests.

Ports are picked at random and probed, never hard-coded, since other engineers run tests on the same
machine. Child processes get their own process group and a log file, and are killed (not asked) at
teardown: their state lives in temp dirs that are thrown away, and Apache's broker takes ~15 s to
honour SIGTERM.
"""

from __future__ import annotations

import ctypes
import os
import random
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

LOOPBACK = "127.0.0.1"

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: be killed if the test process dies (a CI timeout, a killed pytest),
    so no JVM outlives the run on a machine shared with others."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    except (OSError, AttributeError):
        pass


def _bindable(port: int, host: str = "") -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


#: Where to look for listening ports when the ephemeral range leaves no room below it.
_FALLBACK_RANGE = (20000, 60000)


def _listen_range() -> tuple[int, int]:
    try:
        ephemeral_low = int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return _FALLBACK_RANGE
    return (10000, ephemeral_low - 2) if ephemeral_low - 10000 >= 5000 else _FALLBACK_RANGE


def free_port(*, also_free: tuple[int, ...] = ()) -> int:
    """A port P free on all interfaces such that P+d is free too for each d in ``also_free``.

    Apache's broker binds listenPort, listenPort-2 (fast channel) and listenPort+1 (HA) on 0.0.0.0.
    Ports come from below the kernel's ephemeral range when there is room: a port that is free now can
    otherwise become the local end of some client's outgoing connection before the server binds it.
    """
    low, high = _listen_range()
    rng = random.Random()
    for _ in range(500):
        port = rng.randrange(low, high)
        if all(_bindable(port + d) for d in (0, *also_free)):
            return port
    raise RuntimeError("no free loopback port block found after 500 tries")


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


@dataclass
class Child:
    """A child process whose stdout+stderr go to ``log``."""

    name: str
    argv: list[str]
    log: Path
    cwd: Path | None = None
    env: dict[str, str] | None = None
    proc: subprocess.Popen | None = field(default=None, init=False)

    def start(self) -> "Child":
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
                preexec_fn=_die_with_parent if os.name == "posix" else None,
            )
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return "(no log)"

    def wait_until(self, ready, what: str, timeout: float) -> None:
        """Poll ``ready()`` until true; fail with the log tail if the process dies or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if ready():
                return
            if not self.alive():
                raise RuntimeError(f"{self.name} exited with {self.proc.returncode} before {what}; log {self.log}:\n"
                                   f"{self.log_tail()}")
            time.sleep(0.1)
        raise RuntimeError(f"{self.name} not {what} after {timeout:.0f}s; log {self.log}:\n{self.log_tail()}")

    def kill(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
