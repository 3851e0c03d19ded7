"""The Java load tools both brokers are driven with, and how to launch them.

Apache RocketMQ's own benchmark programs come from the ``rocketmq-example`` artifact on Maven Central
(same version as the Apache server compat_tests runs): ``Producer`` drives the sync sends and
``BatchProducer`` the batch sends. ``LoadProbe`` (java/src) uses the official client that artifact brings
for the rest: async sends (Apache's ``Producer -y true`` leaves requests in flight unbounded, and on this
2-core machine every one of them timed out), first successful send, latency percentiles, exact backlog
fill and drain.

Maven only resolves dependencies (via compat_tests.toolchain); javac compiles LoadProbe into
``build/sidebyside/`` (gitignored), keyed by a digest of the sources and classpath.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from compat_tests import toolchain
from compat_tests.processes import Child

HERE = Path(__file__).resolve().parent
JAVA_DIR = HERE / "java"
BUILD = HERE.parent.parent / "build" / "sidebyside"
VERSION = toolchain.ROCKETMQ_5

PRODUCER = "org.apache.rocketmq.example.benchmark.Producer"
BATCH_PRODUCER = "org.apache.rocketmq.example.benchmark.BatchProducer"
LOAD_PROBE = "ferrymq.bench.LoadProbe"

#: Client JVMs: a full JIT (throughput phases run long enough to use it) and a heap that holds 128 senders.
CLIENT_JVM_FLAGS = ("-Xms512m", "-Xmx1g", "-XX:+UseG1GC", "-XX:-UsePerfData")


@dataclass(frozen=True)
class LoadTools:
    classpath: str
    version: str

    def command(self, main_class: str, args: list[str], home: Path) -> list[str]:
        return [
            toolchain.require("java"),
            *CLIENT_JVM_FLAGS,
            f"-Duser.home={home}",  # the client logs to ~/logs/rocketmqlogs
            f"-Drocketmq.client.logRoot={home / 'logs'}",
            "-cp",
            self.classpath,
            main_class,
            *args,
        ]

    def producer(self, home: Path, namesrv: str, topic: str, *, threads: int, size: int) -> list[str]:
        """Apache's sync benchmark producer, reporting every second (each report covers the last 9 s)."""
        args = ["-n", namesrv, "-t", topic, "-w", str(threads), "-s", str(size), "-ri", "1000"]
        return self.command(PRODUCER, args, home)

    def batch_producer(self, home: Path, namesrv: str, topic: str, *, threads: int, size: int, batch: int) -> list[str]:
        args = ["-n", namesrv, "-t", topic, "-w", str(threads), "-s", str(size), "-b", str(batch), "-ri", "1000"]
        return self.command(BATCH_PRODUCER, args, home)

    def probe(self, home: Path, mode: str, **options: object) -> list[str]:
        args = [mode]
        for name, value in options.items():
            args += [f"--{name.replace('_', '-')}", str(value)]
        return self.command(LOAD_PROBE, args, home)


def pinned_classpath(classpath: str, name: str) -> str:
    """The classpath's jars hard-linked (or copied) under build/sidebyside/``name``.

    Other runs on this machine rebuild the shared Maven caches (even into throw-away local repositories);
    a benchmark that relaunches a broker half an hour later must not find its jars gone.
    """
    entries = [e for e in classpath.split(os.pathsep) if e]
    missing = [e for e in entries if not os.path.exists(e)]
    if missing:
        raise FileNotFoundError(
            f"{len(missing)} classpath entries of {name} are missing (first: {missing[0]}); the cached classpath in "
            f"{toolchain.CACHE} is stale: delete its *.classpath files and rerun")
    pinned_dir = BUILD / "pinned" / name
    pinned_dir.mkdir(parents=True, exist_ok=True)
    out = []
    for i, entry in enumerate(entries):
        if os.path.isdir(entry):
            out.append(entry)
            continue
        target = pinned_dir / f"{i:03d}-{os.path.basename(entry)}"
        if not target.exists() or target.stat().st_size != os.path.getsize(entry):
            tmp = target.with_name(f"{target.name}.tmp{os.getpid()}")
            try:
                os.link(entry, tmp)
            except OSError:
                shutil.copyfile(entry, tmp)
            os.replace(tmp, target)
        out.append(str(target))
    return os.pathsep.join(out)


def apache_server_classpath(version: str = VERSION) -> str:
    """Apache's name server and broker jars (resolved by compat_tests.toolchain), pinned."""
    return pinned_classpath(toolchain.apache_server_classpath(version), f"apache-server-{version}")


def load_tools(version: str = VERSION) -> LoadTools:
    """Resolve (first time: download) rocketmq-example and its client, and compile LoadProbe."""
    with toolchain._build_lock():
        deps = toolchain._maven_classpath(JAVA_DIR / "pom.xml", f"sidebyside-{version}", {"rocketmq.version": version})
    src = JAVA_DIR / "src" / "main" / "java"
    classes = BUILD / f"loadprobe-{version}-{toolchain._digest(src, deps)}"
    if not classes.exists():
        tmp = classes.with_name(f"{classes.name}.tmp{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        sources = [str(p) for p in sorted(src.rglob("*.java"))]
        toolchain._run([toolchain.require("javac"), "-nowarn", "-encoding", "UTF-8", "-d", str(tmp), "-cp", deps, *sources],
                       f"compiling LoadProbe against rocketmq-client {version}")
        try:
            tmp.rename(classes)
        except OSError:  # another run compiled it meanwhile
            shutil.rmtree(tmp, ignore_errors=True)
    return LoadTools(classpath=pinned_classpath(f"{deps}{os.pathsep}{classes}", f"clients-{version}"), version=version)


def run_to_end(name: str, argv: list[str], log: Path, timeout_s: float) -> str:
    """Run a tool until it exits (killed after ``timeout_s``); return its output."""
    child = Child(name, argv, log).start()
    try:
        child.proc.wait(timeout=timeout_s)
    except Exception:
        pass
    finally:
        timed_out = child.alive()
        child.kill()
    text = log.read_text(errors="replace")
    if timed_out:
        text += f"\n(killed: still running after {timeout_s:.0f}s)\n"
    return text


def run_for(name: str, argv: list[str], log: Path, seconds: float) -> str:
    """Run a tool that never ends by itself (Apache's producers) for ``seconds``, then kill it."""
    child = Child(name, argv, log).start()
    try:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and child.alive():
            time.sleep(0.2)
    finally:
        child.kill()
    return log.read_text(errors="replace")
