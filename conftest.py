"""Suite-wide checks before any test runs."""

from __future__ import annotations

import importlib

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to test an old build: a Cython-compiled module older than its source hides the edit."""
    from ferrymq.wire import native

    for source in native.CYTHON_SOURCES:
        importlib.import_module(native.module_name(source))
    stale = native.stale()
    if stale:
        raise pytest.UsageError(f"compiled modules older than their source: {', '.join(stale)}; run `make compile`")
