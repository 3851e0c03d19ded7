"""The ``ferrymq`` pytest plugin: a real FerryMQ server (name server + broker) for the tests that ask for one.

Fixtures:
  ferrymq          a running :class:`~ferrymq.testing.server.FerryMQServer`, one per test by default;
                   ``ferrymq_scope`` (ini) or ``--ferrymq-scope`` shares one per module, package or session
  ferrymq_factory  ``ferrymq_factory(**conf)`` starts another server with its own settings (stopped after
                   the test), for a test that needs two, or settings unlike the shared server's

Settings are Apache broker config keys: the ini options and ``--ferrymq-*`` command-line options below
(the command line wins), then ``@pytest.mark.ferrymq(key=value, ...)`` on a test, class or module (the
closest wins). When a test fails, the report gets the log its servers wrote during the test.

Loaded by pytest wherever FerryMQ is installed, so this module imports nothing heavy until a server starts.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from .server import FerryMQServer

#: options that set one broker config key: option name -> (key, help)
KEY_OPTIONS: dict[str, tuple[str, str]] = {
    "flush_disk_type": ("flushDiskType", "ASYNC_FLUSH (default) or SYNC_FLUSH"),
    "enable_property_filter": ("enablePropertyFilter", "true: consumers may filter with SQL92 (default false)"),
    "message_delay_level": ("messageDelayLevel", 'the delay levels, e.g. "1s 2s 5s" (default Apache\'s 18 levels)'),
}
SCOPES = ("function", "class", "module", "package", "session")
#: the most of a server's log a failed test's report shows (its end)
REPORT_LOG_CHARS = 20_000

_LIVE = pytest.StashKey[list]()  # on the config: every server started and not yet stopped
_LOG_MARKS = pytest.StashKey[dict]()  # on a test: server -> log size when the test began
_FACTORY_SERVERS = pytest.StashKey[list]()  # on a test: servers its ferrymq_factory started


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("ferrymq", "FerryMQ server fixture")
    group.addoption("--ferrymq-scope", choices=SCOPES, help="how widely one `ferrymq` server is shared "
                    "(ini ferrymq_scope; default function: a fresh server per test)")
    parser.addini("ferrymq_scope", "how widely one `ferrymq` server is shared: " + ", ".join(SCOPES),
                  default="function")
    for name, (key, help_text) in KEY_OPTIONS.items():
        group.addoption(f"--ferrymq-{name.replace('_', '-')}", metavar="VALUE", help=f"broker {key}: {help_text}")
        parser.addini(f"ferrymq_{name}", f"broker {key}: {help_text}")
    group.addoption("--ferrymq-broker-conf", action="append", default=[], metavar="KEY=VALUE",
                    help="any other broker config key (repeatable; over ini ferrymq_broker_conf)")
    parser.addini("ferrymq_broker_conf", "broker config lines KEY=VALUE, one per line", type="linelist", default=[])
    parser.addini("ferrymq_start_timeout", "seconds a server may take to start (default 30)", default="30")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_LIVE] = []
    config.addinivalue_line("markers", "ferrymq(**conf): broker config keys for this test's `ferrymq` server, "
                            "e.g. @pytest.mark.ferrymq(flushDiskType='SYNC_FLUSH')")
    scope = _scope_option(config)
    if scope not in SCOPES:
        raise pytest.UsageError(f"ferrymq_scope = {scope!r}: choose one of {', '.join(SCOPES)}")
    for line in _conf_lines(config):
        if "=" not in line:
            raise pytest.UsageError(f"ferrymq broker conf {line!r}: write KEY=VALUE")


def _scope_option(config: pytest.Config) -> str:
    return config.getoption("ferrymq_scope") or config.getini("ferrymq_scope").strip()


def _scope(fixture_name: str, config: pytest.Config) -> str:
    return _scope_option(config)


def _conf_lines(config: pytest.Config) -> list[str]:
    return [*config.getini("ferrymq_broker_conf"), *config.getoption("ferrymq_broker_conf")]


def options_conf(config: pytest.Config) -> dict[str, str]:
    """The broker keys set by the ini file and the command line (the command line wins)."""
    conf: dict[str, str] = {}
    for line in _conf_lines(config):
        key, _, value = line.partition("=")
        conf[key.strip()] = value.strip()
    for name, (key, _) in KEY_OPTIONS.items():
        value = config.getoption(f"ferrymq_{name}") or config.getini(f"ferrymq_{name}")
        if value:
            conf[key] = value.strip()
    return conf


def marker_conf(node: pytest.Item | pytest.Collector) -> dict[str, object]:
    """The keys of every ``ferrymq`` marker on ``node`` and its parents, the closest winning."""
    conf: dict[str, object] = {}
    for mark in reversed(list(node.iter_markers("ferrymq"))):
        if mark.args:
            raise pytest.UsageError(f"@pytest.mark.ferrymq takes config keys as keywords, not {mark.args!r}")
        conf.update(mark.kwargs)
    return conf


class ServerFactory:
    """Starts servers in temp dirs with the session's settings under the caller's; stops them all at the end."""

    def __init__(self, config: pytest.Config, tmp_path_factory: pytest.TempPathFactory):
        self.config = config
        self.tmp_path_factory = tmp_path_factory
        self.servers: list[FerryMQServer] = []

    def __call__(self, *, http: bool = False, **conf: object) -> FerryMQServer:
        from .server import FerryMQServer

        server = FerryMQServer(self.tmp_path_factory.mktemp("ferrymq"), {**options_conf(self.config), **conf},
                               start_timeout=float(self.config.getini("ferrymq_start_timeout")), http=http)
        self.servers.append(server)
        server.start()
        self.config.stash[_LIVE].append(server)
        return server

    def stop_all(self) -> None:
        for server in reversed(self.servers):
            server.stop()
            if server in self.config.stash[_LIVE]:
                self.config.stash[_LIVE].remove(server)


@pytest.fixture(scope=_scope)
def ferrymq(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[FerryMQServer]:
    """A running FerryMQ server: ``namesrv_addr`` for clients, ``create_topic``/``create_group``, its ``log``."""
    factory = ServerFactory(request.config, tmp_path_factory)
    try:
        yield factory(**marker_conf(request.node))
    finally:
        factory.stop_all()


@pytest.fixture
def ferrymq_factory(request: pytest.FixtureRequest,
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[..., FerryMQServer]]:
    """``ferrymq_factory(**conf)``: another running server, with these broker keys over the session's."""
    factory = ServerFactory(request.config, tmp_path_factory)
    request.node.stash[_FACTORY_SERVERS] = factory.servers
    try:
        yield factory
    finally:
        factory.stop_all()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Refuse a test's marker that its shared server cannot honour, and note where the shared servers'
    logs stood when the test began."""
    if "ferrymq" not in getattr(item, "fixturenames", ()):
        return
    scope = _scope_option(item.config)
    if scope != "function":
        shared = _scope_node(item, scope)
        narrower = [node.nodeid for node, _ in item.iter_markers_with_node("ferrymq")
                    if shared is None or node not in shared.listchain()]
        if narrower:
            instead = "set the keys in the ini file" if scope == "session" else f"mark the {scope}"
            pytest.fail(f"@pytest.mark.ferrymq on {narrower[0]} cannot change the server shared per {scope} "
                        f"(ferrymq_scope); use ferrymq_factory(**conf) in this test, or {instead}", pytrace=False)
    item.stash[_LOG_MARKS] = {server: server.log_size() for server in item.config.stash[_LIVE]}


def _scope_node(item: pytest.Item, scope: str) -> pytest.Item | pytest.Collector | None:
    """The collector a ``scope``-wide fixture belongs to (pytest's fallback for a test outside a class or a
    package: its module, the session); None for the session, whose servers no marker sets."""
    if scope == "class":
        return item.getparent(pytest.Class) or item.getparent(pytest.Module)
    if scope == "module":
        return item.getparent(pytest.Module)
    return item.getparent(pytest.Package) if scope == "package" else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    report: pytest.TestReport = outcome.get_result()
    if not report.failed:
        return
    from .server import FerryMQServer

    servers = [value for value in (item.funcargs or {}).values() if isinstance(value, FerryMQServer)]
    servers += [s for s in item.stash.get(_FACTORY_SERVERS, []) if s not in servers]
    marks = item.stash.get(_LOG_MARKS, {})
    for server in servers:
        text = server.log_since(marks.get(server, 0))
        if len(text) > REPORT_LOG_CHARS:
            text = f"[... the first {len(text) - REPORT_LOG_CHARS} characters are in {server.log_path}]\n" \
                   + text[-REPORT_LOG_CHARS:]
        report.sections.append((f"ferrymq server log ({server.namesrv_addr}, {report.when})", text))
