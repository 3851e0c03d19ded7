"""Runners for the official clients: ``mqadmin``, the Java scenario program and the Go harness.

Each run is a subprocess with a timeout. The scenario programs print JSON lines on stdout; a
:class:`ScenarioResult` keeps them with the exit status and stderr so an assertion failure can show
what the client said.
"""

from __future__ import annotations

import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import orjson

from .toolchain import JavaClients

K = TypeVar("K")

#: A line of a Java stack trace: mqadmin reports most failures this way and still exits 0.
JAVA_STACK_FRAME = re.compile(r"^\s+at [\w.$]+\([\w.]*(:\d+)?\)", re.M)

MQADMIN_MAIN = "org.apache.rocketmq.tools.command.MQAdminStartup"
#: MQAdminStartup on a worker thread, leaving once the command shuts its admin client down (saves the
#: ~3 s the client's shutdown idles per run; see java/src/.../QuickMqAdmin.java).
QUICK_MQADMIN_MAIN = "ferrymq.compat.QuickMqAdmin"
SCENARIOS_MAIN = "ferrymq.compat.Scenarios"

#: Client-side timers shortened for tests (milliseconds): rebalance runs every second, not every 20 s.
CLIENT_SYSTEM_PROPERTIES = {"rocketmq.client.rebalance.waitInterval": "1000"}


class ClientRunFailed(AssertionError):
    """An official client exited non-zero or timed out; the message carries its output."""


def _describe(argv: list[str], rc: object, stdout: str, stderr: str) -> str:
    shown = " ".join(a if len(a) < 200 else a[:60] + "…" for a in argv)
    return f"{shown}\nexit status: {rc}\n--- stdout ---\n{stdout[-6000:]}\n--- stderr ---\n{stderr[-6000:]}"


def _run(argv: list[str], timeout: float, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env,
                              stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode(errors="replace") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        err = exc.stderr.decode(errors="replace") if isinstance(exc.stderr, bytes) else (exc.stderr or "")
        raise ClientRunFailed(f"timed out after {timeout}s:\n" + _describe(argv, "timeout", out, err)) from None


@dataclass
class ScenarioResult:
    argv: list[str]
    returncode: int
    stdout: str
    stderr: str

    @property
    def events(self) -> list[dict]:
        out = []
        for line in self.stdout.splitlines():
            line = line.strip()
            if line.startswith("{"):
                out.append(orjson.loads(line))
        return out

    def of(self, kind: str) -> list[dict]:
        return [e for e in self.events if e.get("event") == kind]

    def one(self, kind: str) -> dict:
        found = self.of(kind)
        if len(found) != 1:
            raise ClientRunFailed(f"expected one '{kind}' event, got {len(found)}:\n{self.explain()}")
        return found[0]

    def explain(self) -> str:
        return _describe(self.argv, self.returncode, self.stdout, self.stderr)

    def check(self) -> "ScenarioResult":
        if self.returncode != 0:
            raise ClientRunFailed("client scenario failed:\n" + self.explain())
        return self


class Running:
    """A client scenario running in the background (a consumer that must be up while something else
    happens): its JSON lines are collected as they come; :meth:`finish` waits and returns the result."""

    def __init__(self, argv: list[str], env: dict[str, str] | None = None):
        import threading

        self.argv = argv
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     stdin=subprocess.DEVNULL, env=env)
        self._out: list[str] = []
        self._err: list[str] = []
        self._readers = [threading.Thread(target=self._pump, args=(s, buf), daemon=True)
                         for s, buf in ((self.proc.stdout, self._out), (self.proc.stderr, self._err))]
        for t in self._readers:
            t.start()

    @staticmethod
    def _pump(stream, buf: list[str]) -> None:
        for line in stream:
            buf.append(line)

    def result(self) -> ScenarioResult:
        rc = self.proc.returncode if self.proc.returncode is not None else -1
        return ScenarioResult(self.argv, rc, "".join(self._out), "".join(self._err))

    def wait_for(self, event: str, timeout: float = 60) -> None:
        """Block until the client printed ``{"event": event}``; fail if it exits or time runs out."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.result().of(event):
                return
            if self.proc.poll() is not None:
                time.sleep(0.2)
                raise ClientRunFailed(f"client exited before '{event}':\n" + self.result().explain())
            time.sleep(0.1)
        raise ClientRunFailed(f"no '{event}' within {timeout}s:\n" + self.result().explain())

    def finish(self, timeout: float = 120) -> ScenarioResult:
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise ClientRunFailed(f"timed out after {timeout}s:\n" + self.result().explain()) from None
        for t in self._readers:
            t.join(5)
        return self.result()

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def finish_all(running: dict[K, Running], timeout: float) -> dict[K, ScenarioResult]:
    """Each client's result once it ends, by the same keys; every one is killed if any fails to end."""
    try:
        return {key: r.finish(timeout) for key, r in running.items()}
    finally:
        for r in running.values():
            r.kill()


@dataclass
class MqAdmin:
    """``mqadmin`` of one rocketmq-tools version: ``mqadmin(namesrv, "topicRoute", "-t", "T")`` -> stdout."""

    clients: JavaClients
    home: Path
    #: False runs MQAdminStartup itself, shutdown wait included.
    quick: bool = True

    @property
    def version(self) -> str:
        return self.clients.version

    def run(self, namesrv: str, *args: str, timeout: float = 90,
            system_properties: dict[str, str] | None = None) -> ScenarioResult:
        # 4.9.x mqadmin configures logback from $ROCKETMQ_HOME/conf/logback_tools.xml and, without it,
        # prints a stack trace and does nothing (exit status 0).
        conf = self.home / "conf" / "logback_tools.xml"
        if not conf.exists():
            conf.parent.mkdir(parents=True, exist_ok=True)
            conf.write_text('<configuration><root level="WARN"/></configuration>\n')
        main = QUICK_MQADMIN_MAIN if self.quick else MQADMIN_MAIN
        argv = self.clients.command(main, [*args, "-n", namesrv], home=self.home,
                                    system_properties={"rocketmq.home.dir": str(self.home),
                                                       **(system_properties or {})})
        proc = _run(argv, timeout)
        return ScenarioResult(argv, proc.returncode, proc.stdout, proc.stderr)

    def __call__(self, namesrv: str, *args: str, timeout: float = 90,
                 system_properties: dict[str, str] | None = None) -> str:
        """stdout of a successful run; raises when mqadmin failed, including the failures it reports
        only by printing a stack trace (its exit status is 0 then)."""
        result = self.run(namesrv, *args, timeout=timeout, system_properties=system_properties)
        result.check()
        if JAVA_STACK_FRAME.search(result.stderr) or JAVA_STACK_FRAME.search(result.stdout):
            raise ClientRunFailed("mqadmin printed a Java exception:\n" + result.explain())
        return result.stdout


@dataclass
class JavaScenarios:
    """The scenario program (``java/src``) on one client version: ``java_scenarios("send", "-n", addr, ...)``."""

    clients: JavaClients
    home: Path

    @property
    def version(self) -> str:
        return self.clients.version

    def __call__(self, scenario: str, *args: str, timeout: float = 120,
                 system_properties: dict[str, str] | None = None) -> ScenarioResult:
        proc = _run(self._argv(scenario, args, system_properties), timeout)
        return ScenarioResult(proc.args, proc.returncode, proc.stdout, proc.stderr)

    def _argv(self, scenario: str, args: tuple[str, ...], system_properties: dict[str, str] | None) -> list[str]:
        props = {**CLIENT_SYSTEM_PROPERTIES, **(system_properties or {})}
        return self.clients.command(SCENARIOS_MAIN, [scenario, *args], home=self.home, system_properties=props)

    def spawn(self, scenario: str, *args: str, system_properties: dict[str, str] | None = None) -> Running:
        """Start the scenario in the background (see :class:`Running`)."""
        return Running(self._argv(scenario, args, system_properties))


@dataclass
class GoHarness:
    """The Go harness binary (``go/``): ``go_harness("route", "-n", addr, "-t", topic)``."""

    binary: Path

    def __call__(self, subcommand: str, *args: str, timeout: float = 120,
                 env: dict[str, str] | None = None) -> ScenarioResult:
        import os

        argv = [str(self.binary), subcommand, *args]
        proc = _run(argv, timeout, env={**os.environ, **(env or {})})
        return ScenarioResult(argv, proc.returncode, proc.stdout, proc.stderr)

    def spawn(self, subcommand: str, *args: str) -> Running:
        """Start the subcommand in the background (see :class:`Running`)."""
        return Running([str(self.binary), subcommand, *args])
