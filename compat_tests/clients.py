"""One calling convention for the Java scenario program and the Go harness, so that a scenario is written
once and run with each official client: ``client("consume", n=addr, t=topic, g=group, count=3, timeout=30)``.

Durations are seconds (floats) here; the Java program takes milliseconds and the Go one Go durations.
Booleans become ``-flag true`` (Java) or ``-flag=true`` (Go).
"""

from __future__ import annotations

from dataclasses import dataclass

from .harness import GoHarness, JavaScenarios, Running, ScenarioResult

#: flags that are durations, with the Java program's name for each (milliseconds); ``rebalance`` is the Go
#: harness's alone (see :meth:`Client.rebalancing_every_second`)
DURATIONS = {"timeout": "timeout", "linger": "linger", "idle": "idle", "deliverAfter": "deliverAfterMs",
             "rebalance": "rebalance", "interval": "interval"}
#: subcommands named differently by the two programs
JAVA_COMMANDS = {"pull": "litepull"}


@dataclass
class Client:
    name: str  # "java-5.5.0", "java-4.9.8", "go"
    runner: JavaScenarios | GoHarness

    @property
    def is_java(self) -> bool:
        return isinstance(self.runner, JavaScenarios)

    def rebalancing_every_second(self) -> dict[str, object]:
        """A consumer's flags that rebalance it every second, as every Java run does
        (``rocketmq.client.rebalance.waitInterval``, harness.CLIENT_SYSTEM_PROPERTIES), and refresh its routes
        before each rebalance. The Go client v2.1.2 rebalances every 20 s and polls routes every 30 s, both
        constants: it takes up a queue it dropped (an offset the broker moved) only at its next rebalance, and
        pulls its retry topic, when the start's route lookup did not find it yet, only once a route poll and
        then a rebalance did."""
        return {} if self.is_java else {"rebalance": 1}

    def _argv(self, command: str, flags: dict[str, object]) -> tuple[str, list[str]]:
        args: list[str] = []
        for key, value in flags.items():
            if value is None:
                continue
            if key in DURATIONS:
                if self.is_java:
                    key, value = DURATIONS[key], int(float(value) * 1000)
                else:
                    value = f"{int(float(value) * 1000)}ms"
            if isinstance(value, bool):
                args += [f"-{key}", str(value).lower()] if self.is_java else [f"-{key}={str(value).lower()}"]
            else:
                args += [f"-{key}", str(value)]
        return (JAVA_COMMANDS.get(command, command) if self.is_java else command), args

    def __call__(self, command: str, *, run_timeout: float = 120, **flags: object) -> ScenarioResult:
        command, args = self._argv(command, flags)
        return self.runner(command, *args, timeout=run_timeout)

    def spawn(self, command: str, **flags: object) -> Running:
        command, args = self._argv(command, flags)
        return self.runner.spawn(command, *args)
