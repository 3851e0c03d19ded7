"""How a command is declared and run: its mqadmin name, its options (commons-cli's short letter and long
name, as mqadmin spells them) and a Deferred-returning body that prints to :class:`Context`.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TextIO

from twisted.internet import defer

from ..admin import NamesrvAdmin
from ..mq_admin import MQAdmin


@dataclass(frozen=True)
class Opt:
    """One option: ``-short``/``--long`` (``short`` empty: long form only); ``arg`` False for a flag. The
    value lands in ``opts.<long>``."""

    short: str
    long: str
    help: str
    arg: bool = True
    required: bool = False


@dataclass(frozen=True)
class OneOf:
    """Options of which exactly one may be given (commons-cli's OptionGroup), and, if required, must be."""

    options: tuple[Opt, ...]
    required: bool = True


#: the options every command takes (mqadmin's ServerUtil adds -h itself; argparse does here)
NAMESRV = Opt("n", "namesrvAddr", "Name server address list, eg: '192.168.0.1:9876;192.168.0.2:9876' "
              "(default: $NAMESRV_ADDR)")


@dataclass
class Context:
    """What a command body works with: the admin client, the name servers named on the command line,
    and where it prints (``err`` for what mqadmin prints as a stack trace and goes on)."""

    admin: MQAdmin
    namesrv_addrs: list[str]
    out: TextIO
    err: TextIO

    def namesrv_at(self, addr: str) -> NamesrvAdmin:
        """A name server of the list other than the first (the admin client talks to the first)."""
        return NamesrvAdmin(addr, self.admin.client, self.admin.namesrv.timeout)

    def printf(self, fmt: str, *args: Any) -> None:
        """Java's ``System.out.printf`` with the same widths: mqadmin's formats map onto ``%`` one to one."""
        self.out.write(fmt % args if args else fmt)


Body = Callable[[Context, argparse.Namespace], defer.Deferred]


@dataclass(frozen=True)
class Command:
    name: str
    description: str
    options: tuple[Opt | OneOf, ...]
    run: Body

    def parser(self) -> argparse.ArgumentParser:
        parser = argparse.ArgumentParser(prog=f"ferrymq admin {self.name}", description=self.description,
                                         allow_abbrev=False)
        _add(parser, NAMESRV)
        parser.add_argument("--access-key", dest="access_key", metavar="<arg>",
                            help="Sign requests as this user, for a broker with authenticationEnabled (default: "
                                 "accessKey of $ROCKETMQ_HOME/conf/tools.yml, as mqadmin)")
        parser.add_argument("--secret-key", dest="secret_key", metavar="<arg>",
                            help="The user's secret key (default: secretKey of $ROCKETMQ_HOME/conf/tools.yml)")
        for option in self.options:
            if isinstance(option, OneOf):
                group = parser.add_mutually_exclusive_group(required=option.required)
                for member in option.options:
                    _add(group, member)
            else:
                _add(parser, option)
        return parser

    def parse(self, argv: list[str]) -> argparse.Namespace:
        """Parsed options, string values stripped as mqadmin trims them."""
        opts = self.parser().parse_args(argv)
        for key, value in vars(opts).items():
            if isinstance(value, str):
                setattr(opts, key, value.strip())
        return opts


def _add(parser: Any, option: Opt) -> None:
    flags = (f"-{option.short}",) * bool(option.short) + (f"--{option.long}",)
    if option.arg:
        parser.add_argument(*flags, dest=option.long, metavar="<arg>", required=option.required, help=option.help)
    else:
        parser.add_argument(*flags, dest=option.long, action="store_true", help=option.help)


#: every command by its mqadmin name, filled by the family modules' @command declarations
COMMANDS: dict[str, Command] = {}


def command(name: str, description: str, *options: Opt | OneOf) -> Callable[[Body], Body]:
    """Declare ``body`` as the mqadmin command ``name`` (its description is mqadmin's own)."""

    def register(body: Body) -> Body:
        if name in COMMANDS:
            raise ValueError(f"admin command {name} is declared twice")
        COMMANDS[name] = Command(name, description, options, body)
        return body

    return register


class CommandError(Exception):
    """A command cannot do what was asked (bad option value, unknown broker...): one line for the user."""


def int_option(opts: argparse.Namespace, name: str, default: int) -> int:
    value = getattr(opts, name)
    if value is None:
        return default
    try:
        return int(value)
    except ValueError:
        raise CommandError(f"--{name} must be an integer, not {value!r}") from None


def bool_option(opts: argparse.Namespace, name: str) -> bool:
    """Java's ``Boolean.parseBoolean``: "true" in any case is true, anything else false."""
    value = getattr(opts, name)
    return value is not None and value.lower() == "true"
