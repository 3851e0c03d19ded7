"""ACL 1.0's ``plain_acl.yml`` read into users and ACLs, as Apache's ``AuthMigrator`` does when
``migrateAuthFromV1Enabled`` is set: each account whose access key is not a user yet becomes one (a super
user if ``admin``), with its topic and group permissions as Custom entries and its default permissions as
Default entries on ``Topic:*`` and ``Group:*``."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from .acls import (
    Acls,
    Action,
    Decision,
    PolicyEntry,
    PolicyType,
    Resource,
    ResourcePattern,
    ResourceType,
)
from .errors import AuthenticationError
from .users import User, Users, UserType

log = logging.getLogger("ferrymq.auth")


def v1_files(home: str | os.PathLike[str]) -> list[Path]:
    """Where Apache 4.x reads ACL 1.0 accounts: ``<home>/conf/plain_acl.yml`` and the ``.yml``/``.yaml``
    files under ``<home>/conf/acl`` (mqadmin's ``tools.yml`` excepted)."""
    conf = Path(home) / "conf"
    files = [conf / "plain_acl.yml"]
    acl_dir = conf / "acl"
    if acl_dir.is_dir():
        files += sorted(p for p in acl_dir.rglob("*") if p.suffix in (".yml", ".yaml") and p.name != "tools.yml")
    return [p for p in files if p.is_file()]


def accounts(files: Iterable[Path]) -> list[Mapping[str, Any]]:
    import yaml  # only a broker migrating ACL 1.0 files needs it

    out = []
    for path in files:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
        out += [a for a in data.get("accounts") or () if isinstance(a, Mapping) and a.get("accessKey")]
    return out


def _actions(perm: str) -> tuple[Action, ...]:
    return {"PUB": (Action.PUB,), "SUB": (Action.SUB,), "PUB|SUB": (Action.PUB, Action.SUB),
            "SUB|PUB": (Action.PUB, Action.SUB)}.get(perm, (Action.ALL,))


def _entry(resource: Resource, perm: Any) -> PolicyEntry:
    perm = str(perm or "").strip()
    decision = Decision.DENY if perm in ("", "DENY") else Decision.ALLOW
    return PolicyEntry(resource, _actions(perm), (), decision)


def _perms(items: Iterable[Any], resource_of) -> list[PolicyEntry]:
    out = []
    for item in items or ():
        name, sep, perm = str(item).partition("=")
        if sep and "=" not in perm:
            out.append(_entry(resource_of(name.strip()), perm))
    return out


def migrate(users: Users, acls: Acls, files: Iterable[Path]) -> list[str]:
    """Create the users and ACLs of the ACL 1.0 ``files``; the access keys migrated, in order."""
    done = []
    for account in accounts(files):
        name = str(account["accessKey"])
        if users.get(name) is not None:
            continue
        try:
            users.create(User(name, str(account.get("secretKey") or ""),
                              UserType.SUPER if account.get("admin") is True else UserType.NORMAL))
        except AuthenticationError as exc:
            log.error("ACL 1.0 account %s not migrated: %s", name, exc)
            continue
        custom = _perms(account.get("topicPerms"), Resource.topic) + _perms(account.get("groupPerms"), Resource.group)
        defaults = [_entry(Resource(rtype, None, ResourcePattern.ANY), account[key])
                    for rtype, key in ((ResourceType.TOPIC, "defaultTopicPerm"), (ResourceType.GROUP, "defaultGroupPerm"))
                    if str(account.get(key) or "").strip()]
        subject = users.get(name).subject_key
        if custom:
            acls.put(subject, custom, PolicyType.CUSTOM)
        if defaults:
            acls.put(subject, defaults, PolicyType.DEFAULT)
        done.append(name)
    if done:
        log.info("ACL 1.0 accounts migrated to users and ACLs: %s", ", ".join(done))
    return done
