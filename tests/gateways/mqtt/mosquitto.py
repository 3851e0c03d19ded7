"""Debian's ``mosquitto`` as the reference broker of the behaviour tests: every expectation holds there first.

Installed with apt-get when missing (root only, as compat_tests installs docker.io), as are the command-line
clients of ``mosquitto-clients``, and started on a free loopback port; it does not start by itself when
installed.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ferrymq.testing.certs import CertSet
from ferrymq.testing.ports import LOOPBACK, free_port


def _found(program: str) -> str | None:
    """``program`` on PATH, or in the system directories (mosquitto is in /usr/sbin, off most users' PATH)."""
    for path in (shutil.which(program), f"/usr/sbin/{program}", f"/usr/bin/{program}"):
        if path and os.path.exists(path):
            return path
    return None


def ensure_installed(program: str = "mosquitto", package: str = "mosquitto") -> str:
    """The path of ``program`` (from Debian's ``package``), installed with apt-get if missing; the test is
    skipped where that cannot be."""
    found = _found(program)
    if found:
        return found
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        pytest.skip(f"{program} is not installed, and installing {package} needs root and apt-get")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    install = ["apt-get", "install", "-y", "-q", package]
    if subprocess.run(install, env=env, capture_output=True, check=False).returncode != 0:
        subprocess.run(["apt-get", "update", "-q"], env=env, capture_output=True, check=False)
        proc = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            pytest.skip(f"apt-get could not install {package}:\n{proc.stderr[-2000:]}")
    return _found(program) or pytest.skip(f"{package} is installed, but {program} is not on PATH")



def terminate(proc: subprocess.Popen, grace: float = 5) -> None:
    """End ``proc`` with SIGTERM (so it can shut down as it would in use), SIGKILL after ``grace`` s."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

class Mosquitto:
    """A mosquitto broker on ``port`` of the loopback address, anonymous; with ``persistence``, its sessions
    and retained messages are saved in ``home`` when it stops and read back by :meth:`restart`."""

    def __init__(self, home: Path, *, persistence: bool = False, tls: CertSet | None = None,
                 users: dict[str, str] | None = None, acl: str | None = None):
        """``tls``: the listener takes TLS clients only, with the server certificate and key of ``tls``.
        ``users`` (name: password) make a password file and refuse anonymous clients; ``acl`` is the text
        of an acl_file."""
        self.binary = ensure_installed()
        self.port = free_port()
        self.conf = home / "mosquitto.conf"
        # started as root, mosquitto switches to user "mosquitto", which cannot read or write in the test's directory
        as_root = "user root\n" if os.geteuid() == 0 and (persistence or tls or users or acl) else ""
        saved = f"persistence true\npersistence_location {home}/\n" if persistence else "persistence false\n"
        listener = f"listener {self.port} {LOOPBACK}\n"
        if tls is not None:
            listener += f"cafile {tls.ca}\ncertfile {tls.server.cert}\nkeyfile {tls.server.key}\n"
        access = "allow_anonymous true\n"
        if users:
            passwords = home / "passwords"
            passwords.write_text("")
            for name, password in users.items():
                subprocess.run([ensure_installed("mosquitto_passwd", "mosquitto"), "-b", str(passwords), name,
                                password], check=True, capture_output=True)
            access = f"allow_anonymous false\npassword_file {passwords}\n"
        if acl is not None:
            (home / "acl").write_text(acl)
            access += f"acl_file {home / 'acl'}\n"
        self.conf.write_text(f"{listener}{access}{saved}{as_root}log_dest stderr\n")
        self.log = home / "mosquitto.log"
        self.start()

    def start(self) -> None:
        with open(self.log, "ab") as out:
            # killed with the test process: a session's mosquitto outlived a killed pytest
            command = [sys.executable, "-m", "ferrymq.testing.pdeathsig", str(os.getpid()),
                       self.binary, "-c", str(self.conf)]
            self.proc = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection((LOOPBACK, self.port), 0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.02)
        self.stop()
        raise RuntimeError(f"mosquitto did not start:\n{self.log.read_text()[-2000:]}")

    def restart(self) -> None:
        self.stop()
        self.start()

    def stop(self) -> None:
        terminate(self.proc)
