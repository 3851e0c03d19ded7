"""Blocking facade over the Deferred SDK, for tests, scripts and compat fixtures.

``BlockingAdmin("127.0.0.1:9876").get_route_info("T")`` runs the call in the reactor thread started by
:mod:`sdk_py.reactor_thread` and waits for it; errors are raised as they would fail the Deferred
(MQResponseError, RemotingTimeoutError...). Not for use from inside the reactor thread.
"""

from __future__ import annotations

from typing import Any

from . import reactor_thread
from .admin import DEFAULT_TIMEOUT, NamesrvAdmin
from ferrymq.remoting import RemotingClient


class BlockingAdmin:
    """Every public method of :class:`NamesrvAdmin`, blocking: same arguments, plain return values."""

    def __init__(self, namesrv_addr: str, timeout: float = DEFAULT_TIMEOUT):
        reactor_thread.ensure_running()
        self.timeout = timeout
        self._admin: NamesrvAdmin = reactor_thread.call(
            lambda: NamesrvAdmin(namesrv_addr, RemotingClient(), timeout)
        )

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        target = getattr(self._admin, name)
        if not callable(target):
            return target

        def blocking(*args: Any, **kwargs: Any) -> Any:
            # The call's own timeout fires first; the margin only guards against a stuck reactor.
            return reactor_thread.call(target, *args, timeout=self.timeout + 10, **kwargs)

        blocking.__name__ = name
        blocking.__doc__ = target.__doc__
        return blocking

    def close(self) -> None:
        reactor_thread.call(self._admin.client.close)

    def __enter__(self) -> "BlockingAdmin":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
