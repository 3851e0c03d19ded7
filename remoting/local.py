"""A server in this process as a peer: its request table run on a command, with no socket between.

A gateway served by a broker process publishes this way (DESIGN.md: in standalone mode gateways call the
broker in process): the request is the one a client would write, and the broker's own dispatch answers
it, refusals included, so nothing is encoded, written to loopback and decoded twice over.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from twisted.internet import defer
from twisted.python.failure import Failure

from ferrymq.wire.command import RemotingCommand

from .dispatch import Processor, dispatch
from .errors import RemotingTimeoutError
from .pending import Pending


class LocalChannel:
    """What a processor sees of an in-process caller: its address (a message's BORNHOST) and nothing
    to write to, so only requests answered by the processor's return value may come this way."""

    __slots__ = ("remote_address", "local_address", "attrs")

    def __init__(self, remote_address: str, local_address: str = ""):
        self.remote_address = remote_address
        self.local_address = local_address
        self.attrs: dict[str, Any] = {}

    def __repr__(self) -> str:
        return f"<LocalChannel {self.remote_address}>"

    @property
    def is_active(self) -> bool:
        return True


class LocalPeer:
    """``invoke`` as :meth:`.RemotingClient.invoke` has it, answered by ``processor`` in this process;
    call it from the reactor thread."""

    def __init__(self, processor: Processor, remote_address: str, clock: Any = None):
        self.processor = processor
        self.channel = LocalChannel(remote_address)
        self._clock = clock

    def invoke(self, cmd: RemotingCommand, timeout: float) -> defer.Deferred:
        """Fires with the answer, or fails with RemotingTimeoutError when it takes over ``timeout`` s
        (a store waiting for its flush), as a remote call would."""
        result = within(dispatch(self.processor, cmd, self.channel), timeout, self._clock,
                        lambda: RemotingTimeoutError(self.channel.remote_address, cmd.code, cmd.opaque, timeout))
        return result if isinstance(result, defer.Deferred) else defer.succeed(result)


def within(result: Any, timeout: float, clock: Any, timed_out: Callable[[], Exception]) -> Any:
    """A processor's outcome for a caller of its process: an answer given at once as it is; a later one
    (a :class:`Pending` or a Deferred: a store waiting for its flush, a topic waiting for its
    registration) as a Deferred that fails with ``timed_out()`` after ``timeout`` s, as a remote call
    would. ``clock``: the reactor's, None for the global reactor."""
    if isinstance(result, Pending):
        result = result.deferred()
    if isinstance(result, defer.Deferred):
        if clock is None:
            from twisted.internet import reactor as clock
        result.addTimeout(timeout, clock, onTimeoutCancel=lambda _result, _t: Failure(timed_out()))
    return result
