"""``python -m ferrymq.server.cli ARGS`` in a process of its own, without paying the CLI's imports each time.

Importing the CLI (Twisted, pyOpenSSL, construct, the config classes) is most of a short run such as a
refused config or ``-p``. One process imports it once and forks a child per run: each run is still a fresh
process with its own working directory, standard streams and exit status, and the child runs the module
as ``__main__`` the way ``python -m`` does, so an exception or ``sys.exit`` ends it as it would the
interpreter. The forking process starts no reactor and no thread, so a child starts from a clean state.
"""

from __future__ import annotations

import atexit
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

#: the forking process: reads one JSON request a line, answers the child's pid, then its exit status
FORKER = r"""
import json, os, runpy, sys
import ferrymq.server
import ferrymq.server.cli

# as under `python -m`: the CLI's imports are done, the module itself is run afresh as __main__
CLI_FILE = ferrymq.server.cli.__file__
del sys.modules["ferrymq.server.cli"], ferrymq.server.cli

for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        os.chdir(request["cwd"])
        for fd, path, mode in ((0, os.devnull, os.O_RDONLY), (1, request["stdout"], os.O_WRONLY),
                               (2, request["stderr"], os.O_WRONLY)):
            os.dup2(os.open(path, mode), fd)
        sys.stdin = open(0, closefd=False)
        sys.argv = [CLI_FILE, *request["args"]]
        runpy.run_module("ferrymq.server.cli", run_name="__main__", alter_sys=True)
        sys.exit(0)
    print(pid, flush=True)
    _, status = os.waitpid(pid, 0)
    print(os.waitstatus_to_exitcode(status), flush=True)
"""

COMMAND = [sys.executable, "-m", "ferrymq.server.cli"]


class CliForker:
    """The forking process, started on first use and ended when the test process exits."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()
        self._pending = b""

    def run(self, *args: str, cwd: Path | str, timeout: float) -> subprocess.CompletedProcess:
        """Like ``subprocess.run(COMMAND + args, cwd=cwd, capture_output=True, text=True, timeout=timeout)``."""
        with self._lock, tempfile.TemporaryDirectory(prefix="ferrymq-cli-") as tmp:
            out, err = Path(tmp, "stdout"), Path(tmp, "stderr")
            out.touch()
            err.touch()
            proc = self._started()
            request = {"args": list(args), "cwd": str(cwd), "stdout": str(out), "stderr": str(err)}
            proc.stdin.write(json.dumps(request) + "\n")
            proc.stdin.flush()
            pid = int(self._line(proc, 60))  # the first request waits for the imports
            try:
                status = int(self._line(proc, timeout))
            except subprocess.TimeoutExpired:
                os.kill(pid, signal.SIGKILL)
                self._line(proc, 10)
                raise subprocess.TimeoutExpired([*COMMAND, *args], timeout, out.read_text(), err.read_text()) from None
            return subprocess.CompletedProcess([*COMMAND, *args], status, out.read_text(), err.read_text())

    def _started(self) -> subprocess.Popen:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen([sys.executable, "-c", FORKER], stdin=subprocess.PIPE,
                                          stdout=subprocess.PIPE, text=True, bufsize=1)
            self._pending = b""
            atexit.register(self._proc.stdin.close)
        return self._proc

    def _line(self, proc: subprocess.Popen, timeout: float) -> str:
        """The forking process's next line; raw reads, so that a line already read is never waited for."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise subprocess.TimeoutExpired(COMMAND, timeout)
            chunk = os.read(proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"the forking CLI process exited with status {proc.wait()}")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode()


#: one per test process (each xdist worker has its own)
FORKER_PROCESS = CliForker()


def run_cli(*args: str, cwd: Path | str, timeout: float = 30) -> subprocess.CompletedProcess:
    """``python -m ferrymq.server.cli ARGS`` in a fresh (forked) process: its exit status, stdout and stderr."""
    return FORKER_PROCESS.run(*args, cwd=cwd, timeout=timeout)
