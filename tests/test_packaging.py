"""The wheel installs FerryMQ under one name, ``ferrymq``, and works from a clean virtual environment."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    env = dict(os.environ, FERRYMQ_NO_CYTHON="1")  # the layout is the same; Cython only adds build time
    # built with this environment's setuptools (build-system.requires): an isolated build environment
    # would install them again, and the wheel's layout comes from setup.py either way
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(out),
                    str(ROOT)], check=True, env=env, capture_output=True)
    (found,) = out.glob("ferrymq-*.whl")
    return found


def test_the_wheel_installs_nothing_at_top_level_but_ferrymq(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    tops = {name.split("/", 1)[0] for name in names}
    assert tops == {"ferrymq", next(t for t in tops if t.endswith(".dist-info"))}
    for package in ("wire", "remoting", "server", "sdk", "gateways", "pipeline", "testing"):
        assert f"ferrymq/{package}/__init__.py" in names
    assert "ferrymq/server/broker/service.py" in names
    assert "ferrymq/sdk/producer.py" in names
    assert "ferrymq/testing/pytest_plugin.py" in names and "ferrymq/testing/containers.py" in names


def test_the_wheel_registers_the_pytest_plugin(wheel):
    """pytest loads ``ferrymq.testing.pytest_plugin`` wherever FerryMQ is installed (entry point pytest11)."""
    archive = zipfile.ZipFile(wheel)
    (entry_points,) = [name for name in archive.namelist() if name.endswith(".dist-info/entry_points.txt")]
    text = archive.read(entry_points).decode()
    section = text.split("[pytest11]", 1)[1].split("[", 1)[0]
    assert section.split() == ["ferrymq", "=", "ferrymq.testing.pytest_plugin"]


def test_a_clean_venv_imports_the_sdk_and_the_broker(wheel, tmp_path):
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    python = str(env_dir / "bin" / "python")
    # this environment's pip installs into the clean one (pip --python): the wheel and its declared
    # dependencies, nothing else; bytecode is left to the first import
    subprocess.run([sys.executable, "-m", "pip", "--python", python, "install", "-q", "--no-compile", str(wheel)],
                   check=True, capture_output=True)
    probe = ("import ferrymq.sdk, ferrymq.server.broker, ferrymq.testing.server, sys; "
             "print(sorted(m for m in sys.modules if m.split('.')[0] in ('wire', 'server', 'sdk_py', 'remoting')))")
    result = subprocess.run([python, "-c", probe], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert result.stdout.strip() == "[]"


#: the ``ferrymq`` command is the top of the stack: its ``admin`` subcommand runs the SDK's admin CLI
TOP_OF_STACK = {("server/cli.py", "ferrymq.sdk.admin_cli")}


def _imports(folder: str) -> set[str]:
    """Every ``ferrymq.*`` module that the Python files under ``folder`` import (but :data:`TOP_OF_STACK`)."""
    found = set()
    for path in (ROOT / folder).rglob("*.py"):
        where = path.relative_to(ROOT).as_posix()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = {node.module}
            elif isinstance(node, ast.Import):
                names = {alias.name for alias in node.names}
            else:
                continue
            found.update(name for name in names if (where, name) not in TOP_OF_STACK)
    return {name for name in found if name.startswith("ferrymq.")}


@pytest.mark.parametrize("folder, forbidden", [
    ("wire", ("ferrymq.remoting", "ferrymq.server", "ferrymq.sdk", "ferrymq.testing")),
    ("remoting", ("ferrymq.server", "ferrymq.sdk", "ferrymq.testing")),
    ("sdk_py", ("ferrymq.server", "ferrymq.testing")),
    ("server", ("ferrymq.sdk", "ferrymq.testing")),
    # the server runs in a child process: the test process talks to it through ferrymq.wire alone
    ("testing", ("ferrymq.remoting", "ferrymq.server", "ferrymq.sdk")),
])
def test_layers_import_only_downwards(folder, forbidden):
    wrong = sorted(name for name in _imports(folder) if name.startswith(forbidden))
    assert wrong == [], f"{folder}/ imports {wrong}"
