"""Builds and locates the official clients and tools the compatibility tests drive.

Everything comes from the public registries on first use, so a fresh clone needs only java, mvn and go:

* Maven resolves ``rocketmq-client`` + ``rocketmq-tools`` (``java/pom.xml``), Apache's name server,
  broker and controller (``java/server/pom.xml``), Apache's proxy (``java/proxy/pom.xml``) and the gRPC client
  ``rocketmq-client-java`` (``java/grpc/pom.xml``) into ``~/.m2``; the resulting classpaths are cached as
  text files.
* ``javac`` compiles the scenario program (``java/src``) once per client version, and the
  testcontainers-java check (``java/testcontainers``, its own pom) once.
* ``go build`` compiles the Go harnesses once: ``go/`` on the remoting client, ``go5/`` on the gRPC client
  ``rocketmq-clients/golang/v5`` (modules from the Go module proxy).
* ``npm ci`` installs the Node.js gRPC client ``rocketmq-client-nodejs`` (``node/``, its lock file) once.

Build outputs live in the user's cache, ``~/.cache/ferrymq-compat/build/`` (``$XDG_CACHE_HOME`` is honoured),
beside the Maven and Go caches, keyed by a hash of their inputs: an edited pom or source file triggers a
rebuild, and a fresh clone or another worktree reuses what was built from the same inputs. A file lock
serialises concurrent builders, of every clone.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import zipfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The compatibility tests' part of the user's cache (the Debian root file system of the container tests too)
USER_CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "ferrymq-compat"
CACHE = USER_CACHE / "build"
JAVA_DIR = HERE / "java"
GO_DIR = HERE / "go"
GO5_DIR = HERE / "go5"
NODE_DIR = HERE / "node"

#: Latest 5.x release of rocketmq-client / rocketmq-tools / namesrv / broker on Maven Central (all four).
ROCKETMQ_5 = "5.5.0"
#: Last 4.9.x release of rocketmq-client and rocketmq-tools (4.9.8; namesrv/broker stop at 4.9.7).
ROCKETMQ_4 = "4.9.8"
CLIENT_VERSIONS = (ROCKETMQ_5, ROCKETMQ_4)
#: Latest release of rocketmq-client-java, the official gRPC client (apache/rocketmq-clients), on Maven Central.
GRPC_CLIENT_JAVA = "5.2.0"

#: JVM flags for short-lived client JVMs (mqadmin, scenarios): start fast, stay small on 2 cores.
CLIENT_JVM_FLAGS = (
    "-Xms64m",
    "-Xmx256m",
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-XX:-UsePerfData",
    "-Xss512k",
)


class ToolMissing(RuntimeError):
    """A required external tool (java, javac, mvn, go) is not installed."""


def require(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        raise ToolMissing(f"'{tool}' is not on PATH; install it to run the compatibility tests")
    return path


def missing_tools(*tools: str) -> list[str]:
    return [tool for tool in tools if shutil.which(tool) is None]


def _digest(*parts: bytes | str | Path) -> str:
    h = hashlib.sha256()
    for part in parts:
        if isinstance(part, Path):
            if part.is_dir():
                for f in sorted(p for p in part.rglob("*") if p.is_file()):
                    h.update(str(f.relative_to(part)).encode())
                    h.update(f.read_bytes())
            else:
                h.update(part.read_bytes())
        else:
            h.update(part.encode() if isinstance(part, str) else part)
    return h.hexdigest()[:16]


@contextmanager
def _build_lock():
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _run(cmd: list[str], what: str, cwd: Path | None = None, timeout: float = 1200) -> None:
    started = time.monotonic()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise RuntimeError(
            f"{what} failed (exit {proc.returncode}) after {time.monotonic() - started:.0f}s: {' '.join(cmd)}\n"
            f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}"
        )


def _maven_classpath(pom: Path, name: str, properties: dict[str, str]) -> str:
    """Resolve ``pom``'s dependencies (downloading on first use) and return the classpath string."""
    # MAVEN_OPTS may point Maven at another local repository: the jar paths depend on it.
    key = _digest(pom, repr(sorted(properties.items())), os.environ.get("MAVEN_OPTS", ""))
    out = CACHE / f"{name}-{key}.classpath"
    if out.exists() and not all(Path(jar).exists() for jar in out.read_text().strip().split(os.pathsep)):
        out.unlink()  # a jar vanished from the local repository: resolve again
    if not out.exists():
        tmp = out.with_suffix(".tmp")
        cmd = [require("mvn"), "-q", "-B", "-f", str(pom), "dependency:build-classpath", f"-Dmdep.outputFile={tmp}"]
        cmd += [f"-D{k}={v}" for k, v in properties.items()]
        _run(cmd, f"resolving {name} with Maven")
        tmp.rename(out)
    return out.read_text().strip()


@dataclass(frozen=True)
class JavaClients:
    """rocketmq-client + rocketmq-tools of one version, plus the compiled scenario program."""

    version: str
    classpath: str  # dependency jars, then the scenario classes
    #: the class-data sharing archive of exactly this classpath (None: the JVM loads every class itself)
    class_archive: Path | None = None

    def command(self, main_class: str, args: list[str], *, home: Path, system_properties: dict[str, str] | None = None) -> list[str]:
        """A java command line running ``main_class``; logs and client state go under ``home``."""
        props = {
            "user.home": str(home),
            "rocketmq.client.logRoot": str(home / "logs"),
            "rocketmq.client.logUseSlf4j": "false",
            **(system_properties or {}),
        }
        sharing = [f"-XX:SharedArchiveFile={self.class_archive}"] if self.class_archive else []
        return [
            require("java"),
            *CLIENT_JVM_FLAGS,
            *sharing,
            *(f"-D{k}={v}" for k, v in props.items()),
            "-cp",
            self.classpath,
            main_class,
            *args,
        ]


def java_clients(version: str = ROCKETMQ_5) -> JavaClients:
    """Resolve (first time: download) the official Java client and tools and compile the scenarios."""
    with _build_lock():
        deps = _maven_classpath(JAVA_DIR / "pom.xml", f"clients-{version}", {"rocketmq.version": version})
        classes = _compiled(JAVA_DIR / "src" / "main" / "java", deps, f"scenarios-{version}",
                            f"the Java scenarios against rocketmq-client {version}")
        # class-data sharing maps classes from jars only, not from a directory
        classpath = f"{deps}{os.pathsep}{_jarred(classes)}"
        archive = _class_data_archive(classpath, f"clients-{version}")
    return JavaClients(version=version, classpath=classpath, class_archive=archive)


def testcontainers_java() -> JavaClients:
    """testcontainers-java with the 5.x client, and ContainerCheck (``java/testcontainers``) compiled."""
    project = JAVA_DIR / "testcontainers"
    with _build_lock():
        deps = _maven_classpath(project / "pom.xml", f"testcontainers-{ROCKETMQ_5}", {"rocketmq.version": ROCKETMQ_5})
        classes = _compiled(project / "src" / "main" / "java", deps, "containercheck", "ContainerCheck")
    return JavaClients(version=ROCKETMQ_5, classpath=f"{deps}{os.pathsep}{classes}")


def _compiled(src: Path, deps: str, name: str, what: str) -> Path:
    """The classes of every ``.java`` file under ``src``, compiled once per content of sources and classpath."""
    classes = CACHE / f"{name}-{_digest(src, deps)}"
    if not classes.exists():
        tmp = classes.with_name(classes.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        sources = [str(p) for p in sorted(src.rglob("*.java"))]
        _run([require("javac"), "-nowarn", "-encoding", "UTF-8", "-d", str(tmp), "-cp", deps, *sources],
             f"compiling {what}")
        tmp.rename(classes)
    return classes


def _jarred(classes: Path) -> Path:
    """``classes`` (a compiled directory) as a jar beside it."""
    jar = classes.with_name(classes.name + ".jar")
    if not jar.exists():
        tmp = jar.with_name(jar.name + ".tmp")
        with zipfile.ZipFile(tmp, "w") as zf:
            for f in sorted(p for p in classes.rglob("*") if p.is_file()):
                zf.write(f, f.relative_to(classes).as_posix())
        tmp.rename(jar)
    return jar


#: Client runs whose loaded classes make up the archive. They need no server: against a closed port each
#: still starts its client (producer, push consumer, admin tool), tries to connect and shuts down.
_TRAINING_RUNS = (
    ("ferrymq.compat.Scenarios", ["send", "-n", "127.0.0.1:1", "-t", "CdsTraining", "-count", "1"]),
    ("ferrymq.compat.Scenarios", ["consume", "-n", "127.0.0.1:1", "-t", "CdsTraining", "-g", "cds_training",
                                  "-count", "1", "-timeout", "500"]),
    ("ferrymq.compat.QuickMqAdmin", ["clusterList", "-n", "127.0.0.1:1"]),
)
#: seconds a training run is given (4.9.x's consumer keeps retrying the closed port and never leaves)
TRAINING_RUN_TIMEOUT = 10


def _class_data_archive(classpath: str, name: str) -> Path | None:
    """A class-data sharing archive of the classes the training runs load from ``classpath``, built once
    per classpath; None where this JVM cannot write one (the clients then run without)."""
    # The JVM refuses an archive once a jar it was made from changed: size and time are part of the key.
    jars = [Path(entry) for entry in classpath.split(os.pathsep)]
    stamps = [f"{jar}:{jar.stat().st_size}:{jar.stat().st_mtime_ns}" for jar in jars]
    archive = CACHE / f"{name}-{_digest(*stamps, *CLIENT_JVM_FLAGS)}.jsa"
    if archive.exists():
        return archive
    java = require("java")
    with tempfile.TemporaryDirectory(dir=CACHE) as work:
        work = Path(work)
        lines: dict[str, None] = {}
        for i, (main, args) in enumerate(_TRAINING_RUNS):
            listed = work / f"run-{i}.classlist"
            try:
                subprocess.run([java, *CLIENT_JVM_FLAGS, f"-XX:DumpLoadedClassList={listed}", f"-Duser.home={work}",
                                f"-Drocketmq.client.logRoot={work / 'logs'}", "-Drocketmq.client.logUseSlf4j=false",
                                "-cp", classpath, main, *args],
                               capture_output=True, timeout=TRAINING_RUN_TIMEOUT, stdin=subprocess.DEVNULL, check=False)
            except subprocess.TimeoutExpired:
                pass  # the list holds what the run loaded until then
            if listed.exists():
                lines.update(dict.fromkeys(listed.read_text().splitlines()))
        if not lines:
            return None
        classlist = work / "all.classlist"
        classlist.write_text("\n".join(lines) + "\n")
        tmp = work / "archive.jsa"
        dump = subprocess.run([java, *CLIENT_JVM_FLAGS, "-Xshare:dump", f"-XX:SharedClassListFile={classlist}",
                               f"-XX:SharedArchiveFile={tmp}", "-cp", classpath],
                              capture_output=True, timeout=300, stdin=subprocess.DEVNULL, check=False)
        if dump.returncode != 0 or not tmp.exists():
            return None
        tmp.rename(archive)
    return archive


def grpc_java_client() -> JavaClients:
    """rocketmq-client-java (one shaded jar) and GrpcScenarios (``java/grpc``) compiled against it."""
    project = JAVA_DIR / "grpc"
    with _build_lock():
        deps = _maven_classpath(project / "pom.xml", f"grpc-client-{GRPC_CLIENT_JAVA}",
                                {"rocketmq.client.java.version": GRPC_CLIENT_JAVA})
        classes = _compiled(project / "src" / "main" / "java", deps, f"grpc-scenarios-{GRPC_CLIENT_JAVA}",
                            f"the gRPC scenarios against rocketmq-client-java {GRPC_CLIENT_JAVA}")
    return JavaClients(version=GRPC_CLIENT_JAVA, classpath=f"{deps}{os.pathsep}{classes}")


def apache_proxy_classpath(version: str = ROCKETMQ_5) -> str:
    """Classpath of Apache's rocketmq-proxy (with the broker it runs in local mode), downloaded on first use."""
    with _build_lock():
        return _maven_classpath(JAVA_DIR / "proxy" / "pom.xml", f"apache-proxy-{version}",
                                {"rocketmq.server.version": version})


def apache_server_classpath(version: str = ROCKETMQ_5) -> str:
    """Classpath of Apache's rocketmq-namesrv, rocketmq-broker and rocketmq-controller (downloaded on first use)."""
    with _build_lock():
        return _maven_classpath(JAVA_DIR / "server" / "pom.xml", f"apache-server-{version}",
                                {"rocketmq.server.version": version})


def go_harness() -> Path:
    """Build (first time: download modules and compile) the Go harness binary; return its path."""
    return _go_binary(GO_DIR, "goharness", "the Go harness")


def go5_harness() -> Path:
    """The Go harness of the gRPC client (``go5/``), built on first use; its path."""
    return _go_binary(GO5_DIR, "go5harness", "the Go gRPC harness")


def _go_binary(src: Path, name: str, what: str) -> Path:
    with _build_lock():
        go = require("go")
        binary = CACHE / f"{name}-{_digest(src)}"
        if not binary.exists():
            tmp = binary.with_name(binary.name + ".tmp")
            _run([go, "build", "-buildvcs=false", "-o", str(tmp), "."], f"building {what} (go build)", cwd=src)
            tmp.rename(binary)
    return binary


def node_modules() -> Path:
    """The ``node_modules`` of ``node/package-lock.json`` (the Node.js gRPC client), installed on first use."""
    with _build_lock():
        npm = require("npm")
        lock = NODE_DIR / "package-lock.json"
        installed = CACHE / f"node-{_digest(NODE_DIR / 'package.json', lock)}"
        if not installed.exists():
            tmp = installed.with_name(installed.name + ".tmp")
            shutil.rmtree(tmp, ignore_errors=True)
            tmp.mkdir(parents=True)
            for name in ("package.json", "package-lock.json"):
                shutil.copy(NODE_DIR / name, tmp / name)
            _run([npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], "installing the Node.js client (npm ci)",
                 cwd=tmp)
            tmp.rename(installed)
    return installed / "node_modules"
