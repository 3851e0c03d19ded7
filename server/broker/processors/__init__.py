"""Request processors: one module per concern, each exposing ``table()`` (request code -> handler).

A handler is ``handler(cmd, channel)`` returning a RemotingCommand, None, or a Deferred (sync flush,
long polling); :func:`build_table` merges them into the transport's processor table. Codes absent
from the table get REQUEST_CODE_NOT_SUPPORTED with a remark naming the code (server.remoting).
"""

from __future__ import annotations

from typing import Any

from ferrymq.remoting.dispatch import routes

from ..context import BrokerContext
from .admin import AdminProcessor
from .client import ClientProcessor
from .offsets import OffsetProcessor
from .pull import PullProcessor
from .query import QueryProcessor
from .retry import SendBackProcessor
from .send import SendProcessor


def build_table(ctx: BrokerContext, pull: PullProcessor | None = None, extra: tuple = ()) -> dict[int, Any]:
    """All processors' handlers in one table; ``extra`` adds more processors (e.g. transactions)."""
    procs = (SendProcessor(ctx), pull or PullProcessor(ctx), ClientProcessor(ctx), OffsetProcessor(ctx),
             SendBackProcessor(ctx), QueryProcessor(ctx), AdminProcessor(ctx), *extra)
    table: dict[int, Any] = routes(p for p in procs if not hasattr(p, "table"))
    for proc in procs:
        if not hasattr(proc, "table"):
            continue
        overlap = set(table) & set(proc.table())
        if overlap:
            raise RuntimeError(f"request codes {sorted(overlap)} have two processors")
        table.update(proc.table())
    return table
