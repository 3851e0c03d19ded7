"""mqadmin's user and ACL commands (createUser ... listAcl): Apache's AdminBrokerProcessor auth codes, with
its answers: NO_PERMISSION and the reason for a refused change, INVALID_PARAMETER for a blank user name."""

from __future__ import annotations

import ipaddress
from typing import Any

from ferrymq.remoting.dispatch import handles
from ferrymq.server.auth.acls import Action, Decision, PolicyEntry, PolicyType, Resource
from ferrymq.server.auth.control import AccessControl
from ferrymq.server.auth.errors import AuthenticationError, AuthorizationError
from ferrymq.server.auth.users import User, UserStatus, UserType
from ferrymq.wire import fastjson
from ferrymq.wire.codes import RequestCode, ResponseCode
from ferrymq.wire.command import RemotingCommand
from ferrymq.wire.headers import (
    AuthAclRequestHeader,
    AuthUserRequestHeader,
    DeleteAclRequestHeader,
    ListAclsRequestHeader,
    ListUsersRequestHeader,
)
from ferrymq.wire.signature import ACCESS_KEY

from .common import ok, refuse

C = RequestCode


def _json(obj: Any) -> bytes:
    return fastjson.dumps(obj)


def _body(cmd: RemotingCommand) -> Any:
    return fastjson.loads(cmd.body) if cmd.body else None


class AccessAdminProcessor:
    def __init__(self, access: AccessControl):
        self.access = access
        self.users = access.users
        self.acls = access.acls

    def _by_super_user(self, cmd: RemotingCommand) -> bool:
        """Whether the request is signed by a super user; an unsigned one counts as such (authentication is
        off then), as Apache's ``isNotSuperUserLogin`` decides."""
        access_key = cmd.ext(ACCESS_KEY)
        if not access_key:
            return True
        user = self.users.get(access_key)
        return user is not None and user.is_super

    # ------------------------------------------------------------------ users

    def _user_of(self, cmd: RemotingCommand, header: AuthUserRequestHeader,
                 verb: str) -> tuple[str | None, UserType | None, UserStatus | None]:
        """The body's password, type and status, refused as Apache refuses a blank name or a super user
        made by someone who is not one (``verb``: create or update, as Apache's message words it)."""
        if not header.username:
            raise refuse(ResponseCode.INVALID_PARAMETER, "The username is blank")
        info = _body(cmd) or {}
        user_type = UserType.parse(info.get("userType"))
        if user_type is UserType.SUPER and not self._by_super_user(cmd):
            raise refuse(ResponseCode.SYSTEM_ERROR, f"The super user can only be {verb} by super user")
        return info.get("password"), user_type, UserStatus.parse(info.get("userStatus"))

    @handles(C.AUTH_CREATE_USER)
    def create_user(self, cmd: RemotingCommand, channel: Any, header: AuthUserRequestHeader) -> RemotingCommand:
        password, user_type, status = self._user_of(cmd, header, "create")
        try:
            self.users.create(User(header.username, password, user_type or UserType.NORMAL,
                                   status or UserStatus.ENABLE))
        except AuthenticationError as exc:
            raise refuse(ResponseCode.NO_PERMISSION, str(exc)) from None
        return ok(cmd)

    @handles(C.AUTH_UPDATE_USER)
    def update_user(self, cmd: RemotingCommand, channel: Any, header: AuthUserRequestHeader) -> RemotingCommand:
        password, user_type, status = self._user_of(cmd, header, "update")
        old = self.users.get(header.username)
        if old is None:
            raise refuse(ResponseCode.NO_PERMISSION, "The user is not exist")
        if old.is_super and not self._by_super_user(cmd):
            raise refuse(ResponseCode.NO_PERMISSION, "The super user can only be update by super user")
        self.users.update(header.username, password, user_type, status)
        return ok(cmd)

    @handles(C.AUTH_DELETE_USER)
    def delete_user(self, cmd: RemotingCommand, channel: Any, header: AuthUserRequestHeader) -> RemotingCommand:
        user = self.users.get(header.username or "")
        if user is None:
            return ok(cmd)
        if user.is_super and not self._by_super_user(cmd):
            raise refuse(ResponseCode.NO_PERMISSION, "The super user can only be update by super user")
        self.users.delete(user.username)
        self.acls.remove(user.subject_key)
        return ok(cmd)

    @handles(C.AUTH_GET_USER)
    def get_user(self, cmd: RemotingCommand, channel: Any, header: AuthUserRequestHeader) -> RemotingCommand:
        if not (header.username or "").strip():
            raise refuse(ResponseCode.INVALID_PARAMETER, "The username is blank")
        user = self.users.get(header.username)
        return ok(cmd, body=_json(user.to_json()) if user is not None else b"")

    @handles(C.AUTH_LIST_USER)
    def list_users(self, cmd: RemotingCommand, channel: Any, header: ListUsersRequestHeader) -> RemotingCommand:
        users = self.users.list(header.filter)
        return ok(cmd, body=_json([u.to_json() for u in users]) if users else b"")

    # ------------------------------------------------------------------ ACLs

    @handles(C.AUTH_CREATE_ACL, C.AUTH_UPDATE_ACL)
    def put_acl(self, cmd: RemotingCommand, channel: Any, header: AuthAclRequestHeader) -> RemotingCommand:
        info = _body(cmd)
        if not info or not info.get("policies"):
            raise refuse(ResponseCode.SYSTEM_ERROR, "The body of acl is null")
        subject = info.get("subject") or header.subject or ""
        try:
            policies = _policies(info["policies"])
            user = self.users.get(_username(subject))
            if user is None:
                raise AuthorizationError(f"The subject of {subject} is not exist.")
        except AuthorizationError as exc:
            raise refuse(ResponseCode.NO_PERMISSION, str(exc)) from None
        for policy_type, entries in policies:
            self.acls.put(subject, entries, policy_type)
        return ok(cmd)

    @handles(C.AUTH_DELETE_ACL)
    def delete_acl(self, cmd: RemotingCommand, channel: Any, header: DeleteAclRequestHeader) -> RemotingCommand:
        subject = header.subject or ""
        if self.users.get(_username(subject)) is None:
            raise refuse(ResponseCode.NO_PERMISSION, "The subject is not exist.")
        if self.acls.get(subject) is None:
            raise refuse(ResponseCode.NO_PERMISSION, "The acl is not exist.")
        resource = Resource.parse(header.resource) if header.resource else None
        policy_type = PolicyType.parse(header.policy_type) or PolicyType.CUSTOM
        self.acls.remove(subject, None if resource is None else [resource], policy_type)
        return ok(cmd)

    @handles(C.AUTH_GET_ACL)
    def get_acl(self, cmd: RemotingCommand, channel: Any, header: AuthAclRequestHeader) -> RemotingCommand:
        acl = self.acls.get(header.subject or "")
        return ok(cmd, body=_json(acl.to_json()) if acl is not None else b"")

    @handles(C.AUTH_LIST_ACL)
    def list_acls(self, cmd: RemotingCommand, channel: Any, header: ListAclsRequestHeader) -> RemotingCommand:
        acls = self.acls.list(header.subject_filter, header.resource_filter)
        return ok(cmd, body=_json([a.to_json() for a in acls]) if acls else b"")


def _username(subject: str) -> str:
    """The user a subject key (``User:<name>``) names; "" for another kind of subject."""
    kind, _, name = subject.partition(":")
    return name if kind.lower() == "user" else ""


def _policies(infos: list[dict[str, Any]]) -> list[tuple[PolicyType, list[PolicyEntry]]]:
    """An AclInfo's policies, checked as Apache's ``AuthorizationMetadataManagerImpl.validate`` checks them."""
    out = []
    for info in infos:
        entries = []
        for e in info.get("entries") or ():
            resource = Resource.parse(e.get("resource") or "")
            if resource is None:
                raise AuthorizationError("The resource is null.")
            actions = tuple(a for a in map(Action.parse, e.get("actions") or ()) if a is not None)
            if not actions:
                raise AuthorizationError("The actions is empty.")
            if Action.ANY in actions:
                raise AuthorizationError("The actions can not be Any.")
            ips = tuple(e.get("sourceIps") or ())
            for ip in ips:
                if not ip.strip():
                    raise AuthorizationError("The source ip is empty.")
                if not _ip_or_cidr(ip):
                    raise AuthorizationError("The source ip is invalid.")
            decision = Decision.parse(e.get("decision"))
            if decision is None:
                raise AuthorizationError("The decision is null or illegal.")
            entries.append(PolicyEntry(resource, actions, ips, decision))
        if not entries:
            raise AuthorizationError("The policy entries is empty.")
        out.append((PolicyType.parse(info.get("policyType")) or PolicyType.CUSTOM, entries))
    return out


def _ip_or_cidr(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return True

