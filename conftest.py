"""Suite-wide checks before any test runs."""

from __future__ import annotations

import importlib
import os
import shutil

import pytest


def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to test an old build: a Cython-compiled module older than its source hides the edit."""
    from ferrymq.wire import native

    for source in native.CYTHON_SOURCES:
        importlib.import_module(native.module_name(source))
    stale = native.stale()
    if stale:
        raise pytest.UsageError(f"compiled modules older than their source: {', '.join(stale)}; run `make compile`")


@pytest.fixture(scope="session")
def spark():
    """One local Spark session (``local[2]``) for every test that reads or writes through the ``rocketmq``
    format (tests/pipeline and compat_tests): starting one takes 10-20 s, so the whole run shares it."""
    pytest.importorskip("pyspark", reason="the spark extra is not installed (make installs it)")
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17, and java is not installed")
    from ferrymq.pipeline.session import local_session

    session = local_session(app_name="ferrymq-tests")
    yield session
    session.stop()
