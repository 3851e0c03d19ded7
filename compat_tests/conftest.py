"""Fixtures for the compatibility suite: official clients, Apache RocketMQ, and FerryMQ under test.

First use downloads and builds what it needs (Maven Central, Go module proxy) into ``~/.m2``, the Go
module cache and ``~/.cache/ferrymq-compat/build`` (``toolchain.CACHE``); later runs, of any clone, reuse it. Tests skip only when java, javac, mvn
or go is not installed at all, naming the missing tool.

Fixtures:
  apache_namesrv, apache_broker  Apache's name server and broker (session; broker registered with it)
  java_clients                   JavaClients for each client version (parametrized: 5.x and 4.9.x)
  mqadmin                        MqAdmin of that version: mqadmin(namesrv_addr, "clusterList") -> stdout
  java_scenarios                 JavaScenarios of that version: java_scenarios("send", "-n", addr, ...)
  go_harness                     GoHarness: go_harness("route", "-n", addr, "-t", topic)
  namesrv                        a name server under test, parametrized: "apache" and "ferrymq"
                                 (the Apache one is apache_bare_namesrv: no real broker registered)
  server                         name server + broker of Apache and of FerryMQ (parametrized, session)
  http_gateway                   the URL of an HTTP gateway in front of ``server``
  mqtt_gateway                   the port of an MQTT gateway in front of ``server``
  mqtt_gateway_process           that gateway as a port and a restart
  together                       runs a scenario's client cases at once (together.py)
"""

from __future__ import annotations

import functools
import shutil
import sys
from pathlib import Path

import pytest

from . import toolchain
from .apache import ApacheBroker, ApacheNamesrv, write_conf
from .harness import GoHarness, JavaScenarios, MqAdmin
from .processes import LOOPBACK, Child, free_port, port_open


#: Cold runs resolve Maven artifacts and Go modules inside the first test that needs them.
COMPAT_TIMEOUT = 900


#: the ``server`` fixture's parameters, in the order the suite runs them
SERVERS = ("apache", "ferrymq")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    for item in items:
        if _is_compat(item):
            item.add_marker(pytest.mark.compat)
            if item.get_closest_marker("timeout") is None:
                item.add_marker(pytest.mark.timeout(COMPAT_TIMEOUT))
    _group_by_server(items)


def _is_compat(item) -> bool:
    return Path(__file__).resolve().parent in Path(str(item.fspath)).resolve().parents


def _server_of(item) -> str | None:
    """This suite's ``server`` parameter of the test, or None (other suites' fixtures may share the name)."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "server" not in callspec.params or not _is_compat(item):
        return None
    return callspec.params["server"]


def _group_by_server(items: list) -> None:
    """Runs every test on Apache's ``server``, then every test on FerryMQ's, keeping pytest's order otherwise.

    pytest's own grouping interleaves the two across modules (module-scoped parameters split them), and
    each switch back restarts Apache's name server and broker (~10 s); one switch is enough.
    """
    on_server = [item for item in items if _server_of(item) is not None]
    if not on_server:
        return
    first = items.index(on_server[0])
    rest = [item for item in items if _server_of(item) is None]
    on_server.sort(key=lambda item: SERVERS.index(_server_of(item)))
    items[:] = rest[:first] + on_server + rest[first:]


def _need(*tools: str) -> None:
    missing = toolchain.missing_tools(*tools)
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed: the official clients cannot be built or run")


@functools.cache
def _java_clients(version: str) -> toolchain.JavaClients:
    return toolchain.java_clients(version)


@pytest.fixture(scope="session")
def compat_home(tmp_path_factory) -> Path:
    """Scratch space for client logs and server stores; thrown away with pytest's tmp dirs."""
    return tmp_path_factory.mktemp("compat")


@pytest.fixture(scope="session", params=toolchain.CLIENT_VERSIONS, ids=lambda v: f"java-{v}")
def java_clients(request) -> toolchain.JavaClients:
    _need("java", "javac", "mvn")
    return _java_clients(request.param)


@pytest.fixture(scope="session")
def mqadmin(java_clients, compat_home) -> MqAdmin:
    return MqAdmin(java_clients, compat_home / f"mqadmin-{java_clients.version}")


@pytest.fixture(scope="session")
def java_scenarios(java_clients, compat_home) -> JavaScenarios:
    return JavaScenarios(java_clients, compat_home / f"java-{java_clients.version}")


@pytest.fixture(scope="session")
def go_harness() -> GoHarness:
    _need("go")
    return GoHarness(toolchain.go_harness())


@pytest.fixture(scope="session")
def apache_namesrv(compat_home):
    _need("java", "mvn")
    ns = ApacheNamesrv.start(compat_home / "apache-namesrv")
    yield ns
    ns.stop()


@pytest.fixture(scope="session")
def apache_broker(apache_namesrv, compat_home):
    broker = ApacheBroker.start(compat_home / "apache-broker", apache_namesrv.addr)
    yield broker
    broker.stop()


class FerryNamesrv:
    """``ferrymq namesrv`` from the project's venv on a free port, its files in ``home`` (kvConfigPath's
    default, as Apache's, is under the user's home directory)."""

    def __init__(self, home: Path, extra: dict[str, object] | None = None):
        """``extra``: more keys of its config file."""
        home.mkdir(parents=True, exist_ok=True)
        self.port = free_port()
        conf = write_conf(home / "namesrv.conf", {"listenPort": self.port,
                                                  "kvConfigPath": home / "namesrv" / "kvConfig.json", **(extra or {})})
        self.child = Child("ferrymq namesrv", [str(_ferrymq_cli()), "namesrv", "-c", str(conf)], home / "namesrv.out")
        self.child.start()
        try:
            self.child.wait_until(lambda: port_open(LOOPBACK, self.port), f"listening on {self.port}", 30)
        except BaseException:
            self.child.kill()
            raise

    @property
    def addr(self) -> str:
        return f"{LOOPBACK}:{self.port}"

    def stop(self) -> None:
        self.child.kill()


def _ferrymq_cli() -> Path:
    venv_cli = Path(sys.executable).with_name("ferrymq")
    if venv_cli.exists():
        return venv_cli
    found = shutil.which("ferrymq")
    if found is None:
        raise RuntimeError("the ferrymq command is not installed; run `make test` (it installs the project into .venv)")
    return Path(found)


@pytest.fixture(scope="session")
def ferrymq_namesrv(compat_home):
    ns = FerryNamesrv(compat_home / "ferrymq-namesrv")
    yield ns
    ns.stop()


@pytest.fixture(scope="session")
def apache_bare_namesrv(compat_home):
    """An Apache name server no real broker registers with, so a test sees only what it registered.

    (A real 5.5.0 broker in the cluster would also break 4.9.x ``mqadmin clusterList``: that broker's
    runtime info lacks the ``getTransferedTps`` key 4.9.x reads, and the tool throws.)
    """
    _need("java", "mvn")
    ns = ApacheNamesrv.start(compat_home / "apache-bare-namesrv")
    yield ns
    ns.stop()


@pytest.fixture(params=["apache", "ferrymq"])
def namesrv(request):
    """A name server under test, holding no brokers but the test's; runs against Apache's and FerryMQ's."""
    if request.param == "apache":
        return request.getfixturevalue("apache_bare_namesrv")
    return request.getfixturevalue("ferrymq_namesrv")


@pytest.fixture(scope="session", params=SERVERS)
def server(request, compat_home):
    """Name server + broker with :data:`servers.FEATURE_CONFIG` (property filters, short delay levels and
    transaction checks): Apache RocketMQ 5.5.0's, then ``ferrymq standalone``. One of each per session."""
    from .servers import Server, start_apache

    if request.param == "apache":
        _need("java", "mvn")
        ns, broker = start_apache(compat_home / "apache-feature")
        yield Server("apache", ns.addr, broker.addr, broker.name, broker.cluster)
        broker.stop()
        ns.stop()
        return
    from ferrymq.testing import FerryMQServer

    from .http_gateway import GATEWAY_CONFIG
    from .servers import FEATURE_CONFIG

    # the server users' test suites get (the pytest plugin's), with the scenarios' settings
    with FerryMQServer(compat_home / "ferrymq-feature", {"brokerClusterName": "FeatureCluster",
                                                         "brokerName": "feature-broker-a", **FEATURE_CONFIG,
                                                         **GATEWAY_CONFIG}, http=True, mqtt=True) as ferry:
        yield Server("ferrymq", ferry.namesrv_addr, ferry.broker_addr, ferry.broker_name, ferry.cluster,
                     http_url=ferry.http_url, mqtt_port=ferry.mqtt_port, process=ferry)


@pytest.fixture(scope="session")
def http_gateway(server, compat_home) -> str:
    """The base URL of an HTTP gateway in front of ``server``: FerryMQ's own (its ``httpListenPort``), or
    ``ferrymq gateway http`` in front of Apache (one per Apache server), ready to publish."""
    from .http_gateway import GatewayProcess, wait_until_publishing

    if server.http_url is not None:
        wait_until_publishing(server.http_url)
        yield server.http_url
        return
    gateway = GatewayProcess.start(_ferrymq_cli(), compat_home / "apache-http-gateway", server.namesrv_addr)
    yield gateway.url
    gateway.stop()


@pytest.fixture(scope="session")
def mqtt_gateway_process(server, compat_home):
    """The MQTT gateway in front of ``server`` as a ``port`` and a ``restart(kill=False)``: FerryMQ's own
    (its ``mqttListenPort``; a restart restarts the server), or ``ferrymq gateway mqtt`` in front of Apache
    (one per Apache server; a restart restarts the gateway alone), ready to publish."""
    from .mqtt_gateway import GatewayProcess, InBroker, wait_until_publishing

    if server.mqtt_port is not None:
        wait_until_publishing(server.mqtt_port)
        yield InBroker(server.process, server.mqtt_port)
        return
    gateway = GatewayProcess.start(_ferrymq_cli(), compat_home / "apache-mqtt-gateway", server.namesrv_addr)
    yield gateway
    gateway.stop()


@pytest.fixture(scope="session")
def mqtt_gateway(mqtt_gateway_process) -> int:
    """The loopback port of :func:`mqtt_gateway_process`."""
    return mqtt_gateway_process.port


@pytest.fixture(scope="session", params=[toolchain.ROCKETMQ_5], ids=lambda v: f"java-{v}")
def java5(request, compat_home) -> JavaScenarios:
    """The Java scenario program on the 5.x client only (for scenarios run once per broker, not per client)."""
    _need("java", "javac", "mvn")
    return JavaScenarios(_java_clients(request.param), compat_home / f"java-{request.param}")


@pytest.fixture(scope="session")
def java(java5):
    """The Java 5.x scenario program as a :class:`clients.Client` (the gateway scenarios' Java side)."""
    from .clients import Client

    return Client(f"java-{java5.version}", java5)


@pytest.fixture(scope="session")
def go(go_harness):
    """The Go harness as a :class:`clients.Client`."""
    from .clients import Client

    return Client("go", go_harness)


@pytest.fixture(scope="session")
def mqadmin5(compat_home) -> MqAdmin:
    """mqadmin of rocketmq-tools 5.x (4.9.x's clusterList cannot read a 5.x broker's runtime info)."""
    return mqadmin_of(toolchain.ROCKETMQ_5, compat_home)


def mqadmin_of(version: str, compat_home: Path) -> MqAdmin:
    """mqadmin of one rocketmq-tools version, for fixtures that choose the versions themselves."""
    _need("java", "javac", "mvn")
    return MqAdmin(_java_clients(version), compat_home / f"mqadmin-{version}")


@pytest.fixture(scope="session", params=[f"java-{v}" for v in toolchain.CLIENT_VERSIONS] + ["go"])
def client(request, compat_home):
    """Each official client in turn: the Java client 5.x and 4.9.x, then the Go client."""
    return _client(request.param, compat_home)


@pytest.fixture(scope="session", params=[f"java-{toolchain.ROCKETMQ_5}", "go"])
def client5(request, compat_home):
    """The Java 5.x client and the Go client (scenarios the 4.9.x client adds nothing to, or cannot do)."""
    return _client(request.param, compat_home)


def _client(name: str, compat_home: Path):
    from .clients import Client

    if name == "go":
        _need("go")
        return Client("go", GoHarness(toolchain.go_harness()))
    _need("java", "javac", "mvn")
    return Client(name, JavaScenarios(_java_clients(name.removeprefix("java-")), compat_home / name))


@pytest.fixture(scope="session")
def together(compat_home):
    """The session's :class:`together.Together`: a client-parametrized case runs its siblings' clients with its own."""
    from .together import Together

    return Together(functools.partial(_client, compat_home=compat_home))


#: fixtures that stand for an official client or tool, as the compatibility table names them
_TOOL_FIXTURES = {"mqadmin": "mqadmin", "mqadmin5": "mqadmin", "mqadmin_cli": "mqadmin", "cpp": "cpp",
                  "java5": "java", "java_scenarios": "java", "go_harness": "go"}


@pytest.fixture(autouse=True)
def _record_tools(request, record_property):
    """Names the clients/tools a test drives, and the mqadmin versions, in its junit-xml properties (read
    by report.py)."""
    tools = {tool for name, tool in _TOOL_FIXTURES.items() if name in request.fixturenames}
    params = request.node.callspec.params if hasattr(request.node, "callspec") else {}
    for name in ("client", "client5"):
        if name in request.fixturenames:
            tools.add("go" if params.get(name) == "go" else "java")
    record_property("tools", ",".join(sorted(tools)))
    versions = {params.get(name) for name in ("mqadmin_cli", "java_clients") if name in request.fixturenames}
    if "mqadmin5" in request.fixturenames:
        versions.add(toolchain.ROCKETMQ_5)
    if "mqadmin" in tools:
        record_property("mqadmin", ",".join(sorted(v for v in versions if v)))
    doc = (request.function.__doc__ or "").strip().split("\n\n")[0]
    record_property("doc", " ".join(doc.split()))
