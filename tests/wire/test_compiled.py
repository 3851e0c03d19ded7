"""wire._compiled: a compiled module is used only while it is newer than its source."""

from __future__ import annotations

import importlib.machinery
import os

import pytest

from wire import _compiled


@pytest.fixture
def package(tmp_path, monkeypatch):
    pkg = tmp_path / "fakepkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    source = pkg / "mod.py"
    source.write_text("X = 1\n")
    built = pkg / ("mod" + importlib.machinery.EXTENSION_SUFFIXES[0])
    built.write_bytes(b"not loaded by these tests")
    monkeypatch.setattr(_compiled, "_PACKAGES", ("fakepkg.",))
    monkeypatch.delenv("FERRYMQ_PURE_PYTHON", raising=False)
    return pkg, source, built


def _origin(pkg):
    spec = _compiled._FreshCompiledFinder.find_spec("fakepkg.mod", [str(pkg)])
    return None if spec is None else spec.origin


def test_the_compiled_module_is_used_while_newer_than_its_source(package):
    pkg, source, built = package
    os.utime(source, (1000, 1000))
    os.utime(built, (2000, 2000))
    assert _origin(pkg) == str(built)
    assert _compiled.STATE["fakepkg.mod"] == "compiled"


def test_an_edited_source_runs_instead_of_a_stale_build(package):
    pkg, source, built = package
    os.utime(built, (1000, 1000))
    os.utime(source, (2000, 2000))
    assert _origin(pkg) == str(source)
    assert "newer than its compiled module" in _compiled.STATE["fakepkg.mod"]


def test_pure_python_is_forced_by_the_environment(package, monkeypatch):
    pkg, source, built = package
    os.utime(source, (1000, 1000))
    os.utime(built, (2000, 2000))
    monkeypatch.setenv("FERRYMQ_PURE_PYTHON", "1")
    assert _origin(pkg) == str(source)


def test_modules_outside_the_packages_and_c_only_modules_are_left_alone(package):
    pkg, source, built = package
    assert _compiled._FreshCompiledFinder.find_spec("other.mod", [str(pkg)]) is None
    source.unlink()  # a C-only module has no source to compare with
    assert _origin(pkg) is None
