"""Typed config keys: a dataclass field's default, help line and allowed values, read from ``key=value`` strings.

Every config object (the name server's, the network's, the broker's, the store's) declares its keys with
:func:`key`, so ``--help``, ``--print-config`` and the checks of a value come from one place. A value that
is not valid, or that asks for a feature FerryMQ does not have yet, is refused with a :class:`ConfigError`
naming the key, the value and what is allowed: running on a misread setting (``flushDiskType=FOO`` as
ASYNC_FLUSH, ``brokerRole=SLAVE`` with nothing replicating) is worse than not starting.
"""

from __future__ import annotations

import dataclasses
import difflib
import ipaddress
import json
from collections.abc import Callable, Iterable
from dataclasses import field
from typing import Any, TypeVar

T = TypeVar("T")

#: A check returns None for a value it accepts, else the rest of the error line ("not valid, expected ...").
Check = Callable[[Any], "str | None"]

#: Apache 4.x spellings of keys 5.x renamed; read as the current name.
ALIASES = {
    "mapedFileSizeCommitLog": "mappedFileSizeCommitLog",
    "mapedFileSizeConsumeQueue": "mappedFileSizeConsumeQueue",
}


class ConfigError(ValueError):
    """A config file or value cannot be used; the message names the file/key and what was expected."""


#: What ``--print-config`` shows for a secret key that has a value.
HIDDEN = "<hidden>"


def key(default: Any, help: str, *, factory: Any = None, check: Check | None = None, secret: bool = False,
        name: str | None = None) -> Any:
    """A config field: its default, the help line ``--help`` prints and the check a configured value passes.
    A ``secret`` key's value is never printed (config output ends up in terminals, logs and bug reports).
    ``name`` is the key's spelling in a file when it is no Python name (Apache's ``tls.server.mode``)."""
    metadata = {"help": help, "check": check, "secret": secret, "name": name}
    if factory is not None:
        return field(default_factory=factory, metadata=metadata)
    return field(default=default, metadata=metadata)


def key_name(f: dataclasses.Field) -> str:
    """The key of field ``f`` in a config file."""
    return f.metadata.get("name") or f.name


# ---------------------------------------------------------------- checks


def one_of(*allowed: str, not_yet: dict[str, str] | None = None) -> Check:
    """An enum-valued key (Apache's enums are case-sensitive). ``not_yet`` maps a valid value whose feature
    FerryMQ does not have yet to the reason it is refused."""
    refused = not_yet or {}

    def check(value: str) -> str | None:
        if value in refused:
            return refused[value]
        if value not in allowed:
            return f"not valid, expected one of {', '.join(allowed)}"
        return None

    return check


def port(value: int) -> str | None:
    """A TCP port; 0 asks the system for any free one."""
    return None if 0 <= value <= 65535 else "not valid, expected a port number 0-65535 (0 = any free port)"


def positive(value: int) -> str | None:
    return None if value > 0 else "not valid, expected a number > 0"


def limit(value: int) -> str | None:
    """A limit where 0 means none."""
    return None if value >= 0 else "not valid, expected 0 (no limit) or a number > 0"


def ip_or_empty(value: str) -> str | None:
    """An address written into message ids and routes must be an IP literal, not a host name."""
    if not value:
        return None
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return "not valid, expected an IPv4 or IPv6 address"
    return None


def host_ports(value: str) -> str | None:
    """Apache's name server list, 'host:port;host:port' (empty: none)."""
    for addr in filter(None, (a.strip() for a in value.split(";"))):
        host, _, port_text = addr.rpartition(":")
        if not host or not port_text.isdigit() or not 0 < int(port_text) <= 65535:
            return "not valid, expected 'host:port' addresses separated by ';', e.g. 127.0.0.1:9876;10.0.0.2:9876"
    return None


def code_list(value: str) -> str | None:
    """Request codes separated by commas (a whitelist), e.g. '34,105'."""
    if all(item.strip().isdigit() for item in value.split(",") if item.strip()):
        return None
    return "not valid, expected request codes separated by ',', e.g. 34,105"


def json_object(*required: str) -> Check:
    """A JSON object naming each of ``required`` (empty: unset)."""

    def check(value: str) -> str | None:
        if not value.strip():
            return None
        try:
            obj = json.loads(value)
        except ValueError:
            obj = None
        if isinstance(obj, dict) and all(isinstance(obj.get(k), str) and obj[k] for k in required):
            return None
        return "not valid, expected a JSON object with " + ", ".join(f'"{k}"' for k in required)

    return check


def equal_to(expected: Any, reason: str) -> Check:
    """A key that has only one usable value until the feature behind the others exists."""
    return lambda value: None if value == expected else reason


# ---------------------------------------------------------------- reading values


def _convert(name: str, raw: str, typ: Any) -> Any:
    value = raw.strip()
    if typ is bool or typ == "bool":
        low = value.lower()
        if low not in ("true", "false"):
            raise ConfigError(f"{name}={raw}: not valid, expected true or false")
        return low == "true"
    if typ is int or typ == "int":
        try:
            return int(value)
        except ValueError:
            raise ConfigError(f"{name}={raw}: not valid, expected an integer") from None
    if typ is float or typ == "float":
        try:
            return float(value)
        except ValueError:
            raise ConfigError(f"{name}={raw}: not valid, expected a number") from None
    return value


def read_value(f: dataclasses.Field, raw: str) -> Any:
    """One configured value of field ``f``: converted to its type, then checked."""
    value = _convert(key_name(f), raw, f.type)
    check = f.metadata.get("check")
    problem = check(value) if check is not None else None
    if problem is not None:
        raise ConfigError(f"{key_name(f)}={raw.strip()}: {problem}")
    return value


def from_properties(cls: type[T], props: dict[str, str], **defaults: Any) -> T:
    """Build ``cls`` from the keys of ``props`` it knows (others are left for other config objects).

    ``defaults`` override the dataclass defaults (e.g. listenPort 9876 for the name server) but not
    values from ``props``; they are not checked. Apache 4.x spellings (:data:`ALIASES`) are read as
    their current names, which win when both are given.
    """
    props = current_names(props)
    kwargs: dict[str, Any] = dict(defaults)
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if key_name(f) in props:
            kwargs[f.name] = read_value(f, props[key_name(f)])
    return cls(**kwargs)


def current_names(props: dict[str, str]) -> dict[str, str]:
    """``props`` with Apache 4.x key spellings renamed to the current ones (a current name given too wins)."""
    if not any(name in ALIASES for name in props):
        return props
    out = {ALIASES.get(name, name): value for name, value in props.items() if name in ALIASES}
    out.update((name, value) for name, value in props.items() if name not in ALIASES)
    return out


# ---------------------------------------------------------------- known keys


def known_keys(*classes: type) -> set[str]:
    return {key_name(f) for cls in classes for f in dataclasses.fields(cls)}


def unknown_keys(props: dict[str, str], *classes: type) -> list[str]:
    return sorted(set(props) - known_keys(*classes))


def nearest_key(name: str, known: Iterable[str]) -> str | None:
    """The known key ``name`` most likely misspells (case is ignored: ``listenport`` is ``listenPort``)."""
    by_lower = {k.lower(): k for k in known}
    match = difflib.get_close_matches(name.lower(), by_lower, n=1, cutoff=0.75)
    return by_lower[match[0]] if match else None


# ---------------------------------------------------------------- writing


def to_properties(obj: Any, skip: Iterable[str] = ()) -> str:
    """``key=value`` lines of a config object, in field order (Apache's ``-p`` output)."""
    lines = []
    for f in dataclasses.fields(obj):
        if key_name(f) in skip:
            continue
        value = getattr(obj, f.name)
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif value and f.metadata.get("secret"):
            value = HIDDEN
        lines.append(f"{key_name(f)}={value}")
    return "\n".join(lines)


def describe(cls: type, skip: Iterable[str] = (), **defaults: Any) -> str:
    """Help text: one block per key with its default."""
    out = []
    for f in dataclasses.fields(cls):
        if key_name(f) in skip:
            continue
        if f.name in defaults:
            default = defaults[f.name]
        elif f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
            default = f.default_factory()  # type: ignore[misc]
        else:
            default = ""
        if isinstance(default, bool):
            default = "true" if default else "false"
        out.append(f"  {key_name(f)} (default {default})\n      {f.metadata.get('help', '')}")
    return "\n".join(out)
