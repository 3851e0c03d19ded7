"""Blocking facades over the Twisted-native producer, consumers and MQAdmin, for scripts and tests.

The reactor runs in the background thread of :mod:`sdk_py.reactor_thread`; each call here is handed to
it and waited on. A push consumer's plain Python callback runs in the reactor's thread pool, so it may
block (sleep, do I/O) without stalling the client::

    producer = BlockingProducer("pg", "127.0.0.1:9876"); producer.start()
    result = producer.send(Message("T", b"hello", tags="TagA"))

    consumer = BlockingPushConsumer("cg", "127.0.0.1:9876")
    consumer.subscribe("T", "TagA || TagB")
    consumer.register_listener(lambda msgs, ctx: print(msgs))
    consumer.start()

Not for use from inside the reactor thread (use the Deferred API there).
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import enum
import functools
from collections.abc import Callable
from typing import Any

from twisted.internet import threads

from . import reactor_thread
from .consumer.pull import PullConsumer
from .consumer.push import PushConsumer
from .message import Message, SendResult
from .mq_admin import MQAdmin
from .producer import Producer

#: Longest a facade call waits for the reactor beyond the call's own timeouts.
CALL_TIMEOUT = 60.0

#: Attribute values a view hands back as they are: data, not objects whose methods run in the reactor.
_PLAIN_TYPES = (str, bytes, bool, int, float, complex, list, tuple, dict, set, frozenset, enum.Enum, type(None))


def _is_plain(value: Any) -> bool:
    return isinstance(value, _PLAIN_TYPES) or (dataclasses.is_dataclass(value) and not isinstance(value, type))


class BlockingView:
    """An object of the reactor thread seen from another: each public method blocks (same arguments, plain
    return values, a failed Deferred raised), and each part (``admin.namesrv``, ``producer.instance``) is a
    view too, so no Deferred escapes whatever attribute path a script takes. Data attributes are returned as
    they are."""

    def __init__(self, target: Any, call_timeout: float = CALL_TIMEOUT):
        self._target = target
        self._call_timeout = call_timeout

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        value = getattr(self._target, name)
        if callable(value):
            return self._blocking(value)
        if _is_plain(value):
            return value
        return BlockingView(value, self._call_timeout)

    @property
    def wrapped(self) -> Any:
        """The Twisted-native object (touch it only from the reactor thread)."""
        return self._target

    def __dir__(self) -> list[str]:
        return sorted(set(super().__dir__()) | {n for n in dir(self._target) if not n.startswith("_")})

    def _blocking(self, target: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(target)  # its name, docstring and signature
        def blocking(*args: Any, **kwargs: Any) -> Any:
            return reactor_thread.call(target, *args, timeout=self._call_timeout, **kwargs)

        return blocking

    def __repr__(self) -> str:
        return f"<blocking {self._target!r}>"


class _Blocking(BlockingView):
    """A facade: the wrapped object is made in the reactor thread, then seen through a :class:`BlockingView`."""

    def __init__(self, factory: Callable[[], Any], call_timeout: float = CALL_TIMEOUT):
        reactor_thread.ensure_running()
        super().__init__(reactor_thread.call(factory), call_timeout)

    def _future(self, fn: Callable[[], Any]) -> concurrent.futures.Future:
        from twisted.internet import defer, reactor

        future: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            defer.maybeDeferred(fn).addCallbacks(future.set_result, lambda f: future.set_exception(f.value))

        reactor.callFromThread(run)
        return future

    def __enter__(self):
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.shutdown()


class BlockingProducer(_Blocking):
    """:class:`Producer` with blocking calls; ``send_async`` returns a ``concurrent.futures.Future``."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **kwargs: Any):
        super().__init__(lambda: Producer(group, namesrv_addr, **kwargs))

    def send_async(
        self, msg: Message, callback: Callable[[concurrent.futures.Future], Any] | None = None,
        timeout: float | None = None,
    ) -> "concurrent.futures.Future[SendResult]":
        """Send without waiting; ``callback(future)`` runs when the broker has answered (or it failed)."""
        future = self._future(lambda: self._target.send_async(msg, timeout))
        if callback is not None:
            future.add_done_callback(callback)
        return future


class BlockingPushConsumer(_Blocking):
    """:class:`PushConsumer` whose listener is a plain callable run in a worker thread."""

    def __init__(self, group: str, namesrv_addr: str | None = None, **kwargs: Any):
        super().__init__(lambda: PushConsumer(group, namesrv_addr, **kwargs))

    def register_listener(self, listener: Callable[[list, Any], Any], *, orderly: bool = False) -> None:
        """``listener(msgs, context)`` returns a status (None = success); it runs off the reactor thread."""

        def in_thread(msgs: list, context: Any):
            return threads.deferToThread(listener, msgs, context)

        reactor_thread.call(self._target.register_listener, in_thread, orderly=orderly)


class BlockingPullConsumer(_Blocking):
    def __init__(self, group: str, namesrv_addr: str | None = None, **kwargs: Any):
        super().__init__(lambda: PullConsumer(group, namesrv_addr, **kwargs))


class BlockingMQAdmin(_Blocking):
    def __init__(self, namesrv_addr: str, **kwargs: Any):
        super().__init__(lambda: MQAdmin(namesrv_addr, **kwargs))

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
