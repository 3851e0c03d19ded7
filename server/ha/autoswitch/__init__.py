"""Replication in Apache 5.x controller mode (AutoSwitchHAService): the epoch file fencing what each master
wrote (docs/ha.md, "Controller mode")."""
