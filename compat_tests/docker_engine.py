"""A private, loopback-only Docker engine and FerryMQ's image built on it without any registry.

The engine runs with no bridge, no iptables rules and its sockets under a temp dir, so it touches nothing
of the host's networking: containers use the host's network (``--network host``). The image is the
repository's own ``Dockerfile`` built ``FROM`` a Debian root file system made by ``debootstrap`` (cached
as a tarball in the user's cache, ``~/.cache/ferrymq-compat/container/``, beside the Maven and Go caches:
it depends on no file of the clone), so nothing is pulled from a container registry; Python packages
come from PyPI during the build, as for a user.

The engine's images and build cache are kept in the user's cache too (``~/.cache/ferrymq-compat/docker/``),
so a later session's build runs only the steps whose inputs changed, as a user's second ``docker build``
does: the dependencies' layer is rebuilt only when ``pyproject.toml`` changes. One engine at a time uses
them (a file lock); an engine started meanwhile keeps its state in its temp dir, thrown away at its stop.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from .toolchain import USER_CACHE

ROOT = Path(__file__).resolve().parent.parent
ROOTFS_CACHE = USER_CACHE / "container"
#: the data root of the engine holding the lock beside it (images, layers, build cache) between sessions
DATA_ROOT_CACHE = USER_CACHE / "docker"
#: Debian release and packages of the base root file system (its Python, 3.11, is FerryMQ's minimum)
SUITE = "bookworm"
PACKAGES = ("python3", "python3-venv")
#: the root file system as imported, the base the test builds FROM, and FerryMQ's image
ROOTFS_IMAGE = "ferrymq-test-rootfs"
BASE_IMAGE = "ferrymq-test-base"
IMAGE = "ferrymq-test"
#: the host's CA bundle, when it names one: pip in the build trusts what pip on the host trusts
CA_BUNDLE_VARIABLES = ("PIP_CERT", "REQUESTS_CA_BUNDLE", "SSL_CERT_FILE")


class DockerUnavailable(RuntimeError):
    """Docker cannot run on this machine; the message says why."""


def ensure_installed() -> None:
    """Install docker.io and debootstrap with apt-get when either is missing (root only)."""
    missing = [tool for tool in ("dockerd", "docker", "debootstrap") if shutil.which(tool) is None]
    if not missing:
        return
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise DockerUnavailable(f"{', '.join(missing)} not installed, and installing docker.io and debootstrap "
                                "needs root and apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", "docker.io", "debootstrap"]
    if subprocess.run(install, env=env, capture_output=True, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
        proc = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise DockerUnavailable(f"apt-get could not install docker.io and debootstrap:\n{proc.stderr[-2000:]}")


def _lock_data_root() -> IO[str] | None:
    """The open lock file of :data:`DATA_ROOT_CACHE` once this process holds it; None while an engine of
    another session uses it."""
    USER_CACHE.mkdir(parents=True, exist_ok=True)
    lock = open(USER_CACHE / "docker.lock", "w")  # noqa: SIM115 - held while the engine runs
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    return lock


@dataclass
class Engine:
    """A running ``dockerd``; ``env`` points the docker CLI and the Python SDK at it."""

    proc: subprocess.Popen
    home: Path
    #: the lock of :data:`DATA_ROOT_CACHE` while the engine keeps its data there, else None
    data_lock: IO[str] | None = None

    @property
    def host(self) -> str:
        return f"unix://{self.home / 'docker.sock'}"

    @property
    def env(self) -> dict[str, str]:
        return dict(os.environ, DOCKER_HOST=self.host, DOCKER_BUILDKIT="0")

    @classmethod
    def start(cls, timeout: float = 60) -> Engine:
        """An engine on :data:`DATA_ROOT_CACHE` when no other session's uses it, else on a data root of its
        own. A kept data root the engine cannot start on (one killed mid-write) is removed, and this session's
        engine starts on its own."""
        data_lock = _lock_data_root()
        if data_lock is not None:
            try:
                return cls._launch(timeout, data_lock)
            except (DockerUnavailable, RuntimeError):
                shutil.rmtree(DATA_ROOT_CACHE, ignore_errors=True)
        return cls._launch(timeout, None)

    @classmethod
    def _launch(cls, timeout: float, data_lock: IO[str] | None) -> Engine:
        # a short path: the engine and containerd put unix sockets under it (108-byte limit)
        home = Path(tempfile.mkdtemp(prefix="fmq-docker-"))
        data_root = DATA_ROOT_CACHE if data_lock is not None else home / "data"
        log = open(home / "dockerd.log", "wb")  # noqa: SIM115 - the engine writes it while it runs
        proc = subprocess.Popen(
            ["dockerd", "--bridge=none", "--iptables=false", "--ip6tables=false", "--ip-masq=false",
             f"--data-root={data_root}", f"--exec-root={home / 'exec'}", f"--pidfile={home / 'dockerd.pid'}",
             f"--host=unix://{home / 'docker.sock'}"],
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        engine = cls(proc, home, data_lock)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                reason = engine.log_tail()
                engine.stop()
                raise DockerUnavailable(f"dockerd exited at start (status {proc.returncode}):\n{reason}")
            if engine.docker("version", check=False).returncode == 0:
                return engine
            time.sleep(0.2)
        engine.stop()
        raise RuntimeError(f"dockerd did not answer within {timeout:.0f}s:\n{engine.log_tail()}")

    def log_tail(self) -> str:
        return (self.home / "dockerd.log").read_text(errors="replace")[-3000:]

    def docker(self, *args: str, check: bool = True, timeout: float = 900, stdin=subprocess.DEVNULL
               ) -> subprocess.CompletedProcess:
        proc = subprocess.run(["docker", *args], env=self.env, capture_output=True, timeout=timeout, stdin=stdin,
                              check=False)
        if check and proc.returncode != 0:
            raise RuntimeError(f"docker {' '.join(args)} failed (exit {proc.returncode}):\n"
                               f"{proc.stdout.decode(errors='replace')[-3000:]}\n"
                               f"{proc.stderr.decode(errors='replace')[-3000:]}")
        return proc

    def stop(self) -> None:
        """Stop the engine (its containers with it) and remove its state, but for the images and build cache
        it keeps in :data:`DATA_ROOT_CACHE`: of those, what no tag reaches any more (an image a later build
        of the same tag replaced) is removed."""
        if self.data_lock is not None and self.proc.poll() is None:
            self.docker("container", "prune", "-f", check=False, timeout=120)
            self.docker("image", "prune", "-f", check=False, timeout=300)
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        # the engine leaves its network namespace mounted under exec-root
        for mount_point in reversed(self._mounts()):
            subprocess.run(["umount", mount_point], capture_output=True, check=False)
        shutil.rmtree(self.home, ignore_errors=True)
        if self.data_lock is not None:
            self.data_lock.close()  # releases the lock
            self.data_lock = None

    def _mounts(self) -> list[str]:
        with open("/proc/mounts") as mounts:
            points = [line.split()[1] for line in mounts]
        return [p for p in points if p == str(self.home) or p.startswith(f"{self.home}/")]


def rootfs_tarball() -> Path:
    """The Debian root file system as a tarball, made by debootstrap on first use (~1 min) and cached."""
    out = ROOTFS_CACHE / f"debian-{SUITE}-minbase-{'-'.join(PACKAGES)}.tar"
    if out.exists():
        return out
    ROOTFS_CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fmq-rootfs-") as tmp:
        root = Path(tmp) / "root"
        proc = subprocess.run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE,
                               str(root)], capture_output=True, text=True, timeout=1200, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"debootstrap failed (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n"
                               f"{proc.stderr[-3000:]}")
        # a name of its own: another clone's tests may be making the same tarball at the same time
        partial = out.with_name(f"{out.name}.{os.getpid()}.tmp")
        subprocess.run(["tar", "-C", str(root), "-cf", str(partial), "."], check=True, capture_output=True)
        os.replace(partial, out)
    return out


def build_base(engine: Engine) -> None:
    """Import the root file system and add the host's CA bundle for pip (PIP_CERT) when there is one.

    The import is tagged with the tarball's identity and skipped when the engine holds that tag already:
    each import is a new image, and every layer built on it would be built again."""
    tarball = rootfs_tarball()
    stat = tarball.stat()
    rootfs = f"{ROOTFS_IMAGE}:{stat.st_size:x}-{stat.st_mtime_ns:x}"
    if engine.docker("image", "inspect", rootfs, check=False).returncode != 0:
        with open(tarball, "rb") as tar:
            engine.docker("import", "-", rootfs, stdin=tar)
    bundle = next((Path(os.environ[v]) for v in CA_BUNDLE_VARIABLES
                   if os.environ.get(v) and Path(os.environ[v]).is_file()), None)
    lines = [f"FROM {rootfs}"]
    with tempfile.TemporaryDirectory(prefix="fmq-base-") as context:
        if bundle is not None:
            shutil.copy(bundle, Path(context) / "ca-bundle.crt")
            lines += ["COPY ca-bundle.crt /etc/ssl/certs/host-ca-bundle.crt",
                      "ENV PIP_CERT=/etc/ssl/certs/host-ca-bundle.crt"]
        if os.environ.get("PIP_INDEX_URL"):
            lines.append(f"ENV PIP_INDEX_URL={os.environ['PIP_INDEX_URL']}")
        (Path(context) / "Dockerfile").write_text("\n".join(lines) + "\n")
        engine.docker("build", "-q", "-t", BASE_IMAGE, context)


def build_image(engine: Engine) -> None:
    """The repository's Dockerfile, as a user builds it, on the test's base image.

    The build's network is the host's: pip inside it fetches the dependencies from PyPI.
    FERRYMQ_NO_CYTHON=1: the base has no C compiler, so the hot path runs from its source either way.
    """
    engine.docker("build", "--network", "host", "--build-arg", f"BASE={BASE_IMAGE}",
                  "--build-arg", "FERRYMQ_NO_CYTHON=1", "-t", IMAGE, str(ROOT))
