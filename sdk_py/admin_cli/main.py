"""Runs one ``ferrymq admin`` command line: ``ferrymq admin topicStatus -n 127.0.0.1:9876 -t T``.

The command body runs in the SDK's reactor thread (:mod:`ferrymq.sdk.reactor_thread`) against a
:class:`BlockingMQAdmin`'s client; failures end in one line on stderr and exit status 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import TextIO

from ferrymq.wire.signature import Credentials

from .. import reactor_thread
from ..blocking_clients import BlockingMQAdmin
from . import access, broker, cluster, consumer, message, offset, topic  # noqa: F401 - each module declares its commands
from .command import COMMANDS, Command, CommandError, Context

#: where mqadmin (and every RocketMQ client) reads the name server list when -n is not given
NAMESRV_ENV = "NAMESRV_ADDR"
#: mqadmin signs with the accessKey and secretKey of ``$ROCKETMQ_HOME/conf/tools.yml``
TOOLS_FILE = os.path.join("conf", "tools.yml")

EXIT_FAILED = 1

#: seconds each request may take: mqadmin's DefaultMQAdminExt allows 5 s (a cold broker's first runtime
#: info can take seconds)
REQUEST_TIMEOUT = 5.0


def usage() -> str:
    lines = ["The most commonly used ferrymq admin commands are:"]
    lines += ["   %-35s %s" % (name, cmd.description) for name, cmd in COMMANDS.items()]
    lines += ["", "See 'ferrymq admin help <command>' for more information on a specific command."]
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None, out: TextIO | None = None, err: TextIO | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    out = out or sys.stdout
    err = err or sys.stderr
    if not argv or argv[0] in ("-h", "--help"):
        out.write(usage())
        return 0
    if argv[0] == "help" and len(argv) == 2:
        argv = [argv[1], "--help"]
    cmd = COMMANDS.get(argv[0])
    if cmd is None:
        err.write(f"The sub command {argv[0]} not exist.\n")
        return EXIT_FAILED
    try:
        opts = cmd.parse(argv[1:])
    except SystemExit as exc:  # argparse printed the help, or the usage and what is wrong
        return int(exc.code or 0)
    namesrv = opts.namesrvAddr or os.environ.get(NAMESRV_ENV, "")
    addrs = [addr.strip() for addr in namesrv.split(";") if addr.strip()]
    if not addrs:
        err.write(f"ferrymq admin {cmd.name}: no name server address: give -n host:port or set {NAMESRV_ENV}\n")
        return EXIT_FAILED
    try:
        credentials = admin_credentials(opts, os.environ.get("ROCKETMQ_HOME"))
    except CommandError as exc:
        err.write(f"ferrymq admin {cmd.name}: {exc}\n")
        return EXIT_FAILED
    try:
        run(cmd, opts, addrs, out, err, credentials)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader (`| head`) has what it wanted
        return 0
    except Exception as exc:  # every failure is one line for the operator, not a traceback
        out.flush()
        err.write(f"ferrymq admin {cmd.name}: {describe(exc)}\n")
        return EXIT_FAILED
    return 0


def admin_credentials(opts: argparse.Namespace, rocketmq_home: str | None) -> Credentials | None:
    """What the requests are signed with: --access-key and --secret-key, else the keys of
    ``<rocketmq_home>/conf/tools.yml`` as mqadmin reads them (nothing when either is blank or the file is
    absent)."""
    if opts.access_key or opts.secret_key:
        if not (opts.access_key and opts.secret_key):
            raise CommandError("give both --access-key and --secret-key")
        return Credentials(opts.access_key, opts.secret_key)
    if not rocketmq_home:
        return None
    path = os.path.join(rocketmq_home, TOOLS_FILE)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except FileNotFoundError:
        return None
    import yaml  # only a signing admin needs it

    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise CommandError(f"{path} is not YAML: {exc}") from None
    access_key, secret_key = (str(data.get(key) or "").strip() if isinstance(data, dict) else ""
                              for key in ("accessKey", "secretKey"))
    return Credentials(access_key, secret_key) if access_key and secret_key else None


def run(cmd: Command, opts: argparse.Namespace, addrs: list[str], out: TextIO, err: TextIO,
        credentials: Credentials | None = None) -> None:
    """Run the command against the first name server of ``addrs`` (deleteTopic also visits the others),
    signing its requests with ``credentials`` when given."""
    with BlockingMQAdmin(addrs[0], timeout=REQUEST_TIMEOUT, credentials=credentials) as admin:
        ctx = Context(admin.wrapped, addrs, out, err)
        # each request has its own timeout; clusterList -i runs until interrupted
        reactor_thread.call(cmd.run, ctx, opts, timeout=None)
    out.flush()


def describe(exc: BaseException) -> str:
    """One line: the error's text (a server's remark may span lines), with its type unless self-evident."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, CommandError) or type(exc).__name__ in text:
        return text
    return f"{type(exc).__name__}: {text}"
