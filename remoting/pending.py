"""A one-shot answer for the request hot path: the part of Twisted's Deferred a response needs.

A SYNC_FLUSH send is answered after the fsync that covers it; three parties wait for that put (the
processor building the response, :func:`.dispatch.dispatch` fixing its correlation fields, the
connection writing it). A Deferred costs ~3 µs to create and fire with three callbacks, ~0.5 µs as
plain calls, and at 20,000 sends a second that is 5 % of the reactor. :class:`Pending` keeps the
Deferred method names a response chain uses (``addCallback``, ``addCallbacks``, ``addBoth``,
``callback``, ``called``), so code written for a Deferred takes either, and only what they need:

* callbacks run in the order they were added, each getting the previous result; a raising callback
  passes a :class:`~twisted.python.failure.Failure` on to the next errback, as with a Deferred;
* callbacks must return plain values: a Deferred returned from one is not waited for (use
  :meth:`Pending.deferred` to hand the answer to Deferred code);
* no cancellation, no pausing, no unhandled-error logging at garbage collection.
"""

from __future__ import annotations

from typing import Any, Callable

from twisted.internet import defer
from twisted.python.failure import Failure

_Step = tuple[Callable[..., Any] | None, Callable[..., Any] | None, tuple]


class Pending:
    __slots__ = ("called", "result", "_steps")

    def __init__(self) -> None:
        self.called = False
        self.result: Any = None
        self._steps: list[_Step] | None = []

    def addCallbacks(self, callback: Callable[..., Any] | None, errback: Callable[..., Any] | None = None,
                     callbackArgs: tuple = (), errbackArgs: tuple = ()) -> "Pending":  # noqa: N802, N803
        if callbackArgs != errbackArgs and errback is not None and callback is not None:
            raise ValueError("Pending passes the same extra arguments to a step's callback and errback")
        step = (callback, errback, callbackArgs or errbackArgs)
        if self._steps is None:  # already fired: run the step now
            self._steps = [step]
            self._run()
        else:
            self._steps.append(step)
        return self

    def addCallback(self, callback: Callable[..., Any], *args: Any) -> "Pending":  # noqa: N802
        return self.addCallbacks(callback, None, args)

    def addErrback(self, errback: Callable[..., Any], *args: Any) -> "Pending":  # noqa: N802
        return self.addCallbacks(None, errback, (), args)

    def addBoth(self, fn: Callable[..., Any], *args: Any) -> "Pending":  # noqa: N802
        return self.addCallbacks(fn, fn, args, args)

    def callback(self, result: Any) -> None:
        if self.called:
            raise defer.AlreadyCalledError(self)
        self.called = True
        self.result = result
        self._run()

    def _run(self) -> None:
        steps = self._steps if self._steps is not None else []
        result = self.result
        i = 0
        while i < len(steps):  # a step may add steps: they run in this loop
            callback, errback, args = steps[i]
            i += 1
            fn = errback if isinstance(result, Failure) else callback
            if fn is None:
                continue
            try:
                result = fn(result, *args)
            except Exception:  # noqa: BLE001 - passed on to the next errback, as a Deferred does
                result = Failure()
        self.result = result
        self._steps = None

    def deferred(self) -> defer.Deferred:
        """A Deferred firing with this answer (for code that chains Deferreds)."""
        d = defer.Deferred()
        self.addBoth(d.callback)
        return d


#: What a handler may return to answer later.
PROMISES = (defer.Deferred, Pending)
