"""wire.native: one registry says which compiled part runs, and finds builds older than their source."""

from __future__ import annotations

import importlib.machinery
import os
import types
from pathlib import Path

import pytest

from ferrymq.wire import native

ROOT = Path(__file__).resolve().parents[2]


def test_every_listed_source_exists():
    for part in native.C_PARTS:
        assert (ROOT / part.source).is_file(), part.source
        assert (ROOT / part.spec).is_file(), part.spec
    for source in native.CYTHON_SOURCES:
        assert (ROOT / source).is_file(), source


def test_module_names_follow_the_namespace():
    assert native.module_name("server/store/_writec.c") == "ferrymq.server.store._writec"
    assert native.module_name("sdk_py/consumer/push.py") == "ferrymq.sdk.consumer.push"
    assert native.module_name("remoting/protocol.py") == "ferrymq.remoting.protocol"


def test_pure_python_environment_turns_every_c_part_off(monkeypatch):
    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1")
    for part in native.C_PARTS:
        name = native.module_name(part.source)
        assert native.load(name) is None
        assert native.PURE_PYTHON_ENV in native.CHOICES[name]


def test_load_gives_the_built_extension_and_records_it(monkeypatch):
    monkeypatch.delenv(native.PURE_PYTHON_ENV, raising=False)
    name = "ferrymq.wire._crc"
    extension = native.load(name)
    assert extension is native.built(name)
    if extension is None:
        assert "not built" in native.CHOICES[name]
    else:
        assert native.CHOICES[name] == "C" and callable(extension.crc32)


def test_unknown_part_is_refused():
    with pytest.raises(KeyError, match="not a C part"):
        native.built("ferrymq.wire.frame")


def _fake_build(tmp_path: Path, source_newer: bool) -> dict[str, types.ModuleType]:
    folder = tmp_path / "wire"
    folder.mkdir()
    source = folder / "frame.py"
    built = folder / ("frame" + importlib.machinery.EXTENSION_SUFFIXES[0])
    source.write_text("X = 1\n")
    built.write_bytes(b"")
    older, newer = (built, source) if source_newer else (source, built)
    os.utime(older, (1_000_000, 1_000_000))
    os.utime(newer, (2_000_000, 2_000_000))
    module = types.ModuleType("ferrymq.wire.frame")
    module.__file__ = str(built)
    return {"ferrymq.wire.frame": module}


def test_a_build_older_than_its_source_is_stale(tmp_path):
    modules = _fake_build(tmp_path, source_newer=True)
    assert native.stale(modules) == ["ferrymq.wire.frame"]
    assert native.compiled_modules(modules) == ["ferrymq.wire.frame"]


def test_a_fresh_build_is_not_stale(tmp_path):
    assert native.stale(_fake_build(tmp_path, source_newer=False)) == []


def test_a_module_run_from_source_is_neither_compiled_nor_stale(tmp_path):
    module = types.ModuleType("ferrymq.wire.frame")
    module.__file__ = str(tmp_path / "frame.py")
    assert native.stale({"ferrymq.wire.frame": module}) == []
    assert native.compiled_modules({"ferrymq.wire.frame": module}) == []


def _tree(tmp_path: Path, *names: str) -> Path:
    for name in names:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    return tmp_path


def test_a_compiled_file_no_list_names_is_found(tmp_path):
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    root = _tree(tmp_path, "wire/frame.py", "wire/frame" + suffix, "gateways/mqtt/session.py",
                 "gateways/mqtt/session" + suffix, "wire/_crc" + suffix, "wire/__pycache__/x" + suffix)
    assert native.unlisted(str(root)) == [os.path.join("gateways", "mqtt", "session" + suffix)]
