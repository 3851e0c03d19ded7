"""mqadmin's user and ACL commands (createUser ... listAcl): the same options, requests and output. Changes
go to one broker (-b) or to every broker of a cluster, slaves included (-c); reads ask one broker or the
cluster's masters."""

from __future__ import annotations

import argparse
from typing import Any

from twisted.internet import defer

from ..access_admin import acl_info
from .cluster import cluster_addrs
from .command import CommandError, Context, OneOf, Opt, command
from .java_text import java_bool

USER_FORMAT = "%-16s  %-22s  %-22s  %-22s\n"
ACL_FORMAT = "%-16s  %-10s  %-22s  %-20s  %-24s  %-10s\n"


def java_text(value: Any) -> str:
    """What Java's ``printf("%s")`` shows of a decoded JSON value: null, a list as ``[a, b]``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return java_bool(value)
    if isinstance(value, list):
        return "[" + ", ".join(java_text(item) for item in value) + "]"
    return str(value)


def split_list(value: str | None) -> list[str] | None:
    """commons-lang's ``StringUtils.split(value, ',')`` with each item trimmed: empty items dropped."""
    if value is None:
        return None
    return [item.strip() for item in value.split(",") if item]


def print_users(ctx: Context, users: list[dict[str, Any]]) -> None:
    ctx.printf(USER_FORMAT, "#UserName", "#Password", "#UserType", "#UserStatus")
    for user in users:
        ctx.printf(USER_FORMAT, *(java_text(user.get(key)) for key in ("username", "password", "userType",
                                                                         "userStatus")))


def print_acls(ctx: Context, acls: list[dict[str, Any]]) -> None:
    ctx.printf(ACL_FORMAT, "#Subject", "#PolicyType", "#Resource", "#Actions", "#SourceIp", "#Decision")
    for acl in acls:
        subject = java_text(acl.get("subject"))
        policies = acl.get("policies") or []
        if not policies:
            ctx.printf(ACL_FORMAT, subject, "", "", "", "", "")
        for policy in policies:
            for entry in policy.get("entries") or []:
                ctx.printf(ACL_FORMAT, subject, java_text(policy.get("policyType")),
                           *(java_text(entry.get(key)) for key in ("resource", "actions", "sourceIps", "decision")))


def _target(verb: str, thing: str, *, reading: bool = False) -> OneOf:
    """The -c/-b pair of each command, in mqadmin's order and words."""
    cluster = Opt("c", "clusterName", f"{verb} {thing} {'for specified' if reading else 'to which'} cluster")
    broker = Opt("b", "brokerAddr", f"{verb} {thing} {'for' if reading else 'to'} which broker")
    return OneOf((broker, cluster) if reading else (cluster, broker))


@defer.inlineCallbacks
def _change(ctx: Context, opts: argparse.Namespace, call, done: str):
    """``call(addr)`` on the broker of -b, or on every broker of the cluster of -c (mqadmin stops at the
    first that fails); ``done % addr`` after each."""
    addrs = [opts.brokerAddr] if opts.brokerAddr else (yield cluster_addrs(ctx, opts.clusterName, slaves=True))
    for addr in addrs:
        yield call(addr)
        ctx.printf(done, addr)


@defer.inlineCallbacks
def _masters(ctx: Context, opts: argparse.Namespace, name: str):
    """The masters of -c's cluster; mqadmin's failure when there are none."""
    addrs = yield cluster_addrs(ctx, opts.clusterName)
    if not addrs:
        raise CommandError(f"{name} command failed, there is no broker in cluster.")
    return addrs


@command("createUser", "Create user to cluster.", _target("create", "user"),
         Opt("u", "username", "the username of user to create.", required=True),
         Opt("p", "password", "the password of user to create", required=True),
         Opt("t", "userType", "the userType of user to create"))
def create_user(ctx: Context, opts: argparse.Namespace):
    return _change(ctx, opts, lambda addr: ctx.admin.access.create_user(addr, opts.username, opts.password,
                                                                        opts.userType),
                   "create user to %s success.\n")


@command("updateUser", "Update user to cluster.", _target("update", "user"),
         Opt("u", "username", "the username of user to update.", required=True),
         OneOf((Opt("p", "password", "the password of user to update"),
                Opt("t", "userType", "the userType of user to update"),
                Opt("s", "userStatus", "the userStatus of user to update"))))
def update_user(ctx: Context, opts: argparse.Namespace):
    return _change(ctx, opts, lambda addr: ctx.admin.access.update_user(addr, opts.username, opts.password,
                                                                        opts.userType, opts.userStatus),
                   "update user to %s success.\n")


@command("deleteUser", "Delete user from cluster.",
         OneOf((Opt("c", "clusterName", "delete acl from which cluster"),
                Opt("b", "brokerAddr", "delete user from which broker"))),
         Opt("u", "username", "the username of user to delete.", required=True))
def delete_user(ctx: Context, opts: argparse.Namespace):
    return _change(ctx, opts, lambda addr: ctx.admin.access.delete_user(addr, opts.username),
                   "delete user to %s success.\n")


@command("getUser", "Get user from cluster.", _target("get", "user", reading=True),
         Opt("u", "username", "the username of user to get"))
@defer.inlineCallbacks
def get_user(ctx: Context, opts: argparse.Namespace):
    addrs = [opts.brokerAddr] if opts.brokerAddr else (yield _masters(ctx, opts, "GetUserSubCommand"))
    for addr in addrs:
        user = yield ctx.admin.access.get_user(addr, opts.username)
        if user:
            print_users(ctx, [user])
            break


@command("listUser", "List user from cluster.", _target("list", "user", reading=True),
         Opt("f", "filter", "the filter to list users"))
@defer.inlineCallbacks
def list_user(ctx: Context, opts: argparse.Namespace):
    if opts.brokerAddr:
        users = yield ctx.admin.access.list_users(opts.brokerAddr, opts.filter)
        if users:
            print_users(ctx, users)
        return
    for addr in (yield _masters(ctx, opts, "ListUserSubCommand")):
        users = yield ctx.admin.access.list_users(addr, opts.filter)
        if users:
            print_users(ctx, users)
            ctx.printf("get user from %s success.\n", addr)
            break


def _acl_options(verb: str) -> tuple[Opt, ...]:
    return (Opt("s", "subject", f"the subject of acl to {verb}.", required=True),
            Opt("r", "resources", f"the resources of acl to {verb}", required=True),
            Opt("a", "actions", f"the actions of acl to {verb}", required=True),
            Opt("i", "sourceIp", f"the sourceIps of acl to {verb}"),
            Opt("d", "decision", f"the decision of acl to {verb}", required=True))


def _acl(opts: argparse.Namespace) -> dict[str, Any]:
    return acl_info(opts.subject, split_list(opts.resources) or [], split_list(opts.actions) or [],
                    split_list(opts.sourceIp), opts.decision)


@command("createAcl", "Create acl to cluster.", _target("create", "acl"), *_acl_options("create"))
def create_acl(ctx: Context, opts: argparse.Namespace):
    return _change(ctx, opts, lambda addr: ctx.admin.access.create_acl(addr, _acl(opts)),
                   "create acl to %s success.\n")


@command("updateAcl", "Update acl to cluster.", _target("update", "acl"), *_acl_options("update"))
def update_acl(ctx: Context, opts: argparse.Namespace):
    return _change(ctx, opts, lambda addr: ctx.admin.access.update_acl(addr, _acl(opts)),
                   "update acl to %s success.\n")


@command("deleteAcl", "Delete acl from cluster.",
         OneOf((Opt("c", "clusterName", "delete acl from which cluster"),
                Opt("b", "brokerAddr", "delete acl from which broker"))),
         Opt("s", "subject", "the subject of acl to delete.", required=True),
         Opt("r", "resources", "the resources of acl to delete"))
def delete_acl(ctx: Context, opts: argparse.Namespace):
    return _change(ctx, opts, lambda addr: ctx.admin.access.delete_acl(addr, opts.subject, opts.resources),
                   "delete acl to %s success.\n")


@command("getAcl", "Get acl from cluster.", _target("get", "acl", reading=True),
         Opt("s", "subject", "the subject of acl to get"))
@defer.inlineCallbacks
def get_acl(ctx: Context, opts: argparse.Namespace):
    addrs = [opts.brokerAddr] if opts.brokerAddr else (yield _masters(ctx, opts, "GetAclSubCommand"))
    for addr in addrs:
        acl = yield ctx.admin.access.get_acl(addr, opts.subject)
        if acl:
            print_acls(ctx, [acl])


@command("listAcl", "List acl from cluster.",
         OneOf((Opt("b", "brokerAddr", "list acl for which broker."),
                Opt("c", "clusterName", "list acl for specified cluster."))),
         Opt("s", "subject", "the subject of acl to filter."),
         Opt("r", "resource", "the resource of acl to filter."))
@defer.inlineCallbacks
def list_acl(ctx: Context, opts: argparse.Namespace):
    addrs = [opts.brokerAddr] if opts.brokerAddr else (yield _masters(ctx, opts, "ListAclSubCommand"))
    for addr in addrs:
        acls = yield ctx.admin.access.list_acls(addr, opts.subject, opts.resource)
        if acls:
            print_acls(ctx, acls)
