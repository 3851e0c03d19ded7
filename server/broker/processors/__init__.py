"""Request processors: one module per concern, each method marked ``@handles(code, ...)``.

A handler is ``handler(cmd, channel, header)`` with the header its code declares (wire.requests),
returning a RemotingCommand, None, or a promise (sync flush, long polling), or raising Refusal;
:func:`build_table` merges them into the transport's processor table. Codes absent from the table get
REQUEST_CODE_NOT_SUPPORTED with a remark naming the code (remoting.dispatch).
"""

from __future__ import annotations

from ferrymq.remoting.dispatch import Route, routes

from ..context import BrokerContext
from .admin import AdminProcessor
from .client import ClientProcessor
from .offsets import OffsetProcessor
from .pop import PopProcessor
from .pull import PullProcessor
from .query import QueryProcessor
from .retry import SendBackProcessor
from .send import SendProcessor


def build_table(ctx: BrokerContext, pull: PullProcessor | None = None, extra: tuple = ()) -> dict[int, Route]:
    """Every processor's handlers in one table; ``extra`` adds more processors (e.g. transactions)."""
    return routes((SendProcessor(ctx), pull or PullProcessor(ctx), ClientProcessor(ctx), OffsetProcessor(ctx),
                   SendBackProcessor(ctx), QueryProcessor(ctx), AdminProcessor(ctx), PopProcessor(ctx),
                   *extra))
