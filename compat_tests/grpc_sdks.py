"""Runners for the gRPC SDKs other than Java: the Go v5 harness (``go5/``) and the Node.js scenarios
(``node/``). Each run is a subprocess printing JSON lines (a :class:`ScenarioResult`); the client's own
log files go under ``home``, shown with the output when a run fails.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .harness import ScenarioResult, _run
from .toolchain import require


@dataclass(frozen=True)
class SdkRunner:
    """``argv`` prefix of one SDK's program and the environment it runs in."""

    prefix: tuple[str, ...]
    env: dict[str, str]
    logs: Path

    def __call__(self, *args: str, timeout: float = 60) -> ScenarioResult:
        argv = [*self.prefix, *args]
        proc = _run(argv, timeout, env={**os.environ, **self.env})
        return ScenarioResult(argv, proc.returncode, proc.stdout, proc.stderr + self._log_tail())

    def _log_tail(self) -> str:
        tails = [f"--- {log} ---\n{log.read_text(errors='replace')[-3000:]}" for log in sorted(self.logs.rglob("*.log"))]
        return "\n" + "\n".join(tails) if tails else ""


def go5(binary: Path, home: Path) -> SdkRunner:
    """The Go v5 harness; the SDK logs under ``home/logs`` (its ``rocketmq.client.logRoot``). It connects
    on the SDK's default, TLS (``rocketmq.client.enableSsl`` unset), which Apache's proxy and FerryMQ both
    serve beside the plain clients on one port in their default ``tls.server.mode``."""
    return SdkRunner((str(binary),), {"rocketmq.client.logRoot": str(home / "logs"), "rocketmq.client.logLevel": "warn"},
                     home / "logs")


def node(node_modules: Path, home: Path) -> SdkRunner:
    """``node scenarios.js`` with the client from ``node_modules``; its default log file (unused: the
    scenarios log to stderr) would go under ``home``."""
    script = Path(__file__).resolve().parent / "node" / "scenarios.js"
    return SdkRunner((require("node"), str(script)), {"NODE_PATH": str(node_modules), "HOME": str(home)},
                     home / "logs")
