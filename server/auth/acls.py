"""ACL rules (Apache's ``Acl``): per user, policy entries granting or denying actions on a resource pattern,
optionally only from some source addresses; and the choice among the entries that match a request."""

from __future__ import annotations

import enum
import ipaddress
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .errors import AuthorizationError


class _Named(enum.Enum):
    """An Apache enum written and read by its display name (case-insensitive, as ``getByName``)."""

    @classmethod
    def parse(cls, name: str | None):
        return next((m for m in cls if name is not None and m.value.lower() == name.strip().lower()), None)


class Action(_Named):
    ALL = "All"
    ANY = "Any"
    PUB = "Pub"
    SUB = "Sub"
    CREATE = "Create"
    UPDATE = "Update"
    DELETE = "Delete"
    GET = "Get"
    LIST = "List"


class ResourceType(_Named):
    ANY = "Any"
    CLUSTER = "Cluster"
    NAMESPACE = "Namespace"
    TOPIC = "Topic"
    GROUP = "Group"


class ResourcePattern(_Named):
    ANY = "ANY"
    LITERAL = "LITERAL"
    PREFIXED = "PREFIXED"


class Decision(_Named):
    ALLOW = "Allow"
    DENY = "Deny"


class PolicyType(_Named):
    CUSTOM = "Custom"
    DEFAULT = "Default"


RETRY_PREFIX = "%RETRY%"
DLQ_PREFIX = "%DLQ%"


@dataclass(frozen=True)
class Resource:
    type: ResourceType
    name: str | None = None
    pattern: ResourcePattern = ResourcePattern.LITERAL

    @classmethod
    def parse(cls, key: str) -> Resource | None:
        """``*``, ``Topic:*``, ``Topic:name`` or ``Topic:prefix*``; None for a key naming no known type."""
        key = key.strip()
        if key == "*":
            return cls(ResourceType.ANY, None, ResourcePattern.ANY)
        type_name, _, name = key.partition(":")
        rtype = ResourceType.parse(type_name)
        if rtype is None:
            return None
        if name == "*":
            return cls(rtype, None, ResourcePattern.ANY)
        if name.endswith("*"):
            return cls(rtype, name[: name.index("*")], ResourcePattern.PREFIXED)
        return cls(rtype, name, ResourcePattern.LITERAL)

    @classmethod
    def topic(cls, name: str) -> Resource:
        return cls(ResourceType.TOPIC, name)

    @classmethod
    def group(cls, name: str) -> Resource:
        """A group, named by itself or by its retry/DLQ topic (Apache's ``ofGroup``)."""
        if name.startswith(RETRY_PREFIX):
            name = name[len(RETRY_PREFIX):]
        elif name.startswith(DLQ_PREFIX):
            name = name[len(DLQ_PREFIX):]
        return cls(ResourceType.GROUP, name)

    @property
    def key(self) -> str:
        if self.type is ResourceType.ANY:
            return "*"
        if self.pattern is ResourcePattern.ANY:
            return f"{self.type.value}:*"
        if self.pattern is ResourcePattern.PREFIXED:
            return f"{self.type.value}:{self.name}*"
        return f"{self.type.value}:{self.name}"

    def matches(self, other: Resource) -> bool:
        if self.type is ResourceType.ANY:
            return True
        if self.type is not other.type:
            return False
        if self.pattern is ResourcePattern.ANY:
            return True
        if self.pattern is ResourcePattern.LITERAL:
            return other.name == self.name
        return other.name is not None and other.name.startswith(self.name or "")


def ip_in(ip: str, source: str) -> bool:
    """Apache's ``isIPInRange``: an address equal to ``source``, or inside it when it is a CIDR block."""
    if "/" not in source:
        return ip == source
    try:
        return ipaddress.ip_address(ip) in ipaddress.ip_network(source, strict=False)
    except ValueError:
        return False


@dataclass
class PolicyEntry:
    resource: Resource
    actions: tuple[Action, ...]
    source_ips: tuple[str, ...] = ()
    decision: Decision = Decision.ALLOW

    def matches(self, resource: Resource, actions: Sequence[Action], ip: str) -> bool:
        if not self.resource.matches(resource) or not self.actions:
            return False
        if Action.ANY not in actions and not any(a in self.actions or Action.ALL in self.actions for a in actions):
            return False
        return not self.source_ips or any(ip_in(ip, s) for s in self.source_ips)

    def rank(self) -> tuple[int, int, int, int]:
        """Sort key of the most specific entry first (Apache's ``comparePolicyEntries``): a typed resource
        before Any, literal before prefixed before any, a longer prefix first, Deny before Allow."""
        r = self.resource
        typed = 1 if r.type is ResourceType.ANY else 0
        pattern = {ResourcePattern.LITERAL: 0, ResourcePattern.PREFIXED: 1, ResourcePattern.ANY: 2}[r.pattern]
        length = -len(r.name or "") if r.pattern is ResourcePattern.PREFIXED else 0
        return typed, pattern, length, 0 if self.decision is Decision.DENY else 1

    def to_json(self) -> dict[str, Any]:
        # no source address condition is written as none at all, as Apache writes it (tools print "null")
        out: dict[str, Any] = {"resource": self.resource.key, "actions": [a.value for a in self.actions]}
        if self.source_ips:
            out["sourceIps"] = list(self.source_ips)
        out["decision"] = self.decision.value
        return out

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> PolicyEntry:
        resource = Resource.parse(obj["resource"])
        if resource is None:
            raise AuthorizationError(f"The resource of {obj['resource']} is invalid")
        return cls(resource, tuple(a for a in map(Action.parse, obj.get("actions") or ()) if a),
                   tuple(obj.get("sourceIps") or ()), Decision.parse(obj.get("decision")) or Decision.ALLOW)


@dataclass
class Acl:
    """One user's policies: CUSTOM entries are consulted first, DEFAULT ones when no custom entry matches."""

    subject: str
    policies: dict[PolicyType, list[PolicyEntry]] = field(default_factory=dict)

    def entries(self, policy_type: PolicyType = PolicyType.CUSTOM) -> list[PolicyEntry]:
        return self.policies.setdefault(policy_type, [])

    def decide(self, resource: Resource, actions: Sequence[Action], ip: str) -> PolicyEntry | None:
        """The entry that decides a request, or None when none matches."""
        for policy_type in (PolicyType.CUSTOM, PolicyType.DEFAULT):
            matched = [e for e in self.policies.get(policy_type, ()) if e.matches(resource, actions, ip)]
            if matched:
                return min(matched, key=PolicyEntry.rank)
        return None

    def put(self, entries: Iterable[PolicyEntry], policy_type: PolicyType = PolicyType.CUSTOM) -> None:
        """Add entries, replacing those on the same resource (Apache's ``updatePolicy``)."""
        current = self.entries(policy_type)
        for entry in entries:
            for i, old in enumerate(current):
                if old.resource == entry.resource:
                    current[i] = entry
                    break
            else:
                current.append(entry)

    def remove(self, resources: Iterable[Resource], policy_type: PolicyType | None = None) -> None:
        gone = set(resources)
        for ptype, entries in self.policies.items():
            if policy_type is None or ptype is policy_type:
                entries[:] = [e for e in entries if e.resource not in gone]

    @property
    def empty(self) -> bool:
        return not any(self.policies.values())

    def to_json(self) -> dict[str, Any]:
        return {"subject": self.subject, "policies": [
            {"policyType": t.value, "entries": [e.to_json() for e in entries]}
            for t, entries in self.policies.items() if entries]}

    @classmethod
    def from_json(cls, obj: Mapping[str, Any]) -> Acl:
        acl = cls(str(obj["subject"]))
        for policy in obj.get("policies") or ():
            ptype = PolicyType.parse(policy.get("policyType")) or PolicyType.CUSTOM
            acl.entries(ptype).extend(PolicyEntry.from_json(e) for e in policy.get("entries") or ())
        return acl


class Acls:
    """Every subject's ACL, saved whole through ``save`` after every change."""

    def __init__(self, save: Callable[[list[dict[str, Any]]], None] | None = None):
        self._acls: dict[str, Acl] = {}
        self._save = save

    def load(self, obj: Any) -> None:
        for entry in obj or ():
            acl = Acl.from_json(entry)
            self._acls[acl.subject] = acl

    def get(self, subject: str) -> Acl | None:
        return self._acls.get(subject)

    def list(self, subject_filter: str | None = None, resource_filter: str | None = None) -> list[Acl]:
        """Apache's ``listAcl``: the ACLs of subjects containing ``subject_filter``; unless the subject
        itself contains ``resource_filter``, only their entries whose resource contains it (copies)."""
        out = []
        for subject, acl in sorted(self._acls.items()):
            if subject_filter and subject_filter.strip() and subject_filter not in subject:
                continue
            keep_all = not (resource_filter and resource_filter.strip()) or resource_filter in subject
            policies = {t: [e for e in es if keep_all or resource_filter in e.resource.key]
                        for t, es in acl.policies.items()}
            policies = {t: es for t, es in policies.items() if es}
            if policies:
                out.append(Acl(subject, policies))
        return out

    def put(self, subject: str, entries: Iterable[PolicyEntry], policy_type: PolicyType = PolicyType.CUSTOM) -> Acl:
        acl = self._acls.setdefault(subject, Acl(subject))
        acl.put(entries, policy_type)
        self._persist()
        return acl

    def remove(self, subject: str, resources: Iterable[Resource] | None = None,
               policy_type: PolicyType | None = None) -> None:
        """Remove the entries on ``resources`` (every entry when None); an ACL left empty is dropped."""
        acl = self._acls.get(subject)
        if acl is None:
            return
        if resources is None:
            del self._acls[subject]
        else:
            acl.remove(resources, policy_type)
            if acl.empty:
                del self._acls[subject]
        self._persist()

    def to_json(self) -> list[dict[str, Any]]:
        return [a.to_json() for _, a in sorted(self._acls.items())]

    def _persist(self) -> None:
        if self._save is not None:
            self._save(self.to_json())
