"""``ferrymq namesrv | broker | standalone``: start FerryMQ components from Apache-style config files."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from twisted.internet.error import CannotListenError

from ferrymq.server import config as cfg
from ferrymq.server.stall_watch import DEFAULT_THRESHOLD as STALL_THRESHOLD

log = logging.getLogger("ferrymq")

EXIT_NOT_BUILT = 3
EXIT_CONFIG = 2

_FILE_HELP = (
    "Config files use Apache RocketMQ's format and key names: one 'key=value' per line, '#' starts a comment."
)


class NotBuiltError(RuntimeError):
    """A component this command would start does not exist yet."""


def _broker_factory(broker_cfg: cfg.BrokerConfig, props: dict[str, str]):
    """Start the broker and return it (an object with ``stop() -> Deferred``).

    ``props`` is the whole config file: the broker reads its network keys (bindAddress, idle time, frame
    size) and the store-only keys (flush intervals, index sizes...) from it too.
    """
    from ferrymq.server.broker.service import start_broker
    from ferrymq.server.store.message_store import StoreLockedError

    try:
        return start_broker(broker_cfg, props)
    except StoreLockedError as exc:
        raise cfg.ConfigError(str(exc)) from None


# ---------------------------------------------------------------- argument parsing


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("-c", "--config", metavar="FILE", help="config file (Apache key=value format)")
    p.add_argument(
        "-p", "--print-config", action="store_true", help="print the effective configuration and exit"
    )
    p.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log verbosity (default INFO)"
    )
    p.add_argument(
        "--stall-traceback", metavar="FILE",
        help=f"when the event loop stalls for more than {STALL_THRESHOLD * 1000:.0f} ms (always logged as a warning), "
        "also write every thread's stack to FILE while it is stuck",
    )


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
        f"Network keys:\n{cfg.describe(cfg.NettyServerConfig, listenPort=cfg.NAMESRV_PORT)}",
    )
    _add_common(p)

    p = sub.add_parser(
        "broker",
        help="run a broker (default port 10911, VIP channel 10909)",
        formatter_class=fmt,
        description="Run a broker: message store, send/pull/consumer/admin request processing, registration "
        "with the name servers of namesrvAddr.",
        epilog=f"{_FILE_HELP}\n\nBroker keys:\n{cfg.describe(cfg.BrokerConfig)}",
    )
    _add_common(p)
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
        f"Broker keys:\n{cfg.describe(cfg.BrokerConfig, storePathRootDir='./data')}",
    )
    _add_common(p)

    sub.add_parser(
        "admin",
        help="mqadmin's commands without a JVM: ferrymq admin clusterList -n 127.0.0.1:9876",
        add_help=False,
    )
    return parser


# ---------------------------------------------------------------- running


def _setup_logging(level: str) -> None:
    logging.basicConfig(
        level=getattr(logging, level),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    from twisted.logger import STDLibLogObserver, globalLogBeginner

    globalLogBeginner.beginLoggingTo([STDLibLogObserver(name="twisted")], redirectStandardIO=False)


def _read_props(path: str | None) -> dict[str, str]:
    return cfg.load_properties(path) if path else {}


def _warn_unknown(props: dict[str, str], *classes: type) -> None:
    for name in cfg.unknown_keys(props, *classes):
        log.warning("config key %r is not known to FerryMQ and is ignored (check its spelling)", name)


def _run_reactor(stoppables: list, args: argparse.Namespace) -> int:
    """Run until SIGTERM/SIGINT; shutdown triggers stop every component gracefully first."""
    from twisted.internet import reactor

    from ferrymq.server.gc_tuning import tune_gc
    from ferrymq.server.stall_watch import StallWatch
    from ferrymq.wire import native

    native.report()
    tune_gc()
    for component in stoppables:
        reactor.addSystemEventTrigger("before", "shutdown", component.stop)
    traceback_file = open(args.stall_traceback, "a") if args.stall_traceback else None  # noqa: SIM115 - lives as long as the process
    watch = StallWatch(reactor, traceback_file=traceback_file)
    reactor.callWhenRunning(watch.start)
    reactor.addSystemEventTrigger("before", "shutdown", watch.stop)
    reactor.run()
    log.info("stopped")
    return 0


def _start_namesrv(namesrv_cfg: cfg.NamesrvConfig, netty_cfg: cfg.NettyServerConfig):
    from ferrymq.server.namesrv.service import NameServer

    server = NameServer(namesrv_cfg, netty_cfg)
    server.start()
    return server


def cmd_namesrv(args: argparse.Namespace) -> int:
    props = _read_props(args.config)
    namesrv_cfg, netty_cfg = cfg.namesrv_config(props, args.config)
    if args.print_config:
        print(cfg.to_properties(namesrv_cfg))
        print(cfg.to_properties(netty_cfg))
        return 0
    _warn_unknown(props, cfg.NamesrvConfig, cfg.NettyServerConfig)
    server = _start_namesrv(namesrv_cfg, netty_cfg)
    return _run_reactor([server], args)


def cmd_broker(args: argparse.Namespace) -> int:
    props = _read_props(args.config)
    if args.namesrv_addr:
        props["namesrvAddr"] = args.namesrv_addr
    broker_cfg = cfg.from_properties(cfg.BrokerConfig, props)
    if args.print_config:
        print(cfg.to_properties(broker_cfg))
        return 0
    _warn_unknown(props, cfg.NettyServerConfig, cfg.BrokerConfig, _store_config_class())
    return _run_reactor([_broker_factory(broker_cfg, props)], args)


def _store_config_class() -> type:
    """The store's own keys (flush intervals, index sizes...) are known keys of a broker config file."""
    from ferrymq.server.store.config import MessageStoreConfig

    return MessageStoreConfig


def cmd_standalone(args: argparse.Namespace) -> int:
    props = _read_props(args.config)
    namesrv_props = dict(props)
    namesrv_props.pop("listenPort", None)
    if "namesrvListenPort" in props:
        namesrv_props["listenPort"] = props["namesrvListenPort"]
    namesrv_cfg, netty_cfg = cfg.namesrv_config(namesrv_props, args.config)
    broker_cfg = cfg.from_properties(cfg.BrokerConfig, props, storePathRootDir="./data")
    if not broker_cfg.namesrvAddr:
        broker_cfg.namesrvAddr = f"127.0.0.1:{netty_cfg.listenPort}"
    if args.print_config:
        print(cfg.to_properties(namesrv_cfg))
        print(cfg.to_properties(netty_cfg))
        print(cfg.to_properties(broker_cfg))
        return 0
    props_known = dict(props)
    props_known.pop("namesrvListenPort", None)
    _warn_unknown(props_known, cfg.NamesrvConfig, cfg.NettyServerConfig, cfg.BrokerConfig, _store_config_class())
    namesrv = _start_namesrv(namesrv_cfg, netty_cfg)
    if "namesrvAddr" not in props:  # the in-process name server, on the port it actually bound
        broker_cfg.namesrvAddr = f"127.0.0.1:{namesrv.port}"
    # the broker stops first, so it can still unregister from the name server
    return _run_reactor([_StopInOrder(_broker_factory(broker_cfg, props), namesrv)], args)


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


COMMANDS = {"namesrv": cmd_namesrv, "broker": cmd_broker, "standalone": cmd_standalone}


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["admin"]:  # a client tool: its own options, no server logging
        from ferrymq.sdk.admin_cli import main as admin_main

        return admin_main(argv[1:])
    args = build_parser().parse_args(argv)
    if not args.print_config:
        _setup_logging(args.log_level)
    try:
        return COMMANDS[args.command](args)
    except cfg.ConfigError as exc:
        print(f"ferrymq {args.command}: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except NotBuiltError as exc:
        print(f"ferrymq {args.command}: {exc}", file=sys.stderr)
        return EXIT_NOT_BUILT
    except (OSError, CannotListenError) as exc:  # typically the port is taken
        print(f"ferrymq {args.command}: cannot start: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
