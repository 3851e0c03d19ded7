"""Broker commands: ``getBrokerConfig``, ``updateBrokerConfig``, ``brokerStatus``."""

from __future__ import annotations

import argparse

from twisted.internet import defer

from .cluster import cluster_addrs, masters_and_slaves, on_each
from .command import CommandError, Context, OneOf, Opt, command
from .java_text import NO_CLUSTER

#: how getBrokerConfig names a broker group without a master
NO_MASTER = "NO_MASTER"


@command("getBrokerConfig", "Get broker config by cluster or special broker.",
         Opt("b", "brokerAddr", "get which broker"),
         Opt("c", "clusterName", "get which cluster"))
@defer.inlineCallbacks
def get_broker_config(ctx: Context, opts: argparse.Namespace):
    if opts.brokerAddr:
        yield _print_config(ctx, f"============{opts.brokerAddr}============\n", opts.brokerAddr)
    elif opts.clusterName:
        info = yield ctx.admin.namesrv.get_cluster_info()
        table = masters_and_slaves(info, opts.clusterName)
        if table is None:
            ctx.printf("%s", NO_CLUSTER)
        for master, slaves in (table or {}).items():
            yield _print_config(ctx, f"============Master: {master or NO_MASTER}============\n", master)
            for slave in slaves:
                yield _print_config(ctx, f"============My Master: {master or NO_MASTER}=====Slave: {slave}============\n",
                                    slave)


@defer.inlineCallbacks
def _print_config(ctx: Context, title: str, addr: str | None):
    ctx.printf("%s", title)
    if addr is None:
        return
    config = yield ctx.admin.api.get_broker_config(addr)
    if not config:
        ctx.printf("Broker[%s] has no config property!\n", addr)
        return
    for key, value in config.items():
        ctx.printf("%-50s=  %s\n", key, value)
    ctx.printf("\n")


@command("updateBrokerConfig", "Update broker's config.",
         Opt("b", "brokerAddr", "update which broker"),
         Opt("c", "clusterName", "update which cluster"),
         Opt("a", "updateAllBroker", "update all brokers include slave"),
         Opt("k", "key", "config key", required=True),
         Opt("v", "value", "config value", required=True))
@defer.inlineCallbacks
def update_broker_config(ctx: Context, opts: argparse.Namespace):
    settings = {opts.key: opts.value}
    if opts.brokerAddr:
        yield ctx.admin.api.update_broker_config(opts.brokerAddr, settings)
        ctx.printf("update broker config success, %s\n", opts.brokerAddr)
        return
    if not opts.clusterName:
        raise CommandError("name the broker (-b brokerAddr) or the cluster (-c clusterName) to update")
    # -a takes a value in mqadmin, but only its presence counts
    addrs = yield cluster_addrs(ctx, opts.clusterName, slaves=opts.updateAllBroker is not None)
    yield on_each(ctx, addrs, lambda addr: ctx.admin.api.update_broker_config(addr, settings),
                  "update broker config success, %s\n")


@command("brokerStatus", "Fetch broker runtime status data.",
         OneOf((Opt("b", "brokerAddr", "Broker address"),
                Opt("c", "clusterName", "which cluster"))))
@defer.inlineCallbacks
def broker_status(ctx: Context, opts: argparse.Namespace):
    if opts.brokerAddr:
        stats = yield ctx.admin.api.get_runtime_info(opts.brokerAddr)
        for key in sorted(stats):
            ctx.printf("%-32s: %s\n", key, stats[key])
        return
    for addr in (yield cluster_addrs(ctx, opts.clusterName, slaves=True)):
        try:
            stats = yield ctx.admin.api.get_runtime_info(addr)
        except Exception as exc:  # one broker down must not hide the others
            ctx.err.write(f"{addr}: {exc}\n")
            continue
        for key in sorted(stats):
            ctx.printf("%-24s %-32s: %s\n", addr, key, stats[key])
