"""Suite-wide checks before any test runs, and which tests share a worker when the run is distributed."""

from __future__ import annotations

import importlib
import json
import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

import pytest

#: Session fixtures that boot a server (or Spark) once for the whole run. In a distributed run (``make
#: test``: ``pytest -n 2 --dist loadgroup``) every worker is a session of its own, so the tests using one of
#: these are one unit of work, run by one worker that boots it once; a parametrized one (``server``: Apache,
#: FerryMQ) makes a unit per parameter. The first of these a test uses names its unit.
SHARED_SESSION_FIXTURES = ("server", "spark", "mosquitto")

def pytest_sessionstart(session: pytest.Session) -> None:
    """Refuse to test an old build: a Cython-compiled module older than its source, or one no list names,
    hides the source."""
    from ferrymq.wire import native

    for source in native.CYTHON_SOURCES:
        importlib.import_module(native.module_name(source))
    stale = native.stale()
    if stale:
        raise pytest.UsageError(f"compiled modules older than their source: {', '.join(stale)}; run `make compile`")
    unlisted = native.unlisted()
    if unlisted:
        raise pytest.UsageError(f"compiled modules wire/native.py does not list (they hide their source and are "
                                f"never rebuilt): {', '.join(unlisted)}; delete them")


# --- the distributed run's units of work -------------------------------------------------------------
# xdist's own `loadgroup` reads `xdist_group` marks by renaming test ids, which pytest 9.2's node ids no
# longer allow; here each worker writes the unit of every test it collected to a directory the controller
# named, and the controller's scheduler (xdist's by-scope one) reads the units from there.


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class UnitScheduling(LoadScopeScheduling):
        """xdist's scope scheduling with the units the workers wrote: the largest units are handed
        out first, and a worker takes its next one when the current one is nearly done."""

        units: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.units is None:
                written = sorted(_units_dir(config).glob("*.json"))
                self.units = json.loads(written[0].read_text()) if written else {}
            return self.units.get(nodeid, nodeid)

    return UnitScheduling(config, log)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    node.workerinput["units_dir"] = str(_units_dir(node.config))


_UNITS_DIR = pytest.StashKey[Path]()


def _units_dir(config: pytest.Config) -> Path:
    if _UNITS_DIR not in config.stash:
        units_dir = config.stash[_UNITS_DIR] = Path(tempfile.mkdtemp(prefix="pytest-units-"))
        config.add_cleanup(lambda: shutil.rmtree(units_dir, ignore_errors=True))
    return config.stash[_UNITS_DIR]


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    units_dir = getattr(config, "workerinput", {}).get("units_dir")
    if units_dir is not None:
        written = Path(units_dir) / f"{config.workerinput['workerid']}.json"
        partial = written.with_suffix(".partial")
        partial.write_text(json.dumps(dict(zip((item.nodeid for item in items), worker_groups(items)))))
        partial.replace(written)


def worker_groups(items: list[pytest.Item]) -> list[str]:
    """The unit of work of each item: its ``xdist_group`` mark's name, else the shared session fixture it
    uses (one unit per parameter), else its module, so that a module-scoped fixture is set up on one worker
    only. A module's other tests join the unit of its shared-fixture tests when they all share one (their
    module fixtures may be built on that fixture)."""
    shared = [_marked_group(item) or _shared_fixture_group(item) for item in items]
    by_module: dict[str, set[str]] = defaultdict(set)
    for item, group in zip(items, shared):
        if group is not None:
            by_module[item.nodeid.split("::")[0]].add(group)
    groups = []
    for item, group in zip(items, shared):
        module = item.nodeid.split("::")[0]
        home = by_module.get(module, set())
        groups.append(group or (next(iter(home)) if len(home) == 1 else module))
    return groups


def _marked_group(item: pytest.Item) -> str | None:
    mark = item.get_closest_marker("xdist_group")
    return None if mark is None else str(mark.args[0] if mark.args else mark.kwargs.get("name", "default"))


def _shared_fixture_group(item: pytest.Item) -> str | None:
    definitions = getattr(item, "_fixtureinfo").name2fixturedefs
    params = item.callspec.params if hasattr(item, "callspec") else {}
    for name in SHARED_SESSION_FIXTURES:
        if name in item.fixturenames and definitions[name][-1].scope == "session":
            return f"{name}-{params[name]}" if name in params else name
    return None


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
