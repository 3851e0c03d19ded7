"""Loopback ports and child processes for the compatibility tests.

Ports are picked at random and probed, never hard-coded, since other engineers run tests on the same
machine. Child processes get their own process group and a log file, and are killed (not asked) at
teardown: their state lives in temp dirs that are thrown away, and Apache's broker takes ~15 s to
honour SIGTERM.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from ferrymq.testing import ports
from ferrymq.testing.pdeathsig import die_with_parent

LOOPBACK = "127.0.0.1"


def free_port(*, also_free: tuple[int, ...] = ()) -> int:
    """A port P free on all interfaces such that P+d is free too for each d in ``also_free`` (Apache's
    broker binds listenPort, listenPort-2 and listenPort+1 on 0.0.0.0), from below the ephemeral range."""
    return ports.free_port("", also_free=also_free)


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
        with open(self.log, "ab") as out:  # a restart appends
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                cwd=self.cwd,
                env=self.env,
                start_new_session=True,
                preexec_fn=die_with_parent if os.name == "posix" else None,
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

    def stop(self, grace: float = 10) -> None:
        """SIGTERM, as an orderly stop; SIGKILL if it has not ended after ``grace`` seconds."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
                self.proc.wait(timeout=grace)
            except ProcessLookupError:
                pass
            except subprocess.TimeoutExpired:
                self.kill()

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
