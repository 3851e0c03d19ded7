"""Server processes (``ferrymq standalone``, ``ferrymq broker``) forked from a process that imported FerryMQ once.

A ``python -m ferrymq.server.cli`` start spends ~0.6 s (more on a busy machine) importing Twisted,
construct and the broker, store and name server modules before it does anything, and test suites start
servers by the hundred. The fork server is a process of its own, started from the test process on first
use, that imports those modules once and forks a child per server. Each child is a fresh process all the
same: its own session, working directory, environment, log and exit status, killed with its parent's
death as ``ferrymq.testing.child`` arranges, running the CLI as ``__main__`` the way ``python -m`` does.
The fork server imports no reactor (importing one creates it, and its epoll descriptor would be shared by
every child) and starts no thread, so a child starts from the state a new interpreter reaches after the
same imports; it checks both before serving.

A child is the fork server's, not the test process's: :class:`ForkedProcess` gives the caller the part of
:class:`subprocess.Popen` the server helpers use (``pid``, ``poll``, ``wait``, signals, ``returncode``)
through a pidfd and the exit status the fork server reaps. Where that cannot work (no ``fork`` or pidfd,
``FERRYMQ_TEST_FORKSERVER=0``, or an environment whose variables differ from the fork server's in one its
imports read: a module's default taken from ``$ROCKETMQ_HOME`` at import would be stale in the child)
:func:`start_cli` starts ``python -m ferrymq.testing.child`` as before. The fork server records which
variables its imports read, so a test that changes any other (``JAVA_HOME``, ``PATH``) keeps the saving.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any
from pathlib import Path

from ferrymq.testing.pdeathsig import die_with_parent

#: set to 0 to start every server with ``python -m ferrymq.testing.child`` instead
DISABLE_ENV = "FERRYMQ_TEST_FORKSERVER"
#: what a child's CLI imports before it serves (each command imports its parts when it runs): grpc stays
#: out, as it keeps state across a fork
PRELOAD = (
    "ferrymq.server.cli",
    "ferrymq.server.broker.service",
    "ferrymq.server.namesrv.service",
    "ferrymq.server.stall_watch",
    "ferrymq.server.gc_tuning",
    "ferrymq.wire.native",
    "twisted.logger",
)
#: seconds the fork server may take to import :data:`PRELOAD` and answer its first request
FIRST_REPLY_TIMEOUT = 60.0
#: seconds any later answer may take
REPLY_TIMEOUT = 10.0


def start_cli(args: Sequence[str], log: Path) -> subprocess.Popen | ForkedProcess:
    """``ferrymq ARGS`` with its stdout and stderr appended to ``log``, in a session of its own, killed when
    the test process dies; forked from the fork server when it can be."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if os.environ.get(DISABLE_ENV) != "0" and hasattr(os, "pidfd_open") and hasattr(os, "fork"):
        Path(log).touch()  # there on return, as a Popen's log is
        forked = _fork_server().spawn(list(args), log=log, env=env)
        if forked is not None:
            return forked
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "ferrymq.testing.child", str(os.getpid()), *args],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,  # a Ctrl-C meant for pytest does not reach it; teardown stops it
        )


class ForkedProcess:
    """A child of the fork server, used as a :class:`subprocess.Popen` of the test process is."""

    def __init__(self, server: ForkServer, pid: int, args: list[str]):
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._server = server
        try:
            self._pidfd: int | None = os.pidfd_open(pid)
        except ProcessLookupError:  # it exited already and was reaped
            self._pidfd = None
            self.returncode = server.status(pid)

    def poll(self) -> int | None:
        if self.returncode is None and select.select([self._pidfd], [], [], 0)[0]:
            self._exited()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            if not select.select([self._pidfd], [], [], timeout)[0]:
                raise subprocess.TimeoutExpired(self.args, timeout)
            self._exited()
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            try:
                signal.pidfd_send_signal(self._pidfd, sig)
            except ProcessLookupError:
                pass

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _exited(self) -> None:
        self.returncode = self._server.status(self.pid)
        os.close(self._pidfd)
        self._pidfd = None

    def __del__(self) -> None:
        if getattr(self, "_pidfd", None) is not None:
            os.close(self._pidfd)

    def __repr__(self) -> str:
        return f"<ForkedProcess {self.pid} returncode {self.returncode}>"


class ForkServer:
    """The test process's end: starts the fork server on first use, one request and one answer at a time."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen | None = None
        self._env: dict[str, str] | None = None
        self._reads: frozenset[str] | None = None  # what its imports read of the environment; None: all
        self._lock = threading.Lock()
        self._pending = b""
        self._broken = False

    def spawn(self, args: list[str], *, log: Path, env: Mapping[str, str]) -> ForkedProcess | None:
        """Fork ``ferrymq ARGS``; None when the fork server cannot (another environment, or it failed)."""
        with self._lock:
            if self._broken or (self._env is not None and self._seen(env) != self._seen(self._env)):
                return None
            if self._proc is None and threading.current_thread() is not threading.main_thread():
                return None  # the kernel kills the fork server when the thread that started it ends
            try:
                reply = self._ask({"args": args, "log": str(log), "cwd": os.getcwd(), "env": dict(env)}, env)
            except (OSError, RuntimeError, subprocess.TimeoutExpired):
                self._give_up()
                return None
            if "pid" not in reply:  # its imports started a reactor or a thread: it forks nothing
                self._broken = True
                return None
            if "env_read" in reply:
                self._reads = None if reply["env_read"] is None else frozenset(reply["env_read"])
        return ForkedProcess(self, reply["pid"], ["ferrymq", *args])

    def status(self, pid: int) -> int:
        """The exit status of the fork server's child ``pid``, which has exited; -SIGKILL once the fork
        server is gone (its children are killed with it)."""
        with self._lock:
            if not self._broken:
                try:
                    return self._ask({"status": pid}, self._env)["status"]
                except (OSError, RuntimeError, subprocess.TimeoutExpired, KeyError):
                    self._give_up()
            return -signal.SIGKILL

    def _give_up(self) -> None:
        """A fork server that failed to answer is ended, and its children with it: none is left whose state
        the test process cannot learn."""
        self._broken = True
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()

    def _ask(self, request: dict, env: Mapping[str, str]) -> dict:
        first = self._proc is None
        if first:
            self._env = dict(env)
            self._proc = subprocess.Popen(
                [sys.executable, "-m", "ferrymq.testing.forkserver", str(os.getpid())], env=self._env,
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
        self._proc.stdin.write(json.dumps(request).encode() + b"\n")
        self._proc.stdin.flush()
        return json.loads(self._line(FIRST_REPLY_TIMEOUT if first else REPLY_TIMEOUT))

    def _line(self, timeout: float) -> str:
        """The fork server's next line; raw reads, so that a line already read is never waited for."""
        deadline = time.monotonic() + timeout
        while b"\n" not in self._pending:
            ready, _, _ = select.select([self._proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                raise subprocess.TimeoutExpired(self._proc.args, timeout)
            chunk = os.read(self._proc.stdout.fileno(), 4096)
            if not chunk:
                raise RuntimeError(f"the fork server exited with status {self._proc.wait()}")
            self._pending += chunk
        line, self._pending = self._pending.split(b"\n", 1)
        return line.decode()


    def _seen(self, env: Mapping[str, str]) -> dict[str, str]:
        """What of ``env`` the fork server's start and imports saw, which a child's must equal: the
        interpreter's own ``PYTHON*`` variables and those its imports read (pytest's note of the running
        test changes between tests and is read by none)."""
        return {key: value for key, value in env.items() if key != "PYTEST_CURRENT_TEST" and (
            self._reads is None or key in self._reads or key.startswith("PYTHON"))}


_SERVER: ForkServer | None = None
_SERVER_PID = 0


def _fork_server() -> ForkServer:
    """This process's fork server (a process forked from this one gets its own)."""
    global _SERVER, _SERVER_PID
    if _SERVER is None or _SERVER_PID != os.getpid():
        _SERVER, _SERVER_PID = ForkServer(), os.getpid()
    return _SERVER


# ---------------------------------------------------------------------------------------- the fork server


def _serve(parent: int) -> None:
    """Answer requests from stdin, one JSON line each: ``{"args", "log", "cwd"}`` forks a child and answers
    ``{"pid"}``; ``{"status": pid}`` answers the exit status of a child that has exited."""
    import importlib

    die_with_parent(parent)
    with _recording_environ() as env_read:
        for name in PRELOAD:
            importlib.import_module(name)
    env_told = False
    # as under `python -m`: the CLI's imports are done, the module itself runs afresh as __main__
    cli_file = sys.modules["ferrymq.server.cli"].__file__
    del sys.modules["ferrymq.server.cli"]
    unsafe = "twisted.internet.reactor" in sys.modules or threading.active_count() != 1

    me = os.getpid()
    forked: set[int] = set()
    statuses: dict[int, int] = {}

    def reap(*_: object) -> None:
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            statuses[pid] = os.waitstatus_to_exitcode(status)

    signal.signal(signal.SIGCHLD, reap)  # no zombie lingers: a test may look for the process to be gone
    for line in sys.stdin:
        request = json.loads(line)
        if "status" in request:
            pid = request["status"]
            while pid in forked and pid not in statuses:
                reap()
                if pid not in statuses:
                    time.sleep(0.001)
            forked.discard(pid)
            answer = {"status": statuses.pop(pid)} if pid in statuses else {"error": f"{pid} is no child"}
        elif unsafe:
            answer = {"error": "a reactor or a thread was started by the imports"}
        else:
            pid = os.fork()
            if pid == 0:
                _child(request, cli_file, me)  # does not return
            forked.add(pid)
            answer = {"pid": pid}
            if not env_told:
                answer["env_read"] = None if env_read.everything else sorted(env_read.keys)
                env_told = True
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


class _EnvRead:
    """The variables read through ``os.environ`` while recording; ``everything`` once it was iterated."""

    def __init__(self) -> None:
        self.keys: set[str] = set()
        self.everything = False


@contextlib.contextmanager
def _recording_environ() -> Iterator[_EnvRead]:
    """Record the variables read through ``os.environ`` (``os.getenv`` and ``expanduser`` go through it);
    C code reading the environment directly is not seen, and none of the preloaded imports does."""
    read = _EnvRead()
    environ = type(os.environ)
    getitem, iterate = environ.__getitem__, environ.__iter__

    def recording_getitem(self: Any, key: str) -> str:
        read.keys.add(key)
        return getitem(self, key)

    def recording_iter(self: Any) -> Iterator[str]:
        read.everything = True
        return iterate(self)

    environ.__getitem__, environ.__iter__ = recording_getitem, recording_iter
    try:
        yield read
    finally:
        environ.__getitem__, environ.__iter__ = getitem, iterate


def _child(request: dict, cli_file: str, fork_server: int) -> None:
    """In a forked child: become what ``python -m ferrymq.testing.child PARENT ARGS`` would be; the CLI's
    ``sys.exit`` or exception ends the process as it ends an interpreter."""
    import runpy

    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    os.setsid()
    die_with_parent(fork_server)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[0] = request["cwd"]
    log = os.open(request["log"], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    null = os.open(os.devnull, os.O_RDONLY)
    for fd, target in ((0, null), (1, log), (2, log)):
        os.dup2(target, fd)
    os.close(log)
    os.close(null)
    sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the process's stdin
    sys.argv = [cli_file, *request["args"]]
    runpy.run_module("ferrymq.server.cli", run_name="__main__", alter_sys=True)
    sys.exit(0)


if __name__ == "__main__":
    _serve(int(sys.argv[1]))
