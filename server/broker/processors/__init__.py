"""Request processors: one module per concern, each exposing ``table()`` (request code -> handler).

A handler is ``handler(cmd, channel)`` returning a RemotingCommand, None, or a Deferred (sync flush,
long polling); :func:`build_table` merges them into the transport's processor table. Codes absent
from the table get REQUEST_CODE_NOT_SUPPORTED with a remark naming the code (server.remoting).
"""

from __future__ import annotations

from typing import Any

from ..context import BrokerContext
from .admin import AdminProcessor
from .client import ClientProcessor
from .offsets import OffsetProcessor
from .pull import PullProcessor
from .query import QueryProcessor
from .retry import SendBackProcessor
from .send import SendProcessor


def build_table(ctx: BrokerContext, pull: PullProcessor | None = None, extra: tuple = ()) -> dict[int, Any]:
    """All processors' tables merged; ``extra`` adds objects with ``table()`` (e.g. a transaction service)."""
    table: dict[int, Any] = {}
    for proc in (SendProcessor(ctx), pull or PullProcessor(ctx), ClientProcessor(ctx), OffsetProcessor(ctx),
                 SendBackProcessor(ctx), QueryProcessor(ctx), AdminProcessor(ctx), *extra):
        overlap = set(table) & set(proc.table())
        if overlap:
            raise RuntimeError(f"request codes {sorted(overlap)} have two processors")
        table.update(proc.table())
    return table
