"""Blocking facade over the Deferred SDK, for tests, scripts and compat fixtures.

``BlockingAdmin("127.0.0.1:9876").get_route_info("T")`` runs the call in the reactor thread started by
:mod:`sdk_py.reactor_thread` and waits for it; errors are raised as they would fail the Deferred
(MQResponseError, RemotingTimeoutError...). Not for use from inside the reactor thread.
"""

from __future__ import annotations

from . import reactor_thread
from .admin import DEFAULT_TIMEOUT, NamesrvAdmin
from .blocking_clients import _Blocking
from ferrymq.remoting import RemotingClient


class BlockingAdmin(_Blocking):
    """Every public method of :class:`NamesrvAdmin`, blocking: same arguments, plain return values."""

    def __init__(self, namesrv_addr: str, timeout: float = DEFAULT_TIMEOUT):
        # The call's own timeout fires first; the margin only guards against a stuck reactor.
        super().__init__(lambda: NamesrvAdmin(namesrv_addr, RemotingClient(), timeout), call_timeout=timeout + 10)
        self.timeout = timeout

    def close(self) -> None:
        reactor_thread.call(self.wrapped.client.close)

    def __enter__(self) -> "BlockingAdmin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
