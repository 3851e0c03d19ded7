"""``ferrymq namesrv | broker | standalone``: start FerryMQ components from Apache-style config files."""

from __future__ import annotations

import argparse
import errno
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from logging.handlers import RotatingFileHandler

from twisted.internet.error import CannotListenError

from ferrymq.server import config as cfg
from ferrymq.server.grpc.policies import KEY_CLASSES as GRPC_KEYS
from ferrymq.server.grpc.policies import ConsumerPolicy, ProducerPolicy, RenewalPolicy
from ferrymq.server.store.config import MessageStoreConfig
from ferrymq.server.stall_watch import DEFAULT_THRESHOLD as STALL_THRESHOLD

log = logging.getLogger("ferrymq")

EXIT_NOT_BUILT = 3
EXIT_CONFIG = 2

#: ``--log-dir``'s file per command: Apache's names; standalone's broker.log holds its name server's lines too
LOG_FILES = {"namesrv": "namesrv.log", "broker": "broker.log", "standalone": "broker.log", "gateway": "gateway.log"}
#: Apache's logback rolls broker.log at 128 MB and keeps 10 rolled files
DEFAULT_LOG_MAX_SIZE = 128 << 20
DEFAULT_LOG_BACKUPS = 10

_FILE_HELP = (
    "Config files use Apache RocketMQ's format and key names: one 'key=value' per line, '#' starts a comment."
)


class NotBuiltError(RuntimeError):
    """A component this command would start does not exist yet."""


class CannotStart(RuntimeError):
    """A listener could not be opened; the message says which config key moves it."""


@contextmanager
def _listening(port_key: str, bind: str) -> Iterator[None]:
    """Turn a failed bind into one line naming the key that changes it (``port_key``, or bindAddress)."""
    try:
        yield
    except CannotListenError as exc:
        code = getattr(exc.socketError, "errno", None)
        if code == errno.EADDRINUSE:
            raise CannotStart(f"{port_key} {exc.port} is in use (by another process?): set {port_key} in the "
                              "config file, or stop the other process") from None
        if code == errno.EACCES:
            raise CannotStart(f"{port_key} {exc.port} needs privileges to listen on (ports below 1024): set "
                              f"{port_key} in the config file to a port of 1024 or above") from None
        if code == errno.EADDRNOTAVAIL:
            raise CannotStart(f"bindAddress {bind} is not an address of this host: set bindAddress in the "
                              "config file (0.0.0.0 = every address)") from None
        raise CannotStart(f"cannot listen on {bind}:{exc.port} ({port_key}): {exc.socketError}") from None


def _gateway_client(props: dict[str, str]) -> dict[str, object]:
    """The gateways' RocketMQ client settings: TLS to the cluster when the server's own connections use it,
    and the broker's own credentials (``innerClientAuthenticationCredentials``) to sign with."""
    settings: dict[str, object] = {"use_tls": True} if cfg.tls_config(props).use_tls else {}
    credentials = cfg.from_properties(cfg.AuthConfig, props).inner_credentials
    if credentials is not None:
        settings["credentials"] = credentials
    return settings


def _http_gateway(broker_cfg: cfg.BrokerConfig, props: dict[str, str]):
    """The HTTP gateway served by this broker process, listening already; None when httpListenPort=0."""
    gateway_cfg = cfg.from_properties(cfg.GatewayConfig, props)
    if gateway_cfg.httpListenPort == 0:
        return None
    from ferrymq.gateways.http.gateway import Gateway
    from ferrymq.gateways.http.server import GatewayOnReactor, GatewayThread
    from ferrymq.server.event_loop import on_asyncio_reactor
    from twisted.internet import reactor

    bind = props.get("bindAddress", cfg.NettyServerConfig.bindAddress).strip()
    gateway = Gateway(broker_cfg.namesrvAddr, max_message_size=broker_cfg.maxMessageSize,
                      client_config=_gateway_client(props),
                      local_offset_dir=os.path.join(broker_cfg.storePathRootDir, "http-offsets"),
                      transaction_file=os.path.join(broker_cfg.storePathRootDir, "http-transactions.json"),
                      **gateway_cfg.transaction_options(), **gateway_cfg.console_options())
    on_reactor = gateway_cfg.httpEventLoop == "BROKER" and on_asyncio_reactor()
    ssl = cfg.tls_config(props).http_ssl() if gateway_cfg.httpTlsEnable else None
    server = (GatewayOnReactor if on_reactor else GatewayThread)(gateway, bind, gateway_cfg.httpListenPort, ssl)
    try:
        server.start()
    except OSError as exc:
        raise CannotStart(str(exc)) from None
    reactor.callWhenRunning(server.start_client)
    return server


def _install_reactor(props: dict[str, str]) -> None:
    """The asyncio reactor on uvloop when the HTTP gateway or gRPC is to be served on the broker's loop; else
    Twisted's default (epoll) reactor. Call before anything imports the reactor."""
    gateway_cfg = cfg.from_properties(cfg.GatewayConfig, props)
    wanting = [f"{name}=BROKER" for name, port, loop in (
        ("httpEventLoop", gateway_cfg.httpListenPort, gateway_cfg.httpEventLoop),
        ("grpcEventLoop", gateway_cfg.grpcListenPort, gateway_cfg.grpcEventLoop)) if port and loop == "BROKER"]
    if not wanting:
        return
    from ferrymq.server.event_loop import install_reactor

    if not install_reactor():
        log.warning("%s: the asyncio reactor on uvloop cannot be installed here; served on a loop of its own "
                    "instead", ", ".join(wanting))


def _mqtt_gateway(broker_cfg: cfg.BrokerConfig, props: dict[str, str], state_dir_name: str = "mqtt"):
    """The MQTT gateway served by this broker process, listening already; None when mqttListenPort=0.
    Its sessions and retained messages persist in ``<storePathRootDir>/<state_dir_name>``."""
    gateway_cfg = cfg.from_properties(cfg.GatewayConfig, props)
    if gateway_cfg.mqttListenPort == 0:
        return None
    from ferrymq.gateways.mqtt.gateway import Gateway
    from ferrymq.gateways.mqtt.listener import MQTTListener
    from twisted.internet import reactor

    bind = props.get("bindAddress", cfg.NettyServerConfig.bindAddress).strip()
    gateway = Gateway(broker_cfg.namesrvAddr, max_message_size=broker_cfg.maxMessageSize,
                      client_config=_gateway_client(props),
                      state_dir=os.path.join(broker_cfg.storePathRootDir, state_dir_name),
                      sync_state=broker_cfg.flushDiskType == "SYNC_FLUSH")
    listener = MQTTListener(gateway, bind, gateway_cfg.mqttListenPort)
    with _listening("mqttListenPort", bind):
        listener.listen()
    if gateway_cfg.mqttTlsListenPort:
        tls = cfg.tls_config(props).mqtt_tls()
        with _listening("mqttTlsListenPort", bind):
            listener.listen_tls(gateway_cfg.mqttTlsListenPort, tls)
    reactor.callWhenRunning(listener.start_client)
    return listener


def _grpc_server(broker_cfg: cfg.BrokerConfig, props: dict[str, str]):
    """The gRPC MessagingService (docs/grpc.md), listening already, its broker to be attached
    (:func:`_with_grpc`); None when grpcListenPort=0, or when the grpc extra is not installed and the
    key was left at its default. Started before the other servers: importing grpcio takes a while, which
    would hold up the broker's first registration with its name servers, and the in-process name server's
    answers."""
    gateway_cfg = cfg.from_properties(cfg.GatewayConfig, props)
    if gateway_cfg.grpcListenPort == 0:
        return None
    try:
        from ferrymq.server.grpc.messages import Limits
        from ferrymq.server.event_loop import on_asyncio_reactor
        from ferrymq.server.grpc.server import GrpcOnReactor, GrpcThread
        from ferrymq.server.grpc.service import MessagingService
        from ferrymq.server.grpc.tls import port_tls
    except ImportError as exc:
        if "grpcListenPort" in props:
            raise CannotStart(f"grpcListenPort={gateway_cfg.grpcListenPort}: {exc}") from None
        log.info("gRPC not served (grpcListenPort=0 silences this): %s", exc)
        return None
    bind = props.get("bindAddress", cfg.NettyServerConfig.bindAddress).strip()
    access = None
    if cfg.from_properties(cfg.AuthConfig, props).enabled:  # an open broker's calls pass no check
        from ferrymq.server.grpc.access import AccessChecks

        access = AccessChecks()
    try:
        tls = port_tls(cfg.tls_config(props).server_tls())
    except (OSError, ValueError) as exc:
        raise CannotStart(f"TLS on grpcListenPort: {exc}") from None
    service = MessagingService(limits=Limits(maxMessageSize=broker_cfg.maxMessageSize),
                               producer=cfg.from_properties(ProducerPolicy, props),
                               consumer=cfg.from_properties(ConsumerPolicy, props),
                               renewal=cfg.from_properties(RenewalPolicy, props))
    on_reactor = gateway_cfg.grpcEventLoop == "BROKER" and on_asyncio_reactor()
    server = (GrpcOnReactor if on_reactor else GrpcThread)(service, bind, gateway_cfg.grpcListenPort,
                                                           access, tls)
    try:
        server.start()
    except OSError as exc:
        raise CannotStart(str(exc)) from None
    return server


def _with_grpc(grpc, broker):
    """``broker``, whose gRPC service (if any) now answers from it, checking its calls against the broker's
    users and ACLs when the broker checks them."""
    if grpc is not None:
        from ferrymq.server.broker.processors.send import SendProcessor
        from ferrymq.server.grpc.service import BrokerSide

        if grpc.access is not None:  # first: no call reaches the broker unchecked
            grpc.access.control = broker.access
        ctx = broker.ctx
        from ferrymq.server.broker.service import LiveTable

        grpc.service.broker = BrokerSide(broker.config.brokerName, ctx.topics, ctx.producers, LiveTable(broker),
                                         ctx.groups, ctx.pop, lambda: broker.registration.peers, ctx.consumers,
                                         SendProcessor(ctx))
    return broker


def _with_gateways(gateways, broker, watch):
    """``broker``, whose own gateways (those it serves) now send to it in process and check their clients
    against its users and ACLs when it does, storing what they publish to it through its send checks; its
    HTTP gateway also serves the broker's metrics (with the reactor's stall ``watch``) on /metrics, and its
    MQTT gateway reads what it delivers from the broker's store."""
    from ferrymq.gateways.http.gateway import Gateway as HttpGateway
    from ferrymq.server.broker.metrics import BrokerMetrics
    from ferrymq.server.broker.processors.send import SendProcessor
    from ferrymq.server.broker.service import LiveTable

    access = None
    if broker.access.config.enabled:
        from ferrymq.server.auth.gateway_access import GatewayAccess

        access = GatewayAccess(broker.access)
    for gateway in filter(None, gateways):
        if isinstance(gateway.gateway, HttpGateway):
            gateway.gateway.broker_metrics = BrokerMetrics(broker.ctx, broker.server, watch)
        else:  # the MQTT gateway
            topics = broker.ctx.topics
            gateway.gateway.deliver_in_process(
                broker.ctx.store, broker.config.brokerName,
                lambda topic: range(config.read_queue_nums) if (config := topics.get(topic)) else ())
        gateway.gateway.store_in_process(SendProcessor(broker.ctx))
        gateway.gateway.send_in_process(broker.addr, LiveTable(broker), f"{broker.ip}:0")
        gateway.gateway.access = access
    return broker


def _broker_factory(broker_cfg: cfg.BrokerConfig, props: dict[str, str]):
    """Start the broker and return it (an object with ``stop() -> Deferred``).

    ``props`` is the whole config file: the broker reads its network keys (bindAddress, idle time, frame
    size) and the store-only keys (flush intervals, index sizes...) from it too.
    """
    from ferrymq.server.broker.service import start_broker
    from ferrymq.server.store.mapped_file import SegmentSizeError
    from ferrymq.server.store.message_store import StoreLockedError

    try:
        with _listening("listenPort", props.get("bindAddress", cfg.NettyServerConfig.bindAddress).strip()):
            return start_broker(broker_cfg, props)
    except (StoreLockedError, SegmentSizeError) as exc:
        raise cfg.ConfigError(str(exc)) from None


# ---------------------------------------------------------------- argument parsing


def _add_common(p: argparse.ArgumentParser, command: str) -> None:
    p.add_argument("-c", "--config", metavar="FILE", help="config file (Apache key=value format)")
    p.add_argument(
        "-p", "--print-config", action="store_true", help="print the effective configuration and exit"
    )
    p.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log verbosity (default INFO)"
    )
    p.add_argument(
        "--log-dir", metavar="DIR",
        help=f"write the log to DIR/{LOG_FILES[command]} (created if missing), rolled over at "
        "--log-max-size, instead of to stderr",
    )
    p.add_argument(
        "--log-max-size", metavar="SIZE", type=_size, default=DEFAULT_LOG_MAX_SIZE,
        help="with --log-dir: the log is rolled over when it would grow beyond SIZE bytes (suffix K, M or G; "
        f"default {DEFAULT_LOG_MAX_SIZE // (1 << 20)}M, as Apache rolls broker.log)",
    )
    p.add_argument(
        "--log-backups", metavar="N", type=_backups, default=DEFAULT_LOG_BACKUPS,
        help=f"with --log-dir: rolled-over files kept, FILE.1 the newest (default {DEFAULT_LOG_BACKUPS})",
    )
    p.add_argument(
        "--stall-threshold", metavar="MS", type=_milliseconds, default=STALL_THRESHOLD * 1000,
        help=f"log event-loop stalls longer than MS milliseconds (default {STALL_THRESHOLD * 1000:.0f}); a few ms "
        "shows what makes a latency tail: a wait for a CPU (INFO) or the process's own work (WARNING)",
    )
    p.add_argument(
        "--stall-traceback", metavar="FILE",
        help="when the event loop stalls for more than --stall-threshold (logged as a warning "
        "unless the machine kept it waiting for a CPU), "
        "also write every thread's stack to FILE while it is stuck (for diagnosis: CPython's faulthandler reads "
        "other threads' frames without the GIL and can crash a busy multi-threaded process)",
    )


def _milliseconds(text: str) -> float:
    """A positive number of milliseconds."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of milliseconds: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be more than 0 ms: {text!r}")
    return value


def _size(text: str) -> int:
    """``1048576``, ``512K``, ``128M``, ``1G`` as bytes."""
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    text = text.strip().upper().removesuffix("B")
    try:
        value = int(text[:-1]) * units[text[-1]] if text[-1:] in units else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (bytes, or a number with K, M or G)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("a log size must be above 0")
    return value


def _backups(text: str) -> int:
    """At least 1: with none kept the file would never be rolled over, only grow."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("at least 1 rolled-over file is kept")
    return value


def _store_only_keys() -> set[str]:
    """Store keys the broker does not document itself (storeHost is set by the broker, not configured)."""
    return cfg.known_keys(MessageStoreConfig) - cfg.known_keys(cfg.BrokerConfig) - {"storeHost"}


_PLANNED_HELP = f"Apache keys of features not implemented yet (refused unless false):\n{cfg.describe(cfg.PlannedFeatures)}"


_GRPC_HELP = "gRPC keys (Apache's proxy keys; docs/grpc.md):\n" + "\n".join(cfg.describe(c) for c in GRPC_KEYS)


_TLS_HELP = f"TLS keys (Apache's tls.* system properties; docs/tls.md):\n{cfg.describe(cfg.TlsConfig)}"


def _describe_store() -> str:
    return cfg.describe(MessageStoreConfig, skip=cfg.known_keys(MessageStoreConfig) - _store_only_keys())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ferrymq",
        description="FerryMQ: a drop-in replacement for Apache RocketMQ's name server and broker.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    fmt = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser(
        "namesrv",
        help="run a name server (default port 9876)",
        formatter_class=fmt,
        description="Run a name server: broker registration and expiry, topic routes, cluster info, KV config.",
        epilog=f"{_FILE_HELP}\n\nName server keys:\n{cfg.describe(cfg.NamesrvConfig)}\n\n"
        f"Network keys:\n{cfg.describe(cfg.NettyServerConfig, listenPort=cfg.NAMESRV_PORT)}\n\n{_TLS_HELP}",
    )
    _add_common(p, "namesrv")

    p = sub.add_parser(
        "broker",
        help="run a broker (default port 10911, VIP channel 10909)",
        formatter_class=fmt,
        description="Run a broker: message store, send/pull/consumer/admin request processing, registration "
        "with the name servers of namesrvAddr.",
        epilog=f"{_FILE_HELP}\n\nBroker keys:\n{cfg.describe(cfg.BrokerConfig)}\n\n"
        f"Store keys:\n{_describe_store()}\n\n"
        f"Network keys:\n{cfg.describe(cfg.NettyServerConfig, skip=['listenPort'])}\n\n"
        f"Gateway keys:\n{cfg.describe(cfg.GatewayConfig)}\n\n{_GRPC_HELP}\n\n"
        f"Access control keys (docs/acl.md):\n{cfg.describe(cfg.AuthConfig)}\n\n{_TLS_HELP}\n\n{_PLANNED_HELP}",
    )
    _add_common(p, "broker")
    p.add_argument("-n", "--namesrv-addr", metavar="ADDR", help="name server list 'host:port;host:port' (namesrvAddr)")

    p = sub.add_parser(
        "standalone",
        help="run the name server and the broker in one process",
        formatter_class=fmt,
        description=(
            "Run everything in one process: the name server and a broker registered with it. "
            "storePathRootDir defaults to ./data."
        ),
        epilog=f"{_FILE_HELP} One file configures both; listenPort is the broker's, "
        f"namesrvListenPort (default {cfg.NAMESRV_PORT}) the name server's.\n\n"
        f"Name server keys:\n{cfg.describe(cfg.NamesrvConfig)}\n\n"
        f"Broker keys:\n{cfg.describe(cfg.BrokerConfig, storePathRootDir='./data')}\n\n"
        f"Store keys:\n{_describe_store()}\n\n"
        f"Network keys (both servers):\n{cfg.describe(cfg.NettyServerConfig, skip=['listenPort'])}\n\n"
        f"Gateway keys:\n{cfg.describe(cfg.GatewayConfig)}\n\n{_GRPC_HELP}\n\n"
        f"Access control keys (docs/acl.md):\n{cfg.describe(cfg.AuthConfig)}\n\n"
        f"Standalone keys:\n{cfg.describe(cfg.StandaloneConfig)}\n\n{_TLS_HELP}\n\n{_PLANNED_HELP}",
    )
    _add_common(p, "standalone")

    p = sub.add_parser(
        "gateway",
        help="run a gateway in front of any RocketMQ cluster: ferrymq gateway http|mqtt -n 127.0.0.1:9876",
        formatter_class=fmt,
        description="Serve HTTP clients (docs/http.md) or MQTT devices (docs/mqtt.md) in front of the cluster "
        "of the given name servers, Apache RocketMQ's included, as a RocketMQ client of it.",
        epilog=f"{_FILE_HELP} Keys read: namesrvAddr, bindAddress, httpListenPort, mqttListenPort, maxMessageSize, "
               "storePathRootDir and flushDiskType (where and how MQTT sessions persist: "
               "<storePathRootDir>/mqtt-gateway-<mqttListenPort>); httpTlsEnable, mqttTlsListenPort and the tls.* "
               "keys (docs/tls.md: tls.enable=true for a cluster in enforcing mode).",
    )
    _add_common(p, "gateway")
    p.add_argument("protocol", choices=["http", "mqtt"], help="the gateway to run")
    p.add_argument("-n", "--namesrv-addr", metavar="ADDR", help="name server list 'host:port;host:port' (namesrvAddr)")

    sub.add_parser(
        "admin",
        help="mqadmin's commands without a JVM: ferrymq admin clusterList -n 127.0.0.1:9876",
        add_help=False,
    )
    return parser


# ---------------------------------------------------------------- running


def _log_handler(args: argparse.Namespace) -> logging.Handler:
    """stderr, or with ``--log-dir`` the command's file there, rolled over by size (FILE.1 the newest)."""
    if args.log_dir is None:
        return logging.StreamHandler(sys.stderr)
    os.makedirs(args.log_dir, exist_ok=True)
    return RotatingFileHandler(os.path.join(args.log_dir, LOG_FILES[args.command]), maxBytes=args.log_max_size,
                               backupCount=args.log_backups, encoding="utf-8")


def _setup_logging(args: argparse.Namespace) -> None:
    handler = _log_handler(args)
    handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=getattr(logging, args.log_level), handlers=[handler])
    from twisted.logger import STDLibLogObserver, globalLogBeginner

    globalLogBeginner.beginLoggingTo([STDLibLogObserver(name="twisted")], redirectStandardIO=False)


def _read_props(path: str | None) -> dict[str, str]:
    """The file's keys, Apache 4.x spellings (mapedFileSize...) renamed to the current ones with a note."""
    props = cfg.load_properties(path) if path else {}
    for old, new in cfg.ALIASES.items():
        if old in props:
            log.info("config key %s is Apache 4.x's spelling of %s; read as %s", old, new, new)
    return cfg.current_names(props)


@contextmanager
def _values_of(path: str | None) -> Iterator[None]:
    """A bad value's error names the file it came from."""
    try:
        yield
    except cfg.ConfigError as exc:
        raise cfg.ConfigError(f"{path}: {exc}" if path else str(exc)) from None


def _warn_unknown(props: dict[str, str], *classes: type) -> None:
    known = cfg.known_keys(*classes)
    for name in cfg.unknown_keys(props, *classes):
        nearest = cfg.nearest_key(name, known)
        hint = f"; did you mean {nearest}?" if nearest else " (check its spelling)"
        log.warning("config key %r is not known to FerryMQ and is ignored%s", name, hint)


def _stall_watch(args: argparse.Namespace):
    """The reactor's :class:`~ferrymq.server.stall_watch.StallWatch`; :func:`_run_reactor` starts it."""
    from twisted.internet import reactor

    from ferrymq.server.stall_watch import StallWatch

    traceback_file = open(args.stall_traceback, "a") if args.stall_traceback else None  # noqa: SIM115 - lives as long as the process
    return StallWatch(reactor, threshold=args.stall_threshold / 1000, traceback_file=traceback_file)


def _run_reactor(stoppables: list, args: argparse.Namespace, watch=None) -> int:
    """Run until SIGTERM/SIGINT; shutdown triggers stop every component gracefully first."""
    from twisted.internet import reactor

    from ferrymq.server.gc_tuning import tune_gc
    from ferrymq.wire import native

    native.report()
    tune_gc()
    for component in stoppables:
        reactor.addSystemEventTrigger("before", "shutdown", component.stop)
    if watch is None:
        watch = _stall_watch(args)
    reactor.callWhenRunning(watch.start)
    reactor.addSystemEventTrigger("before", "shutdown", watch.stop)
    reactor.run()
    log.info("stopped")
    return 0


def _start_namesrv(namesrv_cfg: cfg.NamesrvConfig, netty_cfg: cfg.NettyServerConfig, tls_cfg: cfg.TlsConfig,
                   port_key: str = "listenPort"):
    from ferrymq.server.namesrv.service import NameServer

    server = NameServer(namesrv_cfg, netty_cfg, tls=tls_cfg.server_tls())
    with _listening(port_key, netty_cfg.bindAddress):
        server.start()
    return server


def cmd_namesrv(args: argparse.Namespace) -> int:
    props = _read_props(args.config)
    with _values_of(args.config):
        namesrv_cfg, netty_cfg = cfg.namesrv_config(props, args.config)
        tls_cfg = cfg.tls_config(props)
    if args.print_config:
        print(cfg.to_properties(namesrv_cfg))
        print(cfg.to_properties(netty_cfg))
        print(cfg.to_properties(tls_cfg))
        return 0
    _warn_unknown(props, cfg.NamesrvConfig, cfg.NettyServerConfig, cfg.TlsConfig)
    server = _start_namesrv(namesrv_cfg, netty_cfg, tls_cfg)
    return _run_reactor([server], args)


def _broker_configs(props: dict[str, str], path: str | None, **defaults) -> tuple[cfg.BrokerConfig, str]:
    """The broker's config, and its store-only and network keys as ``key=value`` lines: every value of
    the file is checked here, before anything starts."""
    with _values_of(path):
        broker_cfg = cfg.from_properties(cfg.BrokerConfig, props, **defaults)
        store_cfg = cfg.from_properties(MessageStoreConfig, props)
        netty_cfg = cfg.from_properties(cfg.NettyServerConfig, props)
        gateway_cfg = cfg.from_properties(cfg.GatewayConfig, props)
        auth_cfg = cfg.from_properties(cfg.AuthConfig, props)
        cfg.from_properties(cfg.PlannedFeatures, props)
        grpc_lines = "\n".join(cfg.to_properties(cfg.from_properties(keys, props)) for keys in GRPC_KEYS)
        tls_cfg = cfg.tls_config(props)
    store_lines = cfg.to_properties(store_cfg, skip=cfg.known_keys(MessageStoreConfig) - _store_only_keys())
    return broker_cfg, (f"{store_lines}\n{cfg.to_properties(netty_cfg, skip=['listenPort'])}\n"
                        f"{cfg.to_properties(gateway_cfg)}\n{grpc_lines}\n{cfg.to_properties(auth_cfg)}\n"
                        f"{cfg.to_properties(tls_cfg)}")


def cmd_broker(args: argparse.Namespace) -> int:
    props = _read_props(args.config)
    if args.namesrv_addr:
        cfg.from_properties(cfg.BrokerConfig, {"namesrvAddr": args.namesrv_addr})  # its error names no file
        props["namesrvAddr"] = args.namesrv_addr
    broker_cfg, store_lines = _broker_configs(props, args.config)
    if args.print_config:
        print(cfg.to_properties(broker_cfg))
        print(store_lines)
        return 0
    _warn_unknown(props, cfg.NettyServerConfig, cfg.BrokerConfig, MessageStoreConfig, cfg.GatewayConfig,
                  *GRPC_KEYS, cfg.AuthConfig, cfg.PlannedFeatures, cfg.TlsConfig)
    _install_reactor(props)
    http = _http_gateway(broker_cfg, props)
    gateways = [http, _mqtt_gateway(broker_cfg, props)]
    watch = _stall_watch(args)
    grpc = _grpc_server(broker_cfg, props)
    broker = _with_grpc(grpc, _with_gateways(gateways, _broker_factory(broker_cfg, props), watch))
    # the gateways stop first, so their clients can still unregister from the broker
    return _run_reactor([_StopInOrder(*filter(None, [grpc, *gateways, broker]))], args, watch)


def cmd_standalone(args: argparse.Namespace) -> int:
    props = _read_props(args.config)
    with _values_of(args.config):
        standalone = cfg.from_properties(cfg.StandaloneConfig, props)
        namesrv_props = dict(props, listenPort=str(standalone.namesrvListenPort))
        namesrv_cfg, netty_cfg = cfg.namesrv_config(namesrv_props, args.config)
        tls_cfg = cfg.tls_config(props)
    broker_cfg, store_lines = _broker_configs(props, args.config, storePathRootDir="./data")
    if not broker_cfg.namesrvAddr:
        broker_cfg.namesrvAddr = f"127.0.0.1:{netty_cfg.listenPort}"
    if args.print_config:
        print(cfg.to_properties(namesrv_cfg))
        print(cfg.to_properties(broker_cfg))
        print(store_lines)  # with the network keys, which both servers share
        print(cfg.to_properties(standalone))
        return 0
    _warn_unknown(props, cfg.NamesrvConfig, cfg.NettyServerConfig, cfg.BrokerConfig, MessageStoreConfig,
                  cfg.GatewayConfig, *GRPC_KEYS, cfg.StandaloneConfig, cfg.AuthConfig, cfg.PlannedFeatures,
                  cfg.TlsConfig)
    _install_reactor(props)
    grpc = _grpc_server(broker_cfg, props)  # first: its import would keep the name server from answering
    namesrv = _start_namesrv(namesrv_cfg, netty_cfg, tls_cfg, "namesrvListenPort")
    if "namesrvAddr" not in props:  # the in-process name server, on the port it actually bound
        broker_cfg.namesrvAddr = f"127.0.0.1:{namesrv.port}"
    http = _http_gateway(broker_cfg, props)
    gateways = [http, _mqtt_gateway(broker_cfg, props)]
    watch = _stall_watch(args)
    broker = _with_grpc(grpc, _with_gateways(gateways, _broker_factory(broker_cfg, props), watch))
    # the gateways stop first, then the broker, which can still unregister from the name server
    return _run_reactor([_StopInOrder(*filter(None, [grpc, *gateways, broker, namesrv]))], args, watch)


def cmd_gateway(args: argparse.Namespace) -> int:
    props = _read_props(args.config)
    if args.namesrv_addr:
        props["namesrvAddr"] = args.namesrv_addr
    with _values_of(args.config):
        gateway_cfg = cfg.from_properties(cfg.GatewayConfig, props)
        broker_cfg = cfg.from_properties(cfg.BrokerConfig, {
            k: v for k, v in props.items()
            if k in ("namesrvAddr", "maxMessageSize", "storePathRootDir", "flushDiskType")})
        netty_cfg = cfg.from_properties(cfg.NettyServerConfig, {k: v for k, v in props.items() if k == "bindAddress"})
    if args.print_config:
        print(f"namesrvAddr={broker_cfg.namesrvAddr}\nbindAddress={netty_cfg.bindAddress}\n"
              f"maxMessageSize={broker_cfg.maxMessageSize}\n{cfg.to_properties(gateway_cfg)}")
        return 0
    if not broker_cfg.namesrvAddr:
        raise cfg.ConfigError("the gateway needs the cluster's name servers: -n host:port (or namesrvAddr=)")
    if args.protocol == "mqtt":
        if gateway_cfg.mqttListenPort == 0:
            raise cfg.ConfigError("mqttListenPort=0 turns the MQTT gateway off; give it a port")
        # a directory of its own: a broker's gateway or another gateway may share the machine's store root
        listener = _mqtt_gateway(broker_cfg, {**props, "bindAddress": netty_cfg.bindAddress},
                                 f"mqtt-gateway-{gateway_cfg.mqttListenPort}")
        return _run_reactor([listener], args)
    if gateway_cfg.httpListenPort == 0:
        raise cfg.ConfigError("httpListenPort=0 turns the HTTP gateway off; give it a port")
    from ferrymq.gateways.http.gateway import Gateway
    from ferrymq.gateways.http.server import serve_forever

    with _values_of(args.config):
        ssl = cfg.tls_config(props).http_ssl() if gateway_cfg.httpTlsEnable else None
    # a file of its own: a broker's gateway or another gateway may share the machine's store root
    transaction_file = os.path.join(broker_cfg.storePathRootDir, f"http-gateway-{gateway_cfg.httpListenPort}",
                                    "http-transactions.json")
    serve_forever(Gateway(broker_cfg.namesrvAddr, max_message_size=broker_cfg.maxMessageSize,
                          client_config=_gateway_client(props), transaction_file=transaction_file,
                          **gateway_cfg.transaction_options(), **gateway_cfg.console_options()),
                  netty_cfg.bindAddress, gateway_cfg.httpListenPort, ssl)
    log.info("stopped")
    return 0


class _StopInOrder:
    """Several components stopped one after the other (each ``stop()`` may return a Deferred)."""

    def __init__(self, *parts):
        self.parts = parts

    def stop(self):
        from twisted.internet import defer

        d = defer.succeed(None)
        for part in self.parts:
            d.addCallback(lambda _, part=part: part.stop())
        return d


COMMANDS = {"namesrv": cmd_namesrv, "broker": cmd_broker, "standalone": cmd_standalone, "gateway": cmd_gateway}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["admin"]:  # a client tool: its own options, no server logging
        from ferrymq.sdk.admin_cli import main as admin_main

        return admin_main(argv[1:])
    args = build_parser().parse_args(argv)
    if not args.print_config:
        try:
            _setup_logging(args)
        except OSError as exc:
            print(f"ferrymq {args.command}: cannot write the log in {args.log_dir}: {exc}", file=sys.stderr)
            return 1
    try:
        return COMMANDS[args.command](args)
    except cfg.ConfigError as exc:
        print(f"ferrymq {args.command}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except NotBuiltError as exc:
        print(f"ferrymq {args.command}: {exc}", file=sys.stderr)
        return EXIT_NOT_BUILT
    except CannotStart as exc:
        print(f"ferrymq {args.command}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"ferrymq {args.command}: cannot start: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
