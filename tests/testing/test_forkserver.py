"""The fork server that starts FerryMQServer's and the HA tests' servers: a forked server is the process
``python -m ferrymq.testing.child`` would have started."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ferrymq.testing import admin, forkserver
from ferrymq.testing.ports import LOOPBACK

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="pidfds are Linux's")


@pytest.fixture(autouse=True)
def own_fork_server(monkeypatch):
    """A fork server started in this test's environment: the shared one serves only environments that equal
    the one it started in wherever its imports read, and an earlier test may have changed those."""
    monkeypatch.setattr(forkserver, "_SERVER", None)
    yield
    if forkserver._SERVER is not None:
        forkserver._SERVER._give_up()


def namesrv_conf(home: Path) -> Path:
    conf = home / "namesrv.conf"
    conf.write_text(f"listenPort=0\nbindAddress={LOOPBACK}\nkvConfigPath={home / 'kv.json'}\n"
                    f"configStorePath={home / 'namesrv.properties'}\n")
    return conf


def test_a_forked_server_has_its_own_session_directory_and_exit_status(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    log = tmp_path / "namesrv.log"
    proc = forkserver.start_cli(["namesrv", "-c", str(namesrv_conf(tmp_path))], log)
    try:
        assert isinstance(proc, forkserver.ForkedProcess)
        deadline = time.monotonic() + 30
        while "name server listening on" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()
            time.sleep(0.01)
        assert os.getsid(proc.pid) == proc.pid
        assert Path(f"/proc/{proc.pid}/cwd").resolve() == tmp_path.resolve()
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(0.01)
        port = re.search(r"name server listening on [\d.]+:(\d+)", log.read_text()).group(1)
        admin.cluster_info(f"{LOOPBACK}:{port}")  # answered: the reactor runs, SIGTERM stops it cleanly
        proc.terminate()
        assert proc.wait(10) == 0, log.read_text()
    finally:
        proc.kill()
    assert proc.poll() == 0


def test_a_refused_start_ends_alike_forked_and_plain_and_another_environment_starts_plain(tmp_path, monkeypatch):
    missing = ["namesrv", "-c", str(tmp_path / "missing.conf")]
    forked = forkserver.start_cli(missing, tmp_path / "forked.log")
    assert isinstance(forked, forkserver.ForkedProcess)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path))  # read by no import: still forked
    also_forked = forkserver.start_cli(missing, tmp_path / "also-forked.log")
    assert isinstance(also_forked, forkserver.ForkedProcess)
    assert also_forked.wait(30) != 0
    monkeypatch.setenv("ROCKETMQ_HOME", str(tmp_path))  # read by the config classes as they are imported
    plain = forkserver.start_cli(missing, tmp_path / "plain.log")
    assert isinstance(plain, subprocess.Popen)
    assert forked.wait(30) == plain.wait(30) != 0
    said = [(tmp_path / name).read_text().splitlines()[-1] for name in ("forked.log", "plain.log")]
    assert said[0] == said[1], said
